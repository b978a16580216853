// NL Studio: a project NLU's entities, its sentences with their labels on the text
// (select words to label them), training and predictions; labelling, training and new NLUs
// for those who may edit the project.
import { IN_PLACE, api, backTo, can, el, enc, errorBox, refusal, projectAccess, readOnlyNote, show, table } from './lib.js';

/** NL Studio: a project NLU's entities, its training sentences with their labels shown on
 * the text (select words of a sentence to label them), training, and a predict box. */
export async function nlStudio(pid, chosen, again) {
  const P = `/projects/${enc(pid)}/nlus`;
  const [list, access] = await Promise.all([api('GET', P), projectAccess(pid)]);
  const nlus = list.data;
  const mayEdit = can(access, 'edit');
  if (!nlus.length) {
    show(el('h1', {}, 'NL Studio'), readOnlyNote(access), el('p', {}, backTo(pid)),
      el('p', { class: 'muted' }, 'This project has no NLU yet.'), mayEdit ? createForm(pid, access) : null);
    return;
  }
  const nlu = nlus.find((n) => n.name === chosen) || nlus[0];
  const N = `${P}/${enc(nlu.name)}`;
  const entities = nlu.entities || {};
  const spanEntities = Object.entries(entities).filter(([, e]) => e.type !== 'trait').map(([n]) => n);
  const rows = (await api('GET', `${N}/training_data?limit=100`)).data;
  const status = el('p', { id: 'training-status', role: 'status' }, `Training: ${nlu.training.status}${nlu.training.revision ? ` (revision ${String(nlu.training.revision).slice(0, 10)})` : ''}`);
  const sentence = (r) => {
    const spans = r.entities.filter((e) => e.end > e.start && entities[e.entity] && entities[e.entity].type !== 'trait').sort((a, b) => a.start - b.start);
    // Offsets count characters (code points), as the API does: an emoji is one.
    const chars = [...r.input];
    const cut = (a, b) => chars.slice(a, b).join('');
    const parts = [];
    let at = 0;
    for (const s of spans) {
      if (s.start < at) continue;
      parts.push(cut(at, s.start));
      parts.push(el('mark', { title: `${s.entity}${s.label ? ':' + s.label : ''}` }, cut(s.start, s.end)));
      at = s.end;
    }
    parts.push(cut(at));
    const traits = r.entities.filter((e) => entities[e.entity] && entities[e.entity].type === 'trait')
      .map((e) => el('span', { class: 'chip' }, `${e.entity}: ${e.label || e.value}`));
    const text = el('span', { class: 'sentence', 'data-row': r.id }, parts);
    const labeller = el('span', { class: 'labeller' });
    if (mayEdit) text.addEventListener('mouseup', () => {
      const sel = window.getSelection();
      if (!sel || sel.isCollapsed || !text.contains(sel.anchorNode) || !text.contains(sel.focusNode)) return;
      const range = sel.getRangeAt(0);
      const pre = document.createRange();
      pre.selectNodeContents(text);
      pre.setEnd(range.startContainer, range.startOffset);
      // In characters (code points), not the browser's UTF-16 units.
      const start = [...pre.toString()].length;
      const value = range.toString();
      const end = start + [...value].length;
      if (!value.trim()) return;
      if (!spanEntities.length) { labeller.replaceChildren(el('span', { class: 'error' }, 'No span entity (dictionary, phrase …) to label with.')); return; }
      const pick = el('select', { 'aria-label': 'Entity', class: 'entity' }, spanEntities.map((n) => el('option', { value: n }, n)));
      const label = el('input', { 'aria-label': 'Label (optional)', class: 'label', placeholder: 'label' });
      labeller.replaceChildren(`“${value}” as `, pick, ' ', label, ' ',
        el('button', { type: 'button', class: 'primary apply-label', onclick: async () => {
          try {
            const ents = r.entities.concat([{ entity: pick.value, label: label.value.trim() || undefined, start, end, value }]);
            await api('PUT', `${N}/training_data/${enc(r.id)}`, { entities: ents });
            await nlStudio(pid, nlu.name, true);
          } catch (e) { labeller.replaceChildren(el('span', { class: 'error', role: 'alert' }, await refusal(e, 'label sentences', pid, access))); }
        } }, 'Label'));
    });
    return el('li', {}, text, ' ', traits, labeller);
  };
  const lines = el('textarea', { id: 'lines', rows: 4, 'aria-label': 'Sentences to add', placeholder: 'one per line: I want pepperoni #intent:order' });
  const predictIn = el('input', { id: 'predict-text', 'aria-label': 'Sentence to predict' });
  const predictOut = el('div', { id: 'prediction' });
  show(again ? IN_PLACE : null, el('h1', {}, `NL Studio · ${nlu.name}`),
    readOnlyNote(access),
    el('p', {}, backTo(pid), ' · ', nlu.nluId, nlus.length > 1 ? [' · ', nlus.filter((n) => n.name !== nlu.name)
      .map((n) => el('a', { href: `#/p/${enc(pid)}/nl/${enc(n.name)}` }, n.name))] : null),
    el('div', { class: 'card' }, el('h2', {}, 'Entities'),
      Object.keys(entities).length ? el('ul', {}, Object.entries(entities).map(([n, e]) => el('li', {}, el('strong', {}, n), ` ${e.type}${e.labels ? ': ' + e.labels.join(', ') : ''}`)))
        : el('p', { class: 'muted' }, 'No entities.')),
    el('div', { class: 'card' }, el('h2', {}, `Training data (${rows.length})`),
      mayEdit ? el('p', { class: 'muted' }, 'Select words of a sentence to label them.') : null,
      rows.length ? el('ul', { id: 'training' }, rows.map(sentence)) : el('p', { class: 'muted' }, 'No sentences yet.'),
      !mayEdit ? null : el('form', { onsubmit: async (ev) => {
        ev.preventDefault();
        const f = new FormData();
        for (const l of lines.value.split('\n').map((x) => x.trim()).filter(Boolean)) f.append('sentence', l);
        status.textContent = 'Training…';
        try {
          const a = await api('POST', `${N}/train`, f);
          await nlStudio(pid, nlu.name, true);
          const now = document.getElementById('training-status');
          now.textContent = `Training: ${a.status}${a.revision ? ` (revision ${String(a.revision).slice(0, 10)})` : ''}${a.errors && a.errors.length ? ' · refused: ' + a.errors.join('; ') : ''}`;
          now.scrollIntoView({ block: 'nearest' });
        } catch (e) { status.textContent = await refusal(e, 'train NLUs', pid, access); status.scrollIntoView({ block: 'nearest' }); }
      } }, el('label', { for: 'lines' }, 'Add sentences and train'), lines, el('p', {}, el('button', { class: 'primary', type: 'submit', id: 'train' }, 'Train'))),
      status),
    el('form', { class: 'card', onsubmit: async (ev) => {
      ev.preventDefault();
      const f = new FormData();
      f.append('sentence', predictIn.value);
      try { predictOut.replaceChildren(prediction(predictIn.value, (await api('POST', `${N}/predict`, f)).result)); } catch (e) { predictOut.replaceChildren(errorBox(e)); }
    } }, el('h2', {}, 'Predict'), el('div', { class: 'send' }, predictIn, el('button', { type: 'submit', id: 'predict' }, 'Predict')), predictOut),
    mayEdit ? createForm(pid, access) : null);
}

