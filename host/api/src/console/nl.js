// NL Studio: a project NLU's entities (created, edited and deleted here), its sentences with
// their labels on the text (select words to label them; edit a sentence's text, its labels
// following their words; delete one), training and predictions. Those who may not edit the
// project see it all without the controls.
import { ApiError, IN_PLACE, api, backTo, can, el, enc, errorBox, failure, plural, refusal, projectAccess, readOnlyNote, show, table, tell } from './lib.js';

/** The profiles of each entity type, as the server knows them (it checks them). */
const PROFILES = {
  trait: ['default', 'intent', 'faq', 'qisg', 'sentiment', 'topic'],
  phrase: ['default', 'currency', 'email', 'entitySentiment', 'location', 'name', 'ner', 'number', 'phone', 'pos', 'preps', 'time', 'units', 'url'],
  dict: ['default', 'klitika'],
};
/** Entity types, with what each labels. */
const TYPES = {
  trait: 'A label for the whole sentence (an intent, say).',
  phrase: 'Words of a sentence, learned from labelled sentences.',
  dict: 'Words listed in a dictionary, with their other forms.',
};
/** Dictionary keys the entity list shows (the form shows them all). */
const SHOWN_KEYS = 12;

/** A dictionary as the form writes it: a key per line, its other forms after a colon. */
function dictText(d) {
  return Object.entries(d || {}).map(([k, forms]) => (forms.length ? `${k}: ${forms.join(', ')}` : k)).join('\n');
}
/** That text read back; blank lines are skipped, a key given twice keeps both lines' forms. */
function dictOf(text) {
  const d = {};
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const at = line.indexOf(':');
    const key = (at < 0 ? line : line.slice(0, at)).trim();
    const forms = at < 0 ? [] : line.slice(at + 1).split(',').map((f) => f.trim()).filter(Boolean);
    d[key] = (d[key] || []).concat(forms);
  }
  return d;
}

/** What an entity holds besides its type and profile, as one line. */
function entityDetails(e) {
  const parts = [];
  if (e.labels) parts.push(`labels: ${e.labels.join(', ')}`);
  if (e.dictionary) {
    const keys = Object.entries(e.dictionary);
    const shown = keys.slice(0, SHOWN_KEYS).map(([k, forms]) => (forms.length ? `${k} (${forms.join(', ')})` : k));
    parts.push(`dictionary: ${shown.join('; ')}${keys.length > SHOWN_KEYS ? `; and ${keys.length - SHOWN_KEYS} more` : ''}`);
  }
  if (e.belongsTo) parts.push(`belongs to ${e.belongsTo}`);
  if (e.root) parts.push(`under ${e.root}`);
  for (const k of ['inherit', 'resolver', 'relProfile', 'name']) if (e[k]) parts.push(`${k}: ${e[k]}`);
  return parts.join(' · ');
}

/** A training's outcome as the status line says it. */
function trainingText(t) {
  return `Training: ${t.status}${t.revision ? ` (revision ${String(t.revision).slice(0, 10)})` : ''}${t.error ? ` · ${t.error}` : ''}`;
}

/** NL Studio: a project NLU's entities, its training sentences with their labels shown on
 *  the text, training, and a predict box. A view reads the NLUs, the sentences and (unless
 *  known) the caller's access; changes then redraw what they changed. */
