// Bot source: each flow of the latest revision drawn as a graph of its states (the
// transitions between them labelled with their conditions), its intents, and the whole bot
// as YAML with line numbers; methods with theirs.
//
// The graphs are laid out by dagre (@dagrejs/dagre 3.1.3, MIT: vendor/dagre.esm.js, its
// licence in vendor/LICENSE): states top to bottom, each transition's label placed by the
// layout as a box of its own, so that no label lies on another or on a state. It is loaded
// with the first bot page, not with the console.
import { api, backTo, el, enc, errorBox, plural, show } from './lib.js';

const NS = 'http://www.w3.org/2000/svg';
const NODE_H = 34;
/** Space around a state's name and a label's text, in px. */
const NODE_PAD = 14;
const LABEL_PAD = 5;
/** A label's line height, in px. */
const LINE_H = 13;
/** Longest names drawn whole, and a label's lines: longer ones are cut (whole on hover). */
const NAME_MAX = 24;
const LINE_MAX = 22;
const LINES = 2;
/** A graph shrinks to fit its card down to this share of its size; a wider one scrolls. */
const MIN_SCALE = 0.7;

/** A transition's label: its condition, `fallback`, or nothing. */
function edgeLabel(t) {
  if (typeof t === 'string') return t;
  if (t && typeof t === 'object') {
    if (t.fallback) return 'fallback';
    if (typeof t.condition === 'string') return t.condition;
  }
  return '';
}

/** `text` cut to `max` characters (code points: an emoji is not split) with an ellipsis. */
function cut(text, max) {
  const chars = [...text];
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : text;
}

/** `text` in at most LINES lines of at most LINE_MAX characters (code points), broken at
 *  spaces where it can be; what does not fit is cut with an ellipsis. */
function wrap(text) {
  const lines = [];
  let rest = [...text.trim()];
  while (rest.length && lines.length < LINES) {
    if (rest.length <= LINE_MAX) { lines.push(rest.join('')); rest = []; break; }
    const space = rest.lastIndexOf(' ', LINE_MAX);
    const at = space > LINE_MAX / 2 ? space : LINE_MAX;
    lines.push(rest.slice(0, at).join('').trimEnd());
    rest = [...rest.slice(at).join('').trimStart()];
  }
  if (rest.length) lines[lines.length - 1] = cut(`${lines[lines.length - 1]} ${rest.join('')}`, LINE_MAX);
  return lines;
}

/** An SVG element with attributes, in `parent`. */
function node(parent, tag, attrs, text) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  if (parent) parent.append(n);
  return n;
}

/** Widths of texts as the graph draws them (its style sheet's fonts), in px: measured in a
 *  hidden SVG of the graph's class. */
function measurer() {
  const svg = node(null, 'svg', { class: 'graph', width: 0, height: 0, 'aria-hidden': 'true' });
  svg.classList.add('measure');
  document.body.append(svg);
  const state = node(node(svg, 'g', { class: 'state' }), 'text', {});
  const label = node(node(svg, 'g', { class: 'edge-label' }), 'text', {});
  return {
    state: (t) => { state.textContent = t; return state.getComputedTextLength(); },
    label: (t) => { label.textContent = t; return label.getComputedTextLength(); },
    done: () => svg.remove(),
  };
}

/** A smooth path through `points` (a uniform B-spline, as d3's curveBasis draws it). */
function curve(points) {
  const p = points.map(({ x, y }) => [Math.round(x * 10) / 10, Math.round(y * 10) / 10]);
  if (p.length < 3) return `M${p[0]}L${p[p.length - 1]}`;
  let d = `M${p[0]}L${(5 * p[0][0] + p[1][0]) / 6},${(5 * p[0][1] + p[1][1]) / 6}`;
  const bezier = (a, b, c) => `C${(2 * a[0] + b[0]) / 3},${(2 * a[1] + b[1]) / 3} ${(a[0] + 2 * b[0]) / 3},${(a[1] + 2 * b[1]) / 3} ${(a[0] + 4 * b[0] + c[0]) / 6},${(a[1] + 4 * b[1] + c[1]) / 6}`;
  for (let i = 2; i < p.length; i++) d += bezier(p[i - 2], p[i - 1], p[i]);
  const [a, b] = [p[p.length - 2], p[p.length - 1]];
  return `${d}${bezier(a, b, b)}L${b}`;
}

/** A state's transition to itself: a loop out of its right side, towards the place the
 *  layout kept for its label (or as far as a label would be). */
function loop(n, e) {
  const [x, y] = [n.x + n.width / 2, n.y];
  const reach = Math.max(12, Math.min(24, (e.width ? e.x - e.width / 2 : x + 24) - x));
  return `M${x},${y - 8}C${x + reach * 1.3},${y - 22} ${x + reach * 1.3},${y + 22} ${x},${y + 8}`;
}

/** A flow's states and transitions as an SVG graph: initial state marked, end states
 *  filled, each transition an arrow labelled with its condition (cut; whole on hover),
 *  laid out by the dagre module given. `index`: the flow's place in the bot, which names its
 *  arrowhead. */