/** A prediction as people read it: the sentence with each span highlighted, and a table of
 *  every entity's predictions with their scores. */
function prediction(text, result) {
  const chars = [...text];
  const rows = [];
  const spans = [];
  for (const [entity, preds] of Object.entries(result || {})) {
    for (const p of preds) {
      rows.push(el('tr', {}, el('td', {}, entity), el('td', {}, p.type), el('td', {}, String(p.label || p.value)),
        el('td', {}, typeof p.score === 'number' ? p.score.toFixed(2) : ''),
        el('td', {}, p.type === 'trait' ? 'the sentence' : `“${chars.slice(p.start, p.end).join('')}” (${p.start}-${p.end})`)));
      if (p.type !== 'trait' && p.end > p.start) spans.push({ ...p, entity });
    }
  }
  if (!rows.length) return el('p', { class: 'muted' }, 'Nothing predicted: the sentence is outside what the model learned.');
  spans.sort((a, b) => a.start - b.start);
  const marked = [];
  let at = 0;
  for (const sp of spans) {
    if (sp.start < at) continue;
    marked.push(chars.slice(at, sp.start).join(''), el('mark', { title: sp.entity }, chars.slice(sp.start, sp.end).join('')));
    at = sp.end;
  }
  marked.push(chars.slice(at).join(''));
  return el('div', {}, el('p', { class: 'sentence' }, marked),
    table({ class: 'predictions' }, ['Entity', 'Type', 'Value', 'Score', 'Where'], rows));
}

/** Creating another NLU in the project. */
function createForm(pid, access) {
  const name = el('input', { id: 'nlu-name', required: true, placeholder: 'shop' });
  const lang = el('select', { id: 'nlu-lang' }, [['en', 'English'], ['id', 'Indonesian']].map(([v, t]) => el('option', { value: v }, t)));
  const err = el('p', { class: 'error', role: 'alert' });
  return el('form', { class: 'card', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      const n = await api('POST', `/projects/${enc(pid)}/nlus`, { name: name.value.trim(), lang: lang.value });
      // Its page names its nluId, which bots use.
      location.hash = `#/p/${enc(pid)}/nl/${enc(n.name)}`;
    } catch (e) { err.textContent = await refusal(e, 'create NLUs', pid, access); }
  } }, el('h2', {}, 'New NLU'), el('div', { class: 'fields' },
    el('div', {}, el('label', { for: 'nlu-name' }, 'Name'), name), el('div', {}, el('label', { for: 'nlu-lang' }, 'Language'), lang)),
  err, el('button', { type: 'submit', id: 'create-nlu' }, 'Create'));
}
