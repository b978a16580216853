// NL Studio: a project NLU's entities (created, edited and deleted here), its sentences with
// their labels on the text (select words to label them; edit a sentence's text, its labels
// following their words; delete one), training and predictions. Those who may not edit the
// project see it all without the controls.
//
// A view's parts share one context: { pid, N (the NLU's API path), nlu, access, mayEdit,
// profiles, entities, rows, total, why } and the elements the parts redraw (countH, listBox,
// entityBox, entityResult, editor, lines, status, refused).
import { IN_PLACE, api, backTo, can, el, enc, errorBox, plural, refusal, projectAccess, readOnlyNote, show, table, tell } from './lib.js';

/** Entity types, with what each labels. */
const TYPES = {
  trait: 'A label for the whole sentence (an intent, say).',
  phrase: 'Words of a sentence, learned from labelled sentences.',
  dict: 'Words listed in a dictionary, with their other forms.',
};
/** Dictionary keys the entity list shows (the form shows them all). */
const SHOWN_KEYS = 12;

/** The profiles read (a promise), kept for the console session. */
let profilesRead = null;
/** The profiles of each entity type as the server checks them ({dict, phrase, trait}: lists
 *  of names): a console file, not an API request, read once per console session. A failed
 *  read is tried again at the next view. */
function nluProfiles() {
  profilesRead ||= fetch('/console/nlu-profiles.json').then(async (res) => {
    if (!res.ok) throw new Error(`${res.status}: ${(await res.text()).trim()}`);
    return res.json();
  }).catch((e) => { profilesRead = null; throw e; });
  return profilesRead;
}

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

/** `text` with the spans of `spans` ({start, end} in characters, code points as the API
 *  counts them: an emoji is one) marked, each titled by `title(span)`; overlapping ones are
 *  skipped. */
function marked(text, spans, title) {
  const chars = [...text];
  const cut = (a, b) => chars.slice(a, b).join('');
  const parts = [];
  let at = 0;
  for (const s of [...spans].sort((a, b) => a.start - b.start)) {
    if (s.start < at) continue;
    parts.push(cut(at, s.start), el('mark', { title: title(s) }, cut(s.start, s.end)));
    at = s.end;
  }
  parts.push(cut(at));
  return parts;
}

/** NL Studio: a project NLU's entities, its training sentences with their labels shown on
 *  the text, training, and a predict box. A view reads the NLUs, the sentences and (unless
 *  known) the caller's access; changes then redraw what they changed. Returns the view's
 *  context (none for a project without an NLU). */
export async function nlStudio(pid, chosen, again) {
  const P = `/projects/${enc(pid)}/nlus`;
  const [list, access] = await Promise.all([api('GET', P), projectAccess(pid)]);
  const nlus = list.data;
  const mayEdit = can(access, 'edit');
  if (!nlus.length) {
    show(el('h1', {}, 'NL Studio'), readOnlyNote(access), el('p', {}, backTo(pid)),
      el('p', { class: 'muted', id: 'training' }, 'This project has no NLU yet.'), mayEdit ? createForm(pid, access) : null);
    return null;
  }
  const nlu = nlus.find((n) => n.name === chosen) || nlus[0];
  const N = `${P}/${enc(nlu.name)}`;
  // The first 100 sentences (whoever reaches the page may read them: the NLUs' list needs a
  // role on the project), and the profiles for the entity form.
  const [page, profiles] = await Promise.all([api('GET', `${N}/training_data?limit=100`),
    mayEdit ? nluProfiles().catch((e) => e) : null]);
  const c = { pid, N, nlu, access, mayEdit, profiles, entities: { ...(nlu.entities || {}) }, rows: page.data, total: page.total ?? page.data.length };
  // A refusal in the console's words (403), else the server's own.
  c.why = async (e, what) => (await refusal(e, what, pid, access)).replace(/^\d+: /, '');
  show(again ? IN_PLACE : null, el('h1', {}, `NL Studio · ${nlu.name}`),
    readOnlyNote(access),
    el('p', {}, backTo(pid), ' · ', nlu.nluId, nlus.length > 1 ? [' · ', nlus.filter((n) => n.name !== nlu.name)
      .map((n) => el('a', { href: `#/p/${enc(pid)}/nl/${enc(n.name)}` }, n.name))] : null),
    entitiesCard(c), sentencesCard(c), predictBox(N),
    mayEdit ? createForm(pid, access) : null);
  return c;
}