export async function nlStudio(pid, chosen, again) {
  const P = `/projects/${enc(pid)}/nlus`;
  const [list, access] = await Promise.all([api('GET', P), projectAccess(pid)]);
  const nlus = list.data;
  const mayEdit = can(access, 'edit');
  if (!nlus.length) {
    show(el('h1', {}, 'NL Studio'), readOnlyNote(access), el('p', {}, backTo(pid)),
      el('p', { class: 'muted', id: 'training' }, 'This project has no NLU yet.'), mayEdit ? createForm(pid, access) : null);
    return;
  }
  const nlu = nlus.find((n) => n.name === chosen) || nlus[0];
  const N = `${P}/${enc(nlu.name)}`;
  const entities = { ...(nlu.entities || {}) };
  // The first 100 sentences; null when the caller's role may not read them.
  let refused = null;
  const page = await api('GET', `${N}/training_data?limit=100`).catch((e) => {
    if (!(e instanceof ApiError && e.status === 403)) throw e;
    refused = failure(e, 'read the training sentences', access);
    return null;
  });
  const rows = page ? page.data : null;
  let total = page ? page.total ?? rows.length : 0;
  // A refusal in the console's words (403), else the server's own.
  const why = async (e, what) => (await refusal(e, what, pid, access)).replace(/^\d+: /, '');
  const isTrait = (name) => entities[name] && entities[name].type === 'trait';
  const R = (r) => `${N}/training_data/${enc(r.id)}`;

  /** Sentence `r` in `li`: its text with labelled words marked, its traits as chips, Edit
   *  and Delete; selecting words offers to label them. */
  const viewRow = (li, r) => {
    const spans = r.entities.filter((e) => e.end > e.start && entities[e.entity] && !isTrait(e.entity)).sort((a, b) => a.start - b.start);
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
    const traits = r.entities.filter((e) => isTrait(e.entity))
      .map((e) => el('span', { class: 'chip' }, `${e.entity}: ${e.label || e.value}`));
    const text = el('span', { class: 'sentence', 'data-row': r.id }, parts);
    const labeller = el('span', { class: 'labeller' });
    li.className = '';
    if (!mayEdit) { li.replaceChildren(text, ' ', ...traits); return; }
    text.addEventListener('mouseup', () => {
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
      const spanEntities = Object.keys(entities).filter((n) => !isTrait(n));
      if (!spanEntities.length) { labeller.replaceChildren(el('span', { class: 'error' }, 'No span entity (dictionary, phrase …) to label with.')); return; }
      const pick = el('select', { 'aria-label': 'Entity', class: 'entity' }, spanEntities.map((n) => el('option', { value: n }, n)));
      const label = el('input', { 'aria-label': 'Label (optional)', class: 'label', placeholder: 'label' });
      labeller.replaceChildren(`“${value}” as `, pick, ' ', label, ' ',
        el('button', { type: 'button', class: 'primary apply-label', onclick: async () => {
          try {
            const ents = r.entities.concat([{ entity: pick.value, label: label.value.trim() || undefined, start, end, value }]);
            const done = await api('PUT', R(r), { entities: ents });
            r.entities = done && Array.isArray(done.entities) ? done.entities : ents;
            viewRow(li, r);
          } catch (e) { labeller.replaceChildren(el('span', { class: 'error', role: 'alert' }, await why(e, 'label sentences'))); }
        } }, 'Label'));
    });
    li.replaceChildren(text, ' ', ...traits, el('span', { class: 'row-actions' },
      el('button', { type: 'button', class: 'edit-sentence', 'aria-label': `Edit “${r.input}”`, onclick: () => editRow(li, r) }, 'Edit'), ' ',
      el('button', { type: 'button', class: 'delete-sentence', 'aria-label': `Delete “${r.input}”`, onclick: () => deleteRow(li, r) }, 'Delete')),
    labeller);
  };

  /** Sentence `r` as a form: its text (`typed` kept across a redraw), its labels each with
   *  a remove button. A refusal is said under it, the text left as typed. */
  const editRow = (li, r, typed = r.input) => {
    const input = el('input', { class: 'sentence-input', value: typed, 'aria-label': 'Sentence' });
    const err = el('p', { class: 'error', role: 'alert' });
    const labels = r.entities.map((e) => {
      const what = `${e.entity}${e.label ? ':' + e.label : ''}${isTrait(e.entity) ? '' : ` on “${e.value}”`}`;
      return el('span', { class: 'chip' }, what, ' ', el('button', { type: 'button', class: 'remove-label', 'aria-label': `Remove label ${what}`, onclick: async () => {
        try {
          const ents = r.entities.filter((x) => x !== e);
          const done = await api('PUT', R(r), { entities: ents });
          r.entities = done && Array.isArray(done.entities) ? done.entities : ents;
          editRow(li, r, input.value);
        } catch (x) { err.textContent = await why(x, 'label sentences'); }
      } }, '×'));
    });
    li.className = 'editing';
    li.replaceChildren(el('form', { class: 'sentence-edit', onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      if (input.value === r.input) { viewRow(li, r); return; }
      try {
        await api('PUT', R(r), { input: input.value });
        // Read back: the server moved the labels to where their words now are.
        const fresh = (await api('GET', `${N}/training_data?limit=100`)).data.find((x) => x.id === r.id);
        Object.assign(r, fresh || { input: input.value });
        viewRow(li, r);
        const note = el('p', { role: 'status' });
        li.append(note);
        tell(note, 'Saved: its labels moved with their words. Train again for the model to learn it.');
      } catch (x) { err.textContent = await why(x, 'edit sentences'); }
    } }, el('div', { class: 'send' }, input,
      el('button', { type: 'submit', class: 'primary save-sentence' }, 'Save'),
      el('button', { type: 'button', class: 'cancel-sentence', onclick: () => viewRow(li, r) }, 'Cancel')),
    labels.length ? el('p', { class: 'edit-labels' }, 'Labels: ', labels) : null,
    el('p', { class: 'muted hint' }, 'Labels move with their words; remove a label whose words you take out.'), err));
    input.focus();
  };

  /** Deletes sentence `r` after a confirmation; its row then says so. */
  const deleteRow = async (li, r) => {
    if (!confirm(`Delete the sentence “${r.input}”? The model keeps it until the NLU is trained again.`)) return;
    const note = el('p', { role: 'status' });
    try {
      await api('DELETE', R(r));
      rows.splice(rows.indexOf(r), 1);
      total -= 1;
      countH.textContent = `Training data (${total})`;
      li.className = 'deleted';
      li.replaceChildren(note);
      tell(note, `Deleted “${r.input}”. Train again to leave it out of the model.`);
    } catch (e) {
      li.querySelector('.result')?.remove();
      li.append(note);
      tell(note, await why(e, 'delete sentences'), 'error');
    }
  };

  const countH = el('h2', { id: 'training-count' });
  const listBox = el('div');
  const drawRows = () => {
    countH.textContent = rows ? `Training data (${total})` : 'Training data';
    if (!rows) listBox.replaceChildren(el('p', { class: 'note', id: 'training' }, refused));
    else if (!rows.length) listBox.replaceChildren(el('p', { class: 'muted', id: 'training' }, 'No sentences yet.'));
    else {
      listBox.replaceChildren(el('ul', { id: 'training' }, rows.map((r) => { const li = el('li', { 'data-row': r.id }); viewRow(li, r); return li; })),
        ...(total > rows.length ? [el('p', { class: 'muted' }, `The first ${rows.length} are shown.`)] : []));
    }
  };

  // Entities: a table, Edit and Delete on each, and the form below it.
  const entityBox = el('div', { id: 'entities' });
  const entityResult = el('p', { class: 'result', id: 'entity-result', role: 'status', hidden: true });
  const drawEntities = () => {
    // By name, as the server lists them.
    const all = Object.entries(entities).sort(([a], [b]) => (a < b ? -1 : 1));
    entityBox.replaceChildren(all.length ? table({ class: 'entities' }, ['Entity', 'Type', 'Profile', 'Details', ...(mayEdit ? [''] : [])],
      all.map(([name, e]) => el('tr', { 'data-entity': name }, el('td', {}, el('strong', {}, name)), el('td', {}, e.type), el('td', {}, e.profile),
        el('td', { class: 'detail' }, entityDetails(e)),
        mayEdit ? el('td', { class: 'row-actions' },
          el('button', { type: 'button', class: 'edit-entity', 'aria-label': `Edit entity ${name}`, onclick: () => editor.edit(name) }, 'Edit'), ' ',
          el('button', { type: 'button', class: 'delete-entity', 'aria-label': `Delete entity ${name}`, onclick: () => deleteEntity(name) }, 'Delete')) : null)))
      : el('p', { class: 'muted' }, 'No entities yet.'));
  };
  // An entity changed: the table, the sentences (spans and traits) and the form's choices.
  const entitiesChanged = () => { drawEntities(); drawRows(); editor.fit(); };
  const editor = entityEditor(N, entities, why, (name, entity, edited) => {
    entities[name] = entity;
    entitiesChanged();
    tell(entityResult, `${edited ? 'Saved' : 'Created'} entity ${name}. Train again for predictions to use it.`);
  });
  const deleteEntity = async (name) => {
    if (!confirm(`Delete entity ${name}? Sentences keep their ${name} labels, which training then ignores.`)) return;
    try {
      await api('DELETE', `${N}/entities/${enc(name)}`);
      delete entities[name];
      if (editor.editing() === name) editor.reset();
      entitiesChanged();
      tell(entityResult, `Deleted entity ${name}.`);
    } catch (e) { tell(entityResult, await why(e, 'change entities'), 'error'); }
  };

  const lines = el('textarea', { id: 'lines', rows: 4, 'aria-label': 'Sentences to add', 'aria-describedby': 'lines-hint', placeholder: 'one per line: I want pepperoni #intent:order' });
  const status = el('p', { id: 'training-status', role: 'status' }, trainingText(nlu.training));
  const predictIn = el('input', { id: 'predict-text', 'aria-label': 'Sentence to predict' });
  const predictOut = el('div', { id: 'prediction' });
  // Train: the typed sentences are added first; none typed trains again on those stored.
  const train = async (ev) => {
    ev.preventDefault();
    const typed = lines.value.split('\n').map((x) => x.trim()).filter(Boolean);
    status.textContent = 'Training…';
    try {
      if (!typed.length) {
        const a = await api('POST', `${N}/retrain`);
        status.textContent = trainingText(a);
        return;
      }
      const f = new FormData();
      for (const l of typed) f.append('sentence', l);
      const a = await api('POST', `${N}/train`, f);
      await nlStudio(pid, nlu.name, true);
      const now = document.getElementById('training-status');
      now.textContent = `${trainingText(a)}${a.unchanged ? ` · ${plural(a.unchanged, 'sentence')} already there` : ''}${a.errors && a.errors.length ? ' · refused: ' + a.errors.join('; ') : ''}`;
      now.scrollIntoView({ block: 'nearest' });
    } catch (e) { status.textContent = await why(e, 'train NLUs'); status.scrollIntoView({ block: 'nearest' }); }
  };
  drawEntities();
  drawRows();
  show(again ? IN_PLACE : null, el('h1', {}, `NL Studio · ${nlu.name}`),
    readOnlyNote(access),
    el('p', {}, backTo(pid), ' · ', nlu.nluId, nlus.length > 1 ? [' · ', nlus.filter((n) => n.name !== nlu.name)
      .map((n) => el('a', { href: `#/p/${enc(pid)}/nl/${enc(n.name)}` }, n.name))] : null),
    el('div', { class: 'card' }, el('h2', {}, 'Entities'), entityBox, entityResult, mayEdit ? editor.form : null),
    el('div', { class: 'card' }, countH,
      mayEdit && rows ? el('p', { class: 'muted' }, 'Select words of a sentence to label them; Edit changes its text (its labels move with their words) or removes labels.') : null,
      listBox,
      !mayEdit ? null : el('form', { class: 'add-sentences', onsubmit: train }, el('label', { for: 'lines' }, 'Add sentences and train'), lines,
        el('p', { class: 'muted hint', id: 'lines-hint' }, 'None typed: Train learns the sentences above again (after changing entities or sentences).'),
        el('p', {}, el('button', { class: 'primary', type: 'submit', id: 'train' }, 'Train'))),
      status),
    el('form', { class: 'card', onsubmit: async (ev) => {
      ev.preventDefault();
      const f = new FormData();
      f.append('sentence', predictIn.value);
      try { predictOut.replaceChildren(prediction(predictIn.value, (await api('POST', `${N}/predict`, f)).result)); } catch (e) { predictOut.replaceChildren(errorBox(e)); }
    } }, el('h2', {}, 'Predict'), el('div', { class: 'send' }, predictIn, el('button', { type: 'submit', id: 'predict' }, 'Predict')), predictOut),
    mayEdit ? createForm(pid, access) : null);
}

