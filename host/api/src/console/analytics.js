// Analytics of an environment: figures and charts from the server's aggregation.
import { api, backTo, duration, el, enc, errorBox, plural, show } from './lib.js';

/** A bar chart (SVG, drawn here) of `values` over time: a y axis from 0 to the largest
 *  value (only 0 when every value is 0: the chart says "none"), up to six labelled ticks
 *  on the time axis (`tick` writes a bucket's start), each bar's time and value on hover
 *  (and in its tooltip). Drawn at the page's width, so its text keeps its size on a phone. */
function barChart(title, starts, values, { fmt = String, tick, label }) {
  const NS = 'http://www.w3.org/2000/svg';
  const w = Math.max(300, Math.min(1100, document.getElementById('main').clientWidth - 64));
  const h = 120, left = 52, bottom = 20, top = 6;
  const peak = Math.max(0, ...values);
  const max = peak > 0 ? peak : 1;
  const svg = document.createElementNS(NS, 'svg');
  const node = (tag, attrs, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  svg.setAttribute('viewBox', `0 0 ${w} ${h + top + bottom}`);
  svg.setAttribute('width', String(w));
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', peak > 0 ? `${title}: at most ${fmt(peak)}` : `${title}: none`);
  svg.setAttribute('class', 'chart');
  const readout = el('span', { class: 'readout muted' });
  const bw = (w - left) / Math.max(1, values.length);
  node('line', { x1: left, y1: top + h, x2: w, y2: top + h, class: 'axis' });
  if (peak > 0) node('text', { x: left - 6, y: top + 10, 'text-anchor': 'end' }, fmt(peak));
  node('text', { x: left - 6, y: top + h, 'text-anchor': 'end' }, fmt(0));
  values.forEach((v, i) => {
    const bh = Math.round((v / max) * h);
    const r = node('rect', { x: left + i * bw + 1, y: top + h - bh, width: Math.max(1, bw - 2), height: Math.max(bh, v > 0 ? 1 : 0) });
    const said = `${label(starts[i])}: ${fmt(v)}`;
    const t = document.createElementNS(NS, 'title');
    t.textContent = said;
    r.append(t);
    r.addEventListener('mouseenter', () => { readout.textContent = said; });
  });
  // As many ticks as fit, about 80 px apart, six at most.
  const ticks = Math.max(1, Math.min(6, values.length, Math.floor((w - left) / 80)));
  for (let k = 0; k < ticks; k++) {
    const i = ticks === 1 ? 0 : Math.round((k * (values.length - 1)) / (ticks - 1));
    const x = left + i * bw + bw / 2;
    node('text', { x, y: top + h + 15, 'text-anchor': k === 0 ? 'start' : k === ticks - 1 ? 'end' : 'middle' }, tick(starts[i]));
  }
  const none = peak > 0 ? '' : el('span', { class: 'muted' }, '(none in this range)');
  return el('figure', { class: 'figure' }, el('figcaption', {}, title, ' ', none, ' ', readout), svg);
}

export async function analyticsView(pid, envName) {
  const range = el('select', { id: 'range', 'aria-label': 'Range' },
    [['24', 'last 24 hours, by hour'], ['168', 'last 7 days, by day'], ['720', 'last 30 days, by day']].map(([v, t]) => el('option', { value: v }, t)));
  const tests = el('input', { id: 'include-tests', type: 'checkbox' });
  const out = el('div', { id: 'analytics' });
  let last = null;
  const load = async () => {
    out.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      const hours = Number(range.value);
      const to = Date.now();
      last = await api('GET', `/projects/${enc(pid)}/analytics?environment=${enc(envName)}&from=${to - hours * 3600_000}&to=${to + 1}&bucket=${hours <= 24 ? 'hour' : 'day'}${tests.checked ? '&includeTests=true' : ''}`);
      draw(last);
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  // Charts are drawn at the page's width: drawn again (from the same answer) when it changes.
  let drawnAt = 0;
  const redraw = () => {
    if (!out.isConnected) { window.removeEventListener('resize', redraw); return; }
    const w = document.getElementById('main').clientWidth;
    if (last && Math.abs(w - drawnAt) > 40) draw(last);
  };
  window.addEventListener('resize', redraw);
  const draw = (a) => {
    drawnAt = document.getElementById('main').clientWidth;
    const label = (ms) => (a.bucket === 'hour' ? new Date(ms).toLocaleString([], { hour: '2-digit', day: 'numeric', month: 'short' }) : new Date(ms).toLocaleDateString());
    // Every bucket of the range, empty ones as zero (the server leaves them out).
    const size = a.bucket === 'hour' ? 3600_000 : 86_400_000;
    const byStart = new Map(a.series.map((b) => [b.start, b]));
    const series = [];
    for (let t = Math.floor(a.from / size) * size; t < a.to; t += size) {
      series.push(byStart.get(t) || { start: t, messages: 0, replies: 0, activeUsers: 0, errors: 0, latencyP50Us: null, latencyP99Us: null });
    }
    // Ticks in the viewer's time zone: hours as 14:00 (the date at midnight), days as 28 Nov.
    const tick = (ms) => {
      const d = new Date(ms);
      if (a.bucket !== 'hour') return d.toLocaleDateString([], { day: 'numeric', month: 'short' });
      return d.getHours() === 0 ? d.toLocaleDateString([], { day: 'numeric', month: 'short' }) : d.toLocaleTimeString([], { hour: 'numeric' });
    };
    const starts = series.map((b) => b.start);
    const chart = (title, values, fmt) => barChart(title, starts, values, { fmt, tick, label });
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
        chart(`Messages per ${a.bucket}`, series.map((b) => b.messages)),
        chart(`Active users per ${a.bucket}`, series.map((b) => b.activeUsers)),
        chart(`Errors per ${a.bucket}`, series.map((b) => b.errors)),
        chart(`Step latency p50 per ${a.bucket}`, series.map((b) => b.latencyP50Us || 0), duration),
        chart(`Step latency p99 per ${a.bucket}`, series.map((b) => b.latencyP99Us || 0), duration))
        : el('p', { class: 'muted card' }, 'No messages in this range.'),
      el('div', { class: 'grid' }, counted('Top intents', a.topIntents), counted('Top flows', a.topFlows)));
  };
  range.addEventListener('change', load);
  tests.addEventListener('change', load);
  show(el('h1', {}, `Analytics · ${envName}`),
    el('p', {}, backTo(pid)),
    el('p', { class: 'filters' }, el('label', { for: 'range' }, 'Range'), range, ' ',
      tests, el('label', { for: 'include-tests', class: 'inline' }, 'Include the console\'s test chats')), out);
  await load();
}