// ---------------------------------------------------------------------------------------
// Entities

/** The entities card: a table (Edit and Delete on each for those who may edit) and the
 *  entity form below it. */
function entitiesCard(c) {
  c.entityBox = el('div', { id: 'entities' });
  c.entityResult = el('p', { class: 'result', id: 'entity-result', role: 'status', hidden: true });
  c.editor = c.mayEdit ? entityEditor(c, (name, entity, edited) => {
    c.entities[name] = entity;
    entitiesChanged(c);
    tell(c.entityResult, `${edited ? 'Saved' : 'Created'} entity ${name}. Train again for predictions to use it.`);
  }) : null;
  drawEntities(c);
  return el('div', { class: 'card' }, el('h2', {}, 'Entities'), c.entityBox, c.entityResult, c.editor ? c.editor.form : null);
}

/** An entity changed: the table, the sentences (spans and traits) and the form's choices. */
function entitiesChanged(c) {
  drawEntities(c);
  drawRows(c);
  c.editor?.fit();
}

/** The entities table, by name as the server lists them. */
function drawEntities(c) {
  const all = Object.entries(c.entities).sort(([a], [b]) => (a < b ? -1 : 1));
  if (!all.length) { c.entityBox.replaceChildren(el('p', { class: 'muted' }, 'No entities yet.')); return; }
  c.entityBox.replaceChildren(table({ class: 'entities' }, ['Entity', 'Type', 'Profile', 'Details', ...(c.mayEdit ? [''] : [])],
    all.map(([name, e]) => el('tr', { 'data-entity': name }, el('td', {}, el('strong', {}, name)), el('td', {}, e.type), el('td', {}, e.profile),
      el('td', { class: 'detail' }, entityDetails(e)),
      c.mayEdit ? el('td', { class: 'row-actions' },
        el('button', { type: 'button', class: 'edit-entity', 'aria-label': `Edit entity ${name}`, onclick: () => c.editor.edit(name) }, 'Edit'), ' ',
        el('button', { type: 'button', class: 'delete-entity', 'aria-label': `Delete entity ${name}`, onclick: () => deleteEntity(c, name) }, 'Delete')) : null))));
}

/** Deletes entity `name` after a confirmation; the result is said under the table. */
async function deleteEntity(c, name) {
  if (!confirm(`Delete entity ${name}? Sentences keep their ${name} labels, which training then ignores.`)) return;
  try {
    await api('DELETE', `${c.N}/entities/${enc(name)}`);
    delete c.entities[name];
    if (c.editor.editing() === name) c.editor.reset();
    entitiesChanged(c);
    tell(c.entityResult, `Deleted entity ${name}.`);
  } catch (e) { tell(c.entityResult, await c.why(e, 'change entities'), 'error'); }
}

/** The entity form's controls, each in its labelled field (`*Field`, hidden by type). */
function entityFields() {
  const f = {
    name: el('input', { id: 'entity-name', autocomplete: 'off', placeholder: 'size' }),
    type: el('select', { id: 'entity-type', 'aria-describedby': 'entity-type-hint' }, Object.keys(TYPES).map((t) => el('option', { value: t }, t))),
    profile: el('select', { id: 'entity-profile' }),
    labels: el('input', { id: 'entity-labels', placeholder: 'order, cancel', 'aria-describedby': 'entity-labels-hint' }),
    dictionary: el('textarea', { id: 'entity-dictionary', rows: 4, placeholder: 'pepperoni: peperoni, pepperonni\nmargherita', 'aria-describedby': 'entity-dictionary-hint' }),
    belongsTo: el('select', { id: 'entity-belongs-to' }),
    root: el('input', { id: 'entity-root', placeholder: 'intent:order', 'aria-describedby': 'entity-root-hint' }),
    heading: el('h3', {}, 'New entity'),
    err: el('p', { class: 'error', role: 'alert', id: 'entity-error' }),
    submit: el('button', { type: 'submit', class: 'primary', id: 'entity-save' }, 'Create entity'),
    cancel: el('button', { type: 'button', id: 'entity-cancel', hidden: true }, 'Cancel'),
    editing: null, // the name of the entity being edited
    form: null, // the form, once made
  };
  const field = (id, text, control, hint, wide) => el('div', { class: wide ? 'wide' : null }, el('label', { for: id }, text), control,
    hint ? el('span', { class: 'muted hint', id: `${id}-hint` }, hint) : null);
  f.typeField = field('entity-type', 'Type', f.type, ' ');
  f.labelsField = field('entity-labels', 'Labels', f.labels, 'Separated by commas; a trait needs one, a phrase may have some.');
  f.dictField = field('entity-dictionary', 'Dictionary', f.dictionary, 'A key per line, its other forms after a colon, separated by commas.', true);
  f.belongsField = field('entity-belongs-to', 'Belongs to', f.belongsTo);
  f.rootField = field('entity-root', 'Under (optional)', f.root, 'A trait label, as entity:label: learned only for those sentences.');
  f.fields = el('div', { class: 'fields' }, field('entity-name', 'Name', f.name), f.typeField, field('entity-profile', 'Profile', f.profile),
    f.labelsField, f.belongsField, f.rootField, f.dictField);
  return f;
}

