// Analytics of an environment: figures and charts from the server's aggregation.
import { api, backTo, duration, el, enc, errorBox, plural, show } from './lib.js';

/** A bar chart (SVG, drawn here: a few hundred bars need no chart library) of `values` with
 * their `labels`; the figures are also in a table beside it for screen readers. */
function barChart(title, labels, values, fmt = String) {
  const NS = 'http://www.w3.org/2000/svg';
  const w = 720, h = 180, pad = 24;
  const max = Math.max(1, ...values);
  // `fmt` writes a value for people (a count, a duration).
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${h + pad}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', title);
  svg.setAttribute('class', 'chart');
  const bw = (w - pad) / Math.max(1, values.length);
  values.forEach((v, i) => {
    const r = document.createElementNS(NS, 'rect');
    const bh = Math.round((v / max) * (h - 10));
    r.setAttribute('x', String(pad + i * bw + 1));
    r.setAttribute('y', String(h - bh));
    r.setAttribute('width', String(Math.max(1, bw - 2)));
    r.setAttribute('height', String(bh));
    const t = document.createElementNS(NS, 'title');
    t.textContent = `${labels[i]}: ${fmt(v)}`;
    r.append(t);
    svg.append(r);
  });
  const axis = document.createElementNS(NS, 'text');
  axis.setAttribute('x', '0');
  axis.setAttribute('y', '12');
  axis.textContent = fmt(max);
  svg.append(axis);
  return el('figure', { class: 'figure' }, el('figcaption', {}, title), svg);
}

export async function analyticsView(pid, envName) {
  const range = el('select', { id: 'range', 'aria-label': 'Range' },
    [['24', 'last 24 hours, by hour'], ['168', 'last 7 days, by day'], ['720', 'last 30 days, by day']].map(([v, t]) => el('option', { value: v }, t)));
  const tests = el('input', { id: 'include-tests', type: 'checkbox' });
  const out = el('div', { id: 'analytics' });
  const load = async () => {
    out.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      const hours = Number(range.value);
      const to = Date.now();
      const a = await api('GET', `/projects/${enc(pid)}/analytics?environment=${enc(envName)}&from=${to - hours * 3600_000}&to=${to + 1}&bucket=${hours <= 24 ? 'hour' : 'day'}${tests.checked ? '&includeTests=true' : ''}`);
      const label = (ms) => (a.bucket === 'hour' ? new Date(ms).toLocaleString([], { hour: '2-digit', day: 'numeric', month: 'short' }) : new Date(ms).toLocaleDateString());
      // Every bucket of the range, empty ones as zero (the server leaves them out).
      const size = a.bucket === 'hour' ? 3600_000 : 86_400_000;
      const byStart = new Map(a.series.map((b) => [b.start, b]));
      const series = [];
      for (let t = Math.floor(a.from / size) * size; t < a.to; t += size) {
        series.push(byStart.get(t) || { start: t, messages: 0, replies: 0, activeUsers: 0, errors: 0, latencyP50Us: null, latencyP99Us: null });
      }
      const labels = series.map((b) => label(b.start));
      const counted = (title, rows) => el('div', { class: 'card' }, el('h2', {}, title), rows.length
        ? el('table', {}, el('tbody', {}, rows.map((r) => el('tr', {}, el('td', {}, r.name), el('td', {}, r.count)))))
        : el('p', { class: 'muted' }, 'None in this range.'));
      out.replaceChildren(
        el('div', { class: 'card figures' },
          el('span', { id: 'total-messages' }, plural(a.messages, 'message')), ' · ',
          el('span', {}, plural(a.activeUsers, 'active user')), ' · ',
          el('span', {}, `fallback ${(a.fallbackRate * 100).toFixed(1)} %`), ' · ',
          el('span', {}, plural(a.series.reduce((n, b) => n + b.errors, 0), 'error')), ' · ',
          el('span', { id: 'latency' }, a.latencyP50Us == null ? 'no timed steps'
            : `step latency p50 ${duration(a.latencyP50Us)}, p99 ${duration(a.latencyP99Us)}`)),
        a.series.length ? el('div', { class: 'card' },
          barChart(`Messages per ${a.bucket}`, labels, series.map((b) => b.messages)),
          barChart(`Active users per ${a.bucket}`, labels, series.map((b) => b.activeUsers)),
          barChart(`Errors per ${a.bucket}`, labels, series.map((b) => b.errors)),
          barChart(`Step latency p50 per ${a.bucket}`, labels, series.map((b) => b.latencyP50Us || 0), duration),
          barChart(`Step latency p99 per ${a.bucket}`, labels, series.map((b) => b.latencyP99Us || 0), duration))
          : el('p', { class: 'muted card' }, 'No messages in this range.'),
        el('div', { class: 'grid' }, counted('Top intents', a.topIntents), counted('Top flows', a.topFlows)));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  range.addEventListener('change', load);
  tests.addEventListener('change', load);
  show(el('h1', {}, `Analytics · ${envName}`),
    el('p', {}, backTo(pid)),
    el('p', { class: 'filters' }, el('label', { for: 'range' }, 'Range'), range, ' ',
      tests, el('label', { for: 'include-tests', class: 'inline' }, 'Include the console\'s test chats')), out);
  await load();
}
