// Bot source: the latest revision flow by flow, and the whole bot as YAML.
import { api, backTo, el, enc, errorBox, show } from './lib.js';

/** The latest bot revision, flow by flow: intents, states with their actions and
 * transitions, methods; read-only (edit and `botbox push` from the files). */
export async function botSource(pid) {
  const bot = await api('GET', `/projects/${enc(pid)}/bot`);
  const yaml = el('pre', { class: 'mono', id: 'yaml', tabindex: 0 });
  const yamlView = el('details', { class: 'card' }, el('summary', { id: 'yaml-toggle' }, 'The whole bot as YAML'), yaml);
  yamlView.addEventListener('toggle', async () => {
    if (!yamlView.open || yaml.textContent) return;
    try {
      yaml.textContent = await api('GET', `/projects/${enc(pid)}/bot?format=yaml`, undefined, { text: true });
    } catch (e) { yaml.replaceChildren(errorBox(e)); }
  });
  const pretty = (v) => el('pre', { class: 'mono', tabindex: 0 }, JSON.stringify(v, null, 2));
  const flows = Object.entries(bot.flows || {}).map(([name, f]) => el('details', { class: 'card flow', open: true },
    el('summary', {}, el('strong', {}, name), ` · ${Object.keys(f.states || {}).length} states, ${Object.keys(f.intents || {}).length} intents`),
    el('h2', {}, 'Intents'), pretty(f.intents || {}),
    el('h2', {}, 'States'),
    Object.entries(f.states || {}).map(([s, st]) => el('details', { class: 'state' },
      el('summary', {}, s, st.initial ? ' (initial)' : '', st.end ? ' (end)' : ''), pretty(st)))));
  show(el('h1', {}, `${bot.name || 'Bot'} ${bot.version || ''}`),
    el('p', {}, backTo(pid)),
    yamlView,
    flows.length ? flows : el('p', { class: 'muted' }, 'No flows.'),
    bot.methods ? el('div', { class: 'card' }, el('h2', {}, 'Methods'),
      Object.entries(bot.methods).map(([sig, code]) => el('div', {}, el('strong', { class: 'mono' }, sig), el('pre', { class: 'mono', tabindex: 0 }, typeof code === 'string' ? code : JSON.stringify(code, null, 2))))) : null);
}