/** The form fitted to its type: that type's fields and profiles, the other entities. */
function fitEntityForm(c, f) {
  const t = f.type.value;
  const [p, b] = [f.profile.value, f.belongsTo.value];
  const profiles = c.profiles instanceof Error ? [] : c.profiles[t] || [];
  f.profile.replaceChildren(...profiles.map((x) => el('option', { value: x, selected: x === p }, x)));
  f.typeField.querySelector('.hint').textContent = TYPES[t];
  f.labelsField.hidden = t === 'dict';
  f.dictField.hidden = t !== 'dict';
  f.rootField.hidden = t !== 'trait';
  f.belongsField.hidden = t === 'trait';
  f.belongsTo.replaceChildren(el('option', { value: '' }, 'none'),
    ...Object.keys(c.entities).filter((n) => n !== f.editing).map((n) => el('option', { value: n, selected: n === b }, n)));
}

/** The form empty, for a new entity. Without the profiles (their file unread) it says so
 *  and cannot be sent. */
function resetEntityForm(c, f) {
  f.editing = null;
  f.heading.textContent = 'New entity';
  f.name.disabled = false;
  for (const x of [f.name, f.labels, f.dictionary, f.root]) x.value = '';
  f.belongsTo.value = '';
  f.profile.replaceChildren(); // the type's first profile, after the fit
  f.type.value = 'trait';
  f.submit.textContent = 'Create entity';
  f.cancel.hidden = true;
  f.err.textContent = c.profiles instanceof Error ? `The entity profiles could not be read (${c.profiles.message}): reload the page to try again.` : '';
  f.submit.disabled = c.profiles instanceof Error;
  fitEntityForm(c, f);
}

/** Entity `n` loaded into the form (its name stays: entities are not renamed). */
function loadEntity(c, f, n) {
  const e = c.entities[n];
  f.editing = n;
  f.heading.textContent = `Edit entity ${n}`;
  f.name.value = n;
  f.name.disabled = true;
  f.type.value = e.type;
  fitEntityForm(c, f);
  f.profile.value = e.profile;
  f.belongsTo.value = e.belongsTo || '';
  f.labels.value = (e.labels || []).join(', ');
  f.dictionary.value = dictText(e.dictionary);
  f.root.value = e.root || '';
  f.submit.textContent = 'Save entity';
  f.cancel.hidden = false;
  if (!(c.profiles instanceof Error)) f.err.textContent = '';
  f.form.scrollIntoView({ block: 'nearest' });
  f.type.focus();
}

/** The body the form sends: what it shows over what the entity had (fields it does not show
 *  are kept). A body's `name` is the entity's own, so the entity's is left out. */
function entityBody(c, f) {
  const t = f.type.value;
  const body = { ...(f.editing ? c.entities[f.editing] : {}), type: t, profile: f.profile.value };
  delete body.name;
  const ls = f.labels.value.split(',').map((l) => l.trim()).filter(Boolean);
  if (t !== 'dict' && ls.length) body.labels = ls; else delete body.labels;
  if (t === 'dict') body.dictionary = dictOf(f.dictionary.value); else delete body.dictionary;
  if (t !== 'trait' && f.belongsTo.value) body.belongsTo = f.belongsTo.value; else delete body.belongsTo;
  if (t === 'trait' && f.root.value.trim()) body.root = f.root.value.trim(); else delete body.root;
  return body;
}

/** The entity form: a new entity, or the one `edit(name)` loads. `saved(name, entity,
 *  edited)` is called with what the server kept; a refusal is said under the form,
 *  everything typed left as it was. */
