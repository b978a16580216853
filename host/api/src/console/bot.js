// Bot source: each flow of the latest revision drawn as a graph of its states (the
// transitions between them labelled with their conditions), its intents, and the whole bot
// as YAML with line numbers; methods with theirs.
import { api, backTo, el, enc, errorBox, show } from './lib.js';

const NS = 'http://www.w3.org/2000/svg';
const NODE_W = 150;
const NODE_H = 34;
const COL = 220;
const ROW = 62;

/** A transition's label: its condition (cut), `fallback`, or nothing. */
function edgeLabel(t) {
  if (typeof t === 'string') return t;
  if (t && typeof t === 'object') {
    if (t.fallback) return 'fallback';
    if (typeof t.condition === 'string') return t.condition;
  }
  return '';
}

/** The states in layers: the initial state first, then each state one layer after the first
 *  state that reaches it; states nothing reaches come last. */
function layers(states) {
  const names = Object.keys(states);
  const layer = new Map();
  const start = names.find((n) => states[n].initial) || names[0];
  const queue = start ? [start] : [];
  if (start) layer.set(start, 0);
  while (queue.length) {
    const s = queue.shift();
    for (const t of Object.keys((states[s] && states[s].transitions) || {})) {
      if (states[t] && !layer.has(t)) { layer.set(t, layer.get(s) + 1); queue.push(t); }
    }
  }
  const last = Math.max(-1, ...layer.values()) + 1;
  for (const n of names) if (!layer.has(n)) layer.set(n, last);
  return layer;
}

/** A flow's states and transitions as an SVG graph: initial state marked, end states
 *  filled, each transition an arrow labelled with its condition (whole on hover). */
function flowGraph(name, states) {
  const layer = layers(states);
  const rows = new Map();
  const pos = new Map();
  for (const [s, l] of layer) {
    const r = rows.get(l) || 0;
    rows.set(l, r + 1);
    pos.set(s, { x: 10 + l * COL, y: 10 + r * ROW });
  }
  const w = 20 + Math.max(...[...layer.values()].map((l) => l * COL)) + NODE_W;
  const h = 20 + Math.max(...[...rows.values()]) * ROW;
  const svg = document.createElementNS(NS, 'svg');
  const node = (parent, tag, attrs, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    parent.append(n);
    return n;
  };
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.setAttribute('width', String(w));
  svg.setAttribute('class', 'graph');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `Flow ${name}: ${Object.keys(states).length} states`);
  const defs = node(svg, 'defs', {});
  const marker = node(defs, 'marker', { id: `arrow-${name}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  node(marker, 'path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' });
  for (const [s, st] of Object.entries(states)) {
    for (const [t, how] of Object.entries(st.transitions || {})) {
      if (!pos.has(t)) continue;
      const a = pos.get(s);
      const b = pos.get(t);
      let d;
      let lx;
      let ly;
      if (s === t) {
        // A loop over the node's top.
        d = `M${a.x + NODE_W * 0.35},${a.y} C${a.x + NODE_W * 0.35},${a.y - 26} ${a.x + NODE_W * 0.65},${a.y - 26} ${a.x + NODE_W * 0.65},${a.y}`;
        [lx, ly] = [a.x + NODE_W / 2, a.y - 22];
      } else if (b.x > a.x) {
        const [x1, y1, x2, y2] = [a.x + NODE_W, a.y + NODE_H / 2, b.x, b.y + NODE_H / 2];
        d = `M${x1},${y1} C${x1 + 40},${y1} ${x2 - 40},${y2} ${x2},${y2}`;
        [lx, ly] = [(x1 + x2) / 2, (y1 + y2) / 2 - 4];
      } else {
        // Back or sideways: under the nodes.
        const [x1, y1, x2, y2] = [a.x + NODE_W / 2, a.y + NODE_H, b.x + NODE_W / 2, b.y + NODE_H];
        d = `M${x1},${y1} C${x1},${y1 + 30} ${x2},${y2 + 30} ${x2},${y2}`;
        [lx, ly] = [(x1 + x2) / 2, Math.max(y1, y2) + 26];
      }
      const edge = node(svg, 'path', { d, class: 'edge', 'marker-end': `url(#arrow-${name})` });
      const full = edgeLabel(how);
      node(edge, 'title', {}, `${s} → ${t}${full ? ': ' + full : ''}`);
      if (full) {
        const text = node(svg, 'text', { x: lx, y: ly, 'text-anchor': 'middle', class: 'edge-label' }, full.length > 28 ? `${full.slice(0, 27)}…` : full);
        node(text, 'title', {}, full);
      }
    }
  }
  for (const [s, st] of Object.entries(states)) {
    const { x, y } = pos.get(s);
    const g = node(svg, 'g', { class: `state${st.initial ? ' initial' : ''}${st.end ? ' end' : ''}`, 'data-state': s });
    node(g, 'rect', { x, y, width: NODE_W, height: NODE_H, rx: 8 });
    node(g, 'text', { x: x + NODE_W / 2, y: y + NODE_H / 2 + 4, 'text-anchor': 'middle' }, `${st.initial ? '▶ ' : ''}${s.length > 18 ? s.slice(0, 17) + '…' : s}`);
    node(g, 'title', {}, `${s}${st.initial ? ' (initial)' : ''}${st.end ? ' (end)' : ''}`);
  }
  return svg;
}