function flowGraph(name, index, states, { graphlib, layout }) {
  if (!Object.keys(states).length) return el('p', { class: 'muted' }, 'No states.');
  const measure = measurer();
  const g = new graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 24, ranksep: 36, edgesep: 12, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  const names = Object.keys(states);
  for (const s of names) {
    const st = states[s];
    const text = `${st.initial ? '▶ ' : ''}${cut(s, NAME_MAX)}`;
    g.setNode(s, { text, width: Math.max(60, Math.ceil(measure.state(text)) + 2 * NODE_PAD), height: NODE_H });
  }
  const edges = [];
  for (const [s, st] of Object.entries(states)) {
    for (const [t, how] of Object.entries(st.transitions || {})) {
      if (!g.hasNode(t)) continue; // another flow's state: in the list under the graph
      const full = edgeLabel(how);
      const lines = wrap(full);
      const label = full ? { width: Math.ceil(Math.max(...lines.map(measure.label))) + 2 * LABEL_PAD, height: lines.length * LINE_H + 2 * LABEL_PAD - 2, labelpos: 'c' } : {};
      g.setEdge(s, t, { ...label, full, lines });
      edges.push([s, t]);
    }
  }
  measure.done();
  layout(g);
  const { width: w, height: h } = g.graph();
  const svg = node(null, 'svg', { viewBox: `0 0 ${Math.ceil(w)} ${Math.ceil(h)}`, width: Math.ceil(w), class: 'graph', role: 'img',
    'aria-label': `Flow ${name}: ${plural(names.length, 'state')}, ${plural(edges.length, 'transition')} (listed under the graph)` });
  // Shrinks with its card, to a point (CSSOM, which the page's policy allows).
  svg.style.minWidth = `${Math.ceil(w * MIN_SCALE)}px`;
  // By the flow's place, not its name: `a.b` and `a_b` would share an id.
  const id = `arrow-${index}`;
  const marker = node(node(svg, 'defs', {}), 'marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  node(marker, 'path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' });
  // Arrows first, their labels over them, the states last.
  for (const [s, t] of edges) {
    const e = g.edge(s, t);
    const path = node(svg, 'path', { d: s === t ? loop(g.node(s), e) : curve(e.points), class: 'edge', 'marker-end': `url(#${id})`, 'data-from': s, 'data-to': t });
    node(path, 'title', {}, `${s} → ${t}${e.full ? ': ' + e.full : ''}`);
  }
  for (const [s, t] of edges) {
    const e = g.edge(s, t);
    if (!e.full) continue;
    const label = node(svg, 'g', { class: 'edge-label', 'data-from': s, 'data-to': t });
    node(label, 'title', {}, e.full);
    node(label, 'rect', { x: e.x - e.width / 2, y: e.y - e.height / 2, width: e.width, height: e.height, rx: 4 });
    const text = node(label, 'text', { x: e.x, y: e.y - ((e.lines.length - 1) * LINE_H) / 2 + 4, 'text-anchor': 'middle' });
    e.lines.forEach((line, i) => node(text, 'tspan', { x: e.x, dy: i ? LINE_H : 0 }, line));
  }
  for (const s of names) {
    const st = states[s];
    const n = g.node(s);
    const box = node(svg, 'g', { class: `state${st.initial ? ' initial' : ''}${st.end ? ' end' : ''}`, 'data-state': s });
    node(box, 'title', {}, `${s}${st.initial ? ' (initial)' : ''}${st.end ? ' (end)' : ''}`);
    node(box, 'rect', { x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height, rx: 8 });
    node(box, 'text', { x: n.x, y: n.y + 4.5, 'text-anchor': 'middle' }, n.text);
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
  const [bot, yamlText, dagre] = await Promise.all([
    api('GET', `/projects/${enc(pid)}/bot`),
    api('GET', `/projects/${enc(pid)}/bot?format=yaml`, undefined, { text: true }).catch((e) => e),
    import('./vendor/dagre.esm.js'),
  ]);
  const pretty = (v) => el('pre', { class: 'mono', tabindex: 0 }, JSON.stringify(v, null, 2));
  const flows = Object.entries(bot.flows || {}).map(([name, f], i) => {
    const states = f.states || {};
    const transitions = Object.entries(states).flatMap(([s, st]) => Object.entries(st.transitions || {})
      .map(([t, how]) => el('li', {}, `${s} → ${t}`, edgeLabel(how) ? `: ${edgeLabel(how)}` : '')));
    const box = el('div', { class: 'graph-box', tabindex: 0, role: 'group', 'aria-label': `Graph of flow ${name}` }, flowGraph(name, i, states, dagre));
    // Wider than the window even when shrunk: it scrolls sideways, and says so.
    const hint = el('p', { class: 'muted graph-hint', hidden: true }, 'Wider than the window: scroll the graph sideways.');
    new ResizeObserver(() => { hint.hidden = box.scrollWidth <= box.clientWidth + 1; }).observe(box);
    return el('details', { class: 'card flow', open: true },
      el('summary', {}, el('strong', {}, name), ` · ${plural(Object.keys(states).length, 'state')}, ${plural(Object.keys(f.intents || {}).length, 'intent')}`),
      box, hint,
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