function entityEditor(c, saved) {
  const f = entityFields();
  f.type.addEventListener('change', () => fitEntityForm(c, f));
  f.cancel.addEventListener('click', () => resetEntityForm(c, f));
  f.form = el('form', { class: 'entity-form', id: 'entity-form', onsubmit: async (ev) => {
    ev.preventDefault();
    f.err.textContent = '';
    const was = f.editing;
    try {
      const body = entityBody(c, f);
      const r = was ? await api('PUT', `${c.N}/entities/${enc(was)}`, body) : await api('POST', `${c.N}/entities`, { name: f.name.value.trim(), ...body });
      // The answer is the entity with its name beside its fields.
      const { name, ...entity } = r;
      resetEntityForm(c, f);
      saved(name, entity, Boolean(was));
    } catch (e) { f.err.textContent = await c.why(e, 'change entities'); }
  } }, f.heading, f.fields, f.err, el('p', { class: 'actions' }, f.submit, f.cancel));
  resetEntityForm(c, f);
  return { form: f.form, edit: (n) => loadEntity(c, f, n), reset: () => resetEntityForm(c, f), fit: () => fitEntityForm(c, f), editing: () => f.editing };
}

// ---------------------------------------------------------------------------------------
// Sentences

/** The sentences card: the count, the sentences, the add-and-train form (for those who may
 *  edit) and the training's status. */
function sentencesCard(c) {
  c.countH = el('h2', { id: 'training-count' });
  c.listBox = el('div');
  c.status = el('p', { id: 'training-status', role: 'status' }, trainingText(c.nlu.training));
  c.refused = el('div', { id: 'training-refused', class: 'result error', hidden: true });
  drawRows(c);
  return el('div', { class: 'card' }, c.countH,
    c.mayEdit ? el('p', { class: 'muted' }, 'Select words of a sentence to label them; Edit changes its text (its labels move with their words) or removes labels.') : null,
    c.listBox, c.mayEdit ? trainForm(c) : null, c.status, c.refused);
}

/** The sentences read, each a row, and how many there are. */
function drawRows(c) {
  c.countH.textContent = `Training data (${c.total})`;
  if (!c.rows.length) { c.listBox.replaceChildren(el('p', { class: 'muted', id: 'training' }, 'No sentences yet.')); return; }
  c.listBox.replaceChildren(el('ul', { id: 'training' }, c.rows.map((r) => { const li = el('li', { 'data-row': r.id }); viewRow(c, li, r); return li; })),
    ...(c.total > c.rows.length ? [el('p', { class: 'muted' }, `The first ${c.rows.length} are shown.`)] : []));
}

const isTrait = (c, name) => c.entities[name] && c.entities[name].type === 'trait';
/** Sentence `r`'s API path. */
const rowPath = (c, r) => `${c.N}/training_data/${enc(r.id)}`;
/** Sentence `r` labelled `ents`: `r` takes what the server kept. */
async function putLabels(c, r, ents) {
  const done = await api('PUT', rowPath(c, r), { entities: ents });
  r.entities = done && Array.isArray(done.entities) ? done.entities : ents;
}

/** Sentence `r` in `li`: its text with labelled words marked, its traits as chips, Edit
 *  and Delete; selecting words offers to label them. */
function viewRow(c, li, r) {
  const spans = r.entities.filter((e) => e.end > e.start && c.entities[e.entity] && !isTrait(c, e.entity));
  const text = el('span', { class: 'sentence', 'data-row': r.id }, marked(r.input, spans, (s) => `${s.entity}${s.label ? ':' + s.label : ''}`));
  const traits = r.entities.filter((e) => isTrait(c, e.entity))
    .map((e) => el('span', { class: 'chip' }, `${e.entity}: ${e.label || e.value}`));
  li.className = '';
  if (!c.mayEdit) { li.replaceChildren(text, ' ', ...traits); return; }
  const labeller = el('span', { class: 'labeller' });
  text.addEventListener('mouseup', () => offerLabel(c, li, r, text, labeller));
  li.replaceChildren(text, ' ', ...traits, el('span', { class: 'row-actions' },
    el('button', { type: 'button', class: 'edit-sentence', 'aria-label': `Edit “${r.input}”`, onclick: () => editRow(c, li, r) }, 'Edit'), ' ',
    el('button', { type: 'button', class: 'delete-sentence', 'aria-label': `Delete “${r.input}”`, onclick: () => deleteRow(c, li, r) }, 'Delete')),
  labeller);
}