/** Text with line numbers (the first line is `first`); `id` names the block. */
function numbered(text, id, first = 1) {
  return el('pre', { class: 'mono numbered', id, tabindex: 0 },
    String(text).split('\n').map((line, i) => el('span', { class: 'line', 'data-n': first + i, id: `${id}-${first + i}` }, line, '\n')));
}

/** The latest bot revision: each flow as a graph with its transitions listed (for screen
 *  readers and search), its intents, the bot as YAML with line numbers; read-only (edit the
 *  files and `botbox push`). */
export async function botSource(pid) {
  const [bot, yamlText] = await Promise.all([
    api('GET', `/projects/${enc(pid)}/bot`),
    api('GET', `/projects/${enc(pid)}/bot?format=yaml`, undefined, { text: true }).catch((e) => e),
  ]);
  const pretty = (v) => el('pre', { class: 'mono', tabindex: 0 }, JSON.stringify(v, null, 2));
  const flows = Object.entries(bot.flows || {}).map(([name, f]) => {
    const states = f.states || {};
    const transitions = Object.entries(states).flatMap(([s, st]) => Object.entries(st.transitions || {})
      .map(([t, how]) => el('li', {}, `${s} → ${t}`, edgeLabel(how) ? `: ${edgeLabel(how)}` : '')));
    return el('details', { class: 'card flow', open: true },
      el('summary', {}, el('strong', {}, name), ` · ${Object.keys(states).length} states, ${Object.keys(f.intents || {}).length} intents`),
      el('div', { class: 'graph-box', tabindex: 0 }, flowGraph(name, states)),
      el('details', {}, el('summary', {}, `Transitions (${transitions.length})`), el('ul', {}, transitions)),
      el('details', {}, el('summary', {}, 'Intents'), pretty(f.intents || {})));
  });
  // "bot.yml:17:5" in an error: the line found by its number.
  const line = el('input', { id: 'goto-line', type: 'number', min: 1, 'aria-label': 'Line number', placeholder: 'line' });
  const goTo = el('form', { class: 'filters', onsubmit: (ev) => {
    ev.preventDefault();
    const target = document.getElementById(`yaml-${line.value}`);
    document.querySelectorAll('.line.here').forEach((n) => n.classList.remove('here'));
    if (target) { target.classList.add('here'); target.scrollIntoView({ block: 'center' }); }
  } }, el('label', { for: 'goto-line', class: 'inline' }, 'Go to line '), line, ' ', el('button', { type: 'submit' }, 'Go'));
  const yaml = typeof yamlText === 'string' ? numbered(yamlText, 'yaml') : errorBox(yamlText);
  show(el('h1', {}, `${bot.name || 'Bot'} ${bot.version || ''}`),
    el('p', {}, backTo(pid), ' · read-only: edit the files and `botbox push`'),
    flows.length ? flows : el('p', { class: 'muted' }, 'No flows.'),
    bot.methods ? el('div', { class: 'card' }, el('h2', {}, 'Methods'),
      Object.entries(bot.methods).map(([sig, code], i) => el('div', {}, el('strong', { class: 'mono' }, sig),
        numbered(typeof code === 'string' ? code : JSON.stringify(code, null, 2), `method-${i}`)))) : null,
    el('details', { class: 'card', open: true }, el('summary', { id: 'yaml-toggle' }, 'The whole bot as YAML'), goTo, yaml));
}