/** The entity form: a new entity, or the one `edit(name)` loads (its name stays: entities
 *  are not renamed). `saved(name, entity, edited)` is called with what the server kept; a
 *  refusal is said under the form, everything typed left as it was. */
function entityEditor(N, entities, why, saved) {
  const name = el('input', { id: 'entity-name', autocomplete: 'off', placeholder: 'size' });
  const type = el('select', { id: 'entity-type', 'aria-describedby': 'entity-type-hint', onchange: () => fit() }, Object.keys(TYPES).map((t) => el('option', { value: t }, t)));
  const profile = el('select', { id: 'entity-profile' });
  const labels = el('input', { id: 'entity-labels', placeholder: 'order, cancel', 'aria-describedby': 'entity-labels-hint' });
  const dictionary = el('textarea', { id: 'entity-dictionary', rows: 4, placeholder: 'pepperoni: peperoni, pepperonni\nmargherita', 'aria-describedby': 'entity-dictionary-hint' });
  const belongsTo = el('select', { id: 'entity-belongs-to' });
  const root = el('input', { id: 'entity-root', placeholder: 'intent:order', 'aria-describedby': 'entity-root-hint' });
  const heading = el('h3', {}, 'New entity');
  const err = el('p', { class: 'error', role: 'alert', id: 'entity-error' });
  const submit = el('button', { type: 'submit', class: 'primary', id: 'entity-save' }, 'Create entity');
  const cancel = el('button', { type: 'button', id: 'entity-cancel', hidden: true, onclick: () => reset() }, 'Cancel');
  const field = (id, text, control, hint, wide) => el('div', { class: wide ? 'wide' : null }, el('label', { for: id }, text), control,
    hint ? el('span', { class: 'muted hint', id: `${id}-hint` }, hint) : null);
  const typeField = field('entity-type', 'Type', type, ' ');
  const labelsField = field('entity-labels', 'Labels', labels, 'Separated by commas; a trait needs one, a phrase may have some.');
  const dictField = field('entity-dictionary', 'Dictionary', dictionary, 'A key per line, its other forms after a colon, separated by commas.', true);
  const belongsField = field('entity-belongs-to', 'Belongs to', belongsTo);
  const rootField = field('entity-root', 'Under (optional)', root, 'A trait label, as entity:label: learned only for those sentences.');
  let editing = null;

  /** The fields of the chosen type, the profiles of that type, the other entities. */
  const fit = () => {
    const t = type.value;
    const [p, b] = [profile.value, belongsTo.value];
    profile.replaceChildren(...PROFILES[t].map((x) => el('option', { value: x, selected: x === p }, x)));
    typeField.querySelector('.hint').textContent = TYPES[t];
    labelsField.hidden = t === 'dict';
    dictField.hidden = t !== 'dict';
    rootField.hidden = t !== 'trait';
    belongsField.hidden = t === 'trait';
    belongsTo.replaceChildren(el('option', { value: '' }, 'none'),
      ...Object.keys(entities).filter((n) => n !== editing).map((n) => el('option', { value: n, selected: n === b }, n)));
  };
  const reset = () => {
    editing = null;
    heading.textContent = 'New entity';
    name.disabled = false;
    for (const f of [name, labels, dictionary, root]) f.value = '';
    belongsTo.value = '';
    profile.replaceChildren(); // the type's first profile, after fit()
    type.value = 'trait';
    submit.textContent = 'Create entity';
    cancel.hidden = true;
    err.textContent = '';
    fit();
  };
  const edit = (n) => {
    const e = entities[n];
    editing = n;
    heading.textContent = `Edit entity ${n}`;
    name.value = n;
    name.disabled = true;
    type.value = e.type;
    fit();
    profile.value = e.profile;
    belongsTo.value = e.belongsTo || '';
    labels.value = (e.labels || []).join(', ');
    dictionary.value = dictText(e.dictionary);
    root.value = e.root || '';
    submit.textContent = 'Save entity';
    cancel.hidden = false;
    err.textContent = '';
    form.scrollIntoView({ block: 'nearest' });
    type.focus();
  };
  const form = el('form', { class: 'entity-form', id: 'entity-form', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const t = type.value;
    // What the form shows over what the entity had: fields it does not show are kept. A
    // body's `name` is the entity's own, so the entity's is left out.
    const body = { ...(editing ? entities[editing] : {}), type: t, profile: profile.value };
    delete body.name;
    const ls = labels.value.split(',').map((l) => l.trim()).filter(Boolean);
    if (t !== 'dict' && ls.length) body.labels = ls; else delete body.labels;
    if (t === 'dict') body.dictionary = dictOf(dictionary.value); else delete body.dictionary;
    if (t !== 'trait' && belongsTo.value) body.belongsTo = belongsTo.value; else delete body.belongsTo;
    if (t === 'trait' && root.value.trim()) body.root = root.value.trim(); else delete body.root;
    try {
      const was = editing;
      const r = was ? await api('PUT', `${N}/entities/${enc(was)}`, body) : await api('POST', `${N}/entities`, { name: name.value.trim(), ...body });
      // The answer is the entity with its name beside its fields.
      const { name: saidName, ...entity } = r;
      reset();
      saved(saidName, entity, Boolean(was));
    } catch (e) { err.textContent = await why(e, 'change entities'); }
  } }, heading, el('div', { class: 'fields' },
    field('entity-name', 'Name', name), typeField, field('entity-profile', 'Profile', profile),
    labelsField, belongsField, rootField, dictField),
  err, el('p', { class: 'actions' }, submit, cancel));
  reset();
  return { form, edit, reset, fit, editing: () => editing };
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