/** The words selected in sentence `r`'s `text`, offered in `labeller` to be labelled with a
 *  span entity. */
function offerLabel(c, li, r, text, labeller) {
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
  const spanEntities = Object.keys(c.entities).filter((n) => !isTrait(c, n));
  if (!spanEntities.length) { labeller.replaceChildren(el('span', { class: 'error' }, 'No span entity (dictionary, phrase …) to label with.')); return; }
  const pick = el('select', { 'aria-label': 'Entity', class: 'entity' }, spanEntities.map((n) => el('option', { value: n }, n)));
  const label = el('input', { 'aria-label': 'Label (optional)', class: 'label', placeholder: 'label' });
  labeller.replaceChildren(`“${value}” as `, pick, ' ', label, ' ',
    el('button', { type: 'button', class: 'primary apply-label', onclick: async () => {
      try {
        await putLabels(c, r, r.entities.concat([{ entity: pick.value, label: label.value.trim() || undefined, start, end, value }]));
        viewRow(c, li, r);
      } catch (e) { labeller.replaceChildren(el('span', { class: 'error', role: 'alert' }, await c.why(e, 'label sentences'))); }
    } }, 'Label'));
}

/** Sentence `r` as a form: its text (`typed` kept across a redraw), its labels each with
 *  a remove button. A refusal is said under it, the text left as typed. */
function editRow(c, li, r, typed = r.input) {
  const input = el('input', { class: 'sentence-input', value: typed, 'aria-label': 'Sentence' });
  const err = el('p', { class: 'error', role: 'alert' });
  const labels = r.entities.map((e) => {
    const what = `${e.entity}${e.label ? ':' + e.label : ''}${isTrait(c, e.entity) ? '' : ` on “${e.value}”`}`;
    return el('span', { class: 'chip' }, what, ' ', el('button', { type: 'button', class: 'remove-label', 'aria-label': `Remove label ${what}`, onclick: async () => {
      try {
        await putLabels(c, r, r.entities.filter((x) => x !== e));
        editRow(c, li, r, input.value);
      } catch (x) { err.textContent = await c.why(x, 'label sentences'); }
    } }, '×'));
  });
  li.className = 'editing';
  li.replaceChildren(el('form', { class: 'sentence-edit', onsubmit: (ev) => { ev.preventDefault(); saveRow(c, li, r, input.value, err); } },
    el('div', { class: 'send' }, input,
      el('button', { type: 'submit', class: 'primary save-sentence' }, 'Save'),
      el('button', { type: 'button', class: 'cancel-sentence', onclick: () => viewRow(c, li, r) }, 'Cancel')),
    labels.length ? el('p', { class: 'edit-labels' }, 'Labels: ', labels) : null,
    el('p', { class: 'muted hint' }, 'Labels move with their words; remove a label whose words you take out.'), err));
  input.focus();
}

/** Sentence `r`'s text changed to `input`, then the row read back and shown; a refusal is
 *  said in `err`. */
async function saveRow(c, li, r, input, err) {
  err.textContent = '';
  if (input === r.input) { viewRow(c, li, r); return; }
  try {
    await api('PUT', rowPath(c, r), { input });
    // Read back: the server moved the labels to where their words now are.
    const fresh = (await api('GET', `${c.N}/training_data?limit=100`)).data.find((x) => x.id === r.id);
    Object.assign(r, fresh || { input });
    viewRow(c, li, r);
    const note = el('p', { role: 'status' });
    li.append(note);
    tell(note, 'Saved: its labels moved with their words. Train again for the model to learn it.');
  } catch (x) { err.textContent = await c.why(x, 'edit sentences'); }
}

/** Deletes sentence `r` after a confirmation; its row then says so. */
async function deleteRow(c, li, r) {
  if (!confirm(`Delete the sentence “${r.input}”? The model keeps it until the NLU is trained again.`)) return;
  const note = el('p', { role: 'status' });
  try {
    await api('DELETE', rowPath(c, r));
    c.rows.splice(c.rows.indexOf(r), 1);
    c.total -= 1;
    c.countH.textContent = `Training data (${c.total})`;
    li.className = 'deleted';
    li.replaceChildren(note);
    tell(note, `Deleted “${r.input}”. Train again to leave it out of the model.`);
  } catch (e) {
    li.querySelector('.result')?.remove();
    li.append(note);
    tell(note, await c.why(e, 'delete sentences'), 'error');
  }
}

// ---------------------------------------------------------------------------------------
// Training and predictions

/** The add-sentences form: Train adds the typed sentences and trains; none typed trains
 *  again on those stored. */
function trainForm(c) {
  c.lines = el('textarea', { id: 'lines', rows: 4, 'aria-label': 'Sentences to add', 'aria-describedby': 'lines-hint', placeholder: 'one per line: I want pepperoni #intent:order' });
  return el('form', { class: 'add-sentences', onsubmit: (ev) => { ev.preventDefault(); train(c); } },
    el('label', { for: 'lines' }, 'Add sentences and train'), c.lines,
    el('p', { class: 'muted hint', id: 'lines-hint' }, 'None typed: Train learns the sentences above again (after changing entities or sentences).'),
    el('p', {}, el('button', { class: 'primary', type: 'submit', id: 'train' }, 'Train')));
}

/** The box's sentences as sent (blank lines dropped, each trimmed) and `numbers[i]`: the
 *  box's line (from 1) of the i-th. */
function typedSentences(text) {
  const sent = [];
  const numbers = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim()) { sent.push(line.trim()); numbers.push(i + 1); }
  });
  return { sent, numbers };
}

/** Trains: with the typed sentences (the page then drawn again, showing them, and saying
 *  what was kept and refused), or again on those stored. */
async function train(c) {
  const { sent, numbers } = typedSentences(c.lines.value);
  c.refused.hidden = true;
  c.status.textContent = 'Training…';
  try {
    if (!sent.length) {
      c.status.textContent = trainingText(await api('POST', `${c.N}/retrain`));
      return;
    }
    const f = new FormData();
    for (const s of sent) f.append('sentence', s);
    const a = await api('POST', `${c.N}/train`, f);
    const now = await nlStudio(c.pid, c.nlu.name, true);
    if (now) trained(now, a, sent, numbers);
  } catch (e) { c.status.textContent = await c.why(e, 'train NLUs'); c.status.scrollIntoView({ block: 'nearest' }); }
}

/** What a training with sentences did, on the page drawn again (context `c`): the outcome
 *  and the sentences kept in the status line; each refused one as `line N: why`, N its line
 *  in the box as typed, and the refused sentences back in the box to be fixed. The answer's
 *  `errRows` number the sentences sent (from 1), its `errors` say `line <that>: why`. */
function trained(c, a, sent, numbers) {
  const errRows = a.errRows || [];
  const refused = (a.errors || []).map((e, i) => `line ${numbers[errRows[i] - 1] ?? errRows[i]}: ${String(e).replace(/^line \d+: /, '')}`);
  const added = a.count - (a.unchanged || 0) - (a.relabelled || 0);
  c.status.textContent = `${trainingText(a)} · ${a.count} of ${plural(sent.length, 'sentence')} accepted: ${added} new, ${a.relabelled || 0} relabelled, ${a.unchanged || 0} unchanged${refused.length ? ` · ${refused.length} refused` : ''}`;
  if (refused.length && c.lines) {
    c.lines.value = [...new Set(errRows)].map((n) => sent[n - 1]).filter((s) => s !== undefined).join('\n');
    c.refused.replaceChildren(el('p', {}, `Refused, and back in the box to fix (lines as typed before):`), el('ul', {}, refused.map((t) => el('li', {}, t))));
    c.refused.hidden = false;
  }
  c.status.scrollIntoView({ block: 'nearest' });
}

/** The predict box: a sentence and what the NLU's model predicts for it. */
function predictBox(N) {
  const input = el('input', { id: 'predict-text', 'aria-label': 'Sentence to predict' });
  const out = el('div', { id: 'prediction' });
  return el('form', { class: 'card', onsubmit: async (ev) => {
    ev.preventDefault();
    const f = new FormData();
    f.append('sentence', input.value);
    try { out.replaceChildren(prediction(input.value, (await api('POST', `${N}/predict`, f)).result)); } catch (e) { out.replaceChildren(errorBox(e)); }
  } }, el('h2', {}, 'Predict'), el('div', { class: 'send' }, input, el('button', { type: 'submit', id: 'predict' }, 'Predict')), out);
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
  return el('div', {}, el('p', { class: 'sentence' }, marked(text, spans, (s) => s.entity)),
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
