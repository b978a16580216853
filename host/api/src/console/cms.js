// The CMS: a project's content as a form (each element type with its control), its FAQ
// tables, publishing with a changelog, and its revisions; read-only to those who may not
// edit the project.
import { api, backTo, can, el, enc, refusal, readOnlyNote, rememberAccess, say, show, table, time } from './lib.js';

/** A short description of a CMS revision for a list: `3f2a9c1d0e · the greeting · time`. */
export function cmsLabel(r) {
  return [String(r.revision).slice(0, 10), r.changelog, time(r.createdAt)].filter(Boolean).join(' · ');
}

const CMS_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const CMS_TYPES = ['text', 'textarea', 'textlist', 'slider', 'dropdown', 'toggle'];

/** The input control of one CMS element, bound to `e.value`; `id` labels it. */
function cmsControl(e, id, changed) {
  const set = (v) => { e.value = v; changed(); };
  switch (e.type) {
    case 'textarea':
      return el('textarea', { id, rows: 4, oninput: (ev) => set(ev.target.value) }, e.value || '');
    case 'textlist':
      return el('textarea', { id, rows: 3, 'aria-describedby': `${id}-hint`, oninput: (ev) => set(ev.target.value.split('\n').map((l) => l.trim()).filter(Boolean)) },
        (Array.isArray(e.value) ? e.value : []).join('\n'));
    case 'slider': {
      const out = el('output', { for: id }, String(e.value ?? ''));
      const input = el('input', { id, type: 'range', min: e.min ?? 0, max: e.max ?? 100, step: e.step ?? 1, value: e.value ?? e.min ?? 0,
        oninput: (ev) => { out.textContent = ev.target.value; set(Number(ev.target.value)); } });
      return el('span', { class: 'slider' }, input, out);
    }
    case 'dropdown':
      return el('select', { id, onchange: (ev) => set(ev.target.value) },
        (e.options || []).map((o) => el('option', { value: o, selected: o === e.value }, o)));
    case 'toggle':
      return el('input', { id, type: 'checkbox', checked: e.value === true, onchange: (ev) => set(ev.target.checked) });
    default:
      return el('input', { id, value: e.value ?? '', oninput: (ev) => set(ev.target.value) });
  }
}

/** An element's value as text, for those who may not edit it. */
function cmsValue(e) {
  switch (e.type) {
    case 'textlist': {
      const items = Array.isArray(e.value) ? e.value : [];
      return items.length ? el('ul', { class: 'cms-value' }, items.map((i) => el('li', {}, String(i)))) : el('p', { class: 'muted' }, 'empty');
    }
    case 'toggle': return el('p', { class: 'cms-value' }, e.value === true ? 'on' : 'off');
    case 'slider': return el('p', { class: 'cms-value' }, `${e.value ?? ''} (from ${e.min ?? 0} to ${e.max ?? 100})`);
    default: return el('p', { class: 'cms-value' }, String(e.value ?? ''));
  }
}

/** The value a new element of `type` starts with. */
function cmsDefault(type, options, min) {
  return { text: '', textarea: '', textlist: [], slider: min, dropdown: options[0], toggle: false }[type];
}

/** The CMS page: the latest revision's pages, forms and elements as a form, its FAQ tables,
 *  publish with a changelog, what each environment runs, and the revisions (any of them can
 *  be loaded to edit from). Its parts share a context: { pid, P, access, mayEdit, doc (the
 *  content edited), base (the revision it came from), changed, editor, faqs }. */
export async function cmsView(pid) {
  const P = `/projects/${enc(pid)}`;
  // The overview: the project, its newest 20 CMS revisions and what the caller may do.
  const [o, latest] = await Promise.all([api('GET', `${P}/overview`), api('GET', `${P}/cms`)]);
  rememberAccess(pid, o.access);
  const access = o.access || null;
  const mayEdit = can(access, 'edit');
  const p = o.project;
  const revs = { data: o.cmsRevisions || [] };
  const c = { pid, P, access, mayEdit, doc: cmsCopy(latest), base: latest.revision,
    dirty: el('p', { class: 'muted', id: 'cms-state', 'aria-live': 'polite' }), editor: el('div', { id: 'cms-pages' }), faqs: el('div', { id: 'cms-faqs' }) };
  c.changed = () => { c.dirty.textContent = `Unpublished changes (editing from ${String(c.base).slice(0, 10) || 'nothing published'})`; };
  const runs = cmsRuns(o, revs);
  drawPages(c);
  drawFaqs(c);
  show(el('h1', {}, `CMS · ${p.name}`),
    readOnlyNote(access),
    el('p', {}, backTo(pid),
      p.owner ? ` · owned by ${p.owner.type} ${p.owner.name}` : ''),
    latest.revision ? null : el('p', { class: 'muted' }, mayEdit ? 'Nothing published yet: the first publish makes the first revision.' : 'Nothing published yet.'),
    el('div', { class: 'card' }, el('h2', {}, 'Content'), c.editor, mayEdit ? addElementForm(c) : null),
    el('div', { class: 'card' }, el('h2', {}, 'FAQ tables'), c.faqs, mayEdit ? addFaqForm(c) : null),
    mayEdit ? publishCard(c) : null,
    el('div', { class: 'card' }, el('h2', {}, 'In the environments'), runs.list),
    el('div', { class: 'card' }, el('h2', {}, 'Revisions'), revisionsTable(c, revs, latest, runs.inEnvs)));
}

/** A revision's content, to be edited without changing it. */
function cmsCopy(r) {
  return { pages: structuredClone(r.pages || {}), faqs: structuredClone(r.faqs || {}) };
}
/** An element's (or an FAQ's control's) id: `cms-home-greeting-text`. */
const idOf = (...names) => `cms-${names.join('-')}`;

/** What each environment runs, from the overview `o`: `list` (#cms-envs), each environment
 *  (and canary) with its deployment and that deployment's CMS revision, and `inEnvs(rev)`,
 *  the environments running revision `rev` (`production, staging`). */
function cmsRuns(o, revs) {
  const cmsOf = (version) => {
    const d = (o.deployments || []).find((x) => x.version === version);
    return d ? d.cmsRevision || '' : null; // null: an older deployment than the page lists
  };
  const runs = (o.environments || []).flatMap((e) => {
    const current = e.deploymentVersion || e.depVersion;
    return [[e.name, current], ...(e.canary ? [[`${e.name} (canary)`, e.canary.depVersion]] : [])];
  }).map(([name, version]) => [name, version, cmsOf(version)]);
  const known = new Map(revs.data.map((r) => [r.revision, r]));
  const list = runs.length ? el('ul', { id: 'cms-envs' }, runs.map(([name, version, rev]) => el('li', {},
    el('strong', {}, name), ` runs deployment ${version}: `, rev
      ? el('span', {}, el('span', { class: 'mono' }, rev.slice(0, 10)), known.get(rev)?.changelog ? ` · ${known.get(rev).changelog}` : '')
      : el('span', { class: 'muted' }, rev === null ? 'an older deployment: its CMS revision is on the project page' : 'no CMS content'))))
    : el('p', { class: 'muted', id: 'cms-envs' }, 'No environment yet.');
  return { list, inEnvs: (rev) => runs.filter((r) => r[2] === rev).map((r) => r[0]).join(', ') };
}

/** The content's pages, each form a fieldset of its elements. */
function drawPages(c) {
  const pages = Object.entries(c.doc.pages);
  c.editor.replaceChildren(...(pages.length ? pages.map(([page, forms]) => el('section', { class: 'cms-page' }, el('h3', {}, `Page ${page}`),
    Object.entries(forms).map(([form, elements]) => el('fieldset', { class: 'cms-form' }, el('legend', {}, `Form ${form}`),
      Object.keys(elements).map((name) => cmsElement(c, page, form, name)))))) : [el('p', { class: 'muted' }, 'No pages yet: add an element below.')]));
}

/** Element `name` of form `form` of page `page`: its control and Remove, or its value for
 *  those who may not edit. */
function cmsElement(c, page, form, name) {
  const forms = c.doc.pages[page];
  const elements = forms[form];
  const e = elements[name];
  const id = idOf(page, form, name);
  const title = e.label ? `${e.label} (${name}, ${e.type})` : `${name} (${e.type})`;
  const reads = `Bots read it as $(cms.${page}.${form}.${name}.value)`;
  if (!c.mayEdit) return el('div', { class: 'cms-element' }, el('div', { class: 'cms-label', id }, title), cmsValue(e), el('div', { class: 'meta' }, reads));
  return el('div', { class: 'cms-element' },
    el('label', { for: id }, title),
    cmsControl(e, id, c.changed),
    e.type === 'textlist' ? el('span', { class: 'muted', id: `${id}-hint` }, 'One item per line.') : null,
    el('div', { class: 'meta' }, `${reads} `,
      el('button', { type: 'button', class: 'remove', 'aria-label': `Remove element ${name}`, onclick: () => {
        delete elements[name];
        if (!Object.keys(elements).length) delete forms[form];
        if (!Object.keys(forms).length) delete c.doc.pages[page];
        c.changed(); drawPages(c);
      } }, 'Remove')));
}

/** The FAQ tables: each as two text boxes (questions, answers) with Remove, or as lists for
 *  those who may not edit. */
function drawFaqs(c) {
  const rows = Object.entries(c.doc.faqs);
  c.faqs.replaceChildren(...(rows.length ? rows.map(([label, f]) => (c.mayEdit ? faqEdit(c, label, f) : faqView(label, f)))
    : [el('p', { class: 'muted' }, 'No FAQ yet.')]));
}
const faqReads = (label) => `Bots answer with $(cms.faq.${label}.answers); the NLU learns the questions as faq:${label}`;

/** FAQ `label` for those who may not edit it. */
function faqView(label, f) {
  const items = (v) => el('ul', {}, (Array.isArray(v) ? v : []).map((t) => el('li', {}, String(t))));
  return el('section', { class: 'cms-faq', 'data-label': label },
    el('h3', {}, `FAQ ${label}`), el('p', { class: 'muted' }, 'Questions'), items(f.questions),
    el('p', { class: 'muted' }, 'Answers (the bot picks one)'), items(f.answers),
    el('div', { class: 'meta' }, faqReads(label)));
}

/** FAQ `label` as a fieldset: a line per question, a line per answer. */
function faqEdit(c, label, f) {
  const lines = (v) => (Array.isArray(v) ? v : []).join('\n');
  const split = (t) => t.split('\n').map((l) => l.trim()).filter(Boolean);
  return el('fieldset', { class: 'cms-faq', 'data-label': label }, el('legend', {}, `FAQ ${label}`),
    el('label', { for: idOf('faq', label, 'q') }, 'Questions (one per line)'),
    el('textarea', { id: idOf('faq', label, 'q'), rows: 3, oninput: (ev) => { f.questions = split(ev.target.value); c.changed(); } }, lines(f.questions)),
    el('label', { for: idOf('faq', label, 'a') }, 'Answers (one per line; the bot picks one)'),
    el('textarea', { id: idOf('faq', label, 'a'), rows: 2, oninput: (ev) => { f.answers = split(ev.target.value); c.changed(); } }, lines(f.answers)),
    el('div', { class: 'meta' }, `${faqReads(label)} `,
      el('button', { type: 'button', class: 'remove', 'aria-label': `Remove FAQ ${label}`, onclick: () => { delete c.doc.faqs[label]; c.changed(); drawFaqs(c); } }, 'Remove')));
}

/** A labelled input: [label, input]. */
function cmsField(id, label, attrs) { return [el('label', { for: id }, label), el('input', { id, ...attrs })]; }

/** The element `type` described by the add form's options (`options`, `range`): the new
 *  element, or why not (a string). */
function newElement(type, options, range) {
  const e = { type };
  if (type === 'dropdown') {
    e.options = options.split(',').map((o) => o.trim()).filter(Boolean);
    if (!e.options.length) return 'A dropdown needs its options.';
  }
  if (type === 'slider') {
    const m = range.match(/^\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*$/);
    if (!m || Number(m[1]) >= Number(m[2])) return 'A slider range is min-max, min below max (0-100).';
    [e.min, e.max] = [Number(m[1]), Number(m[2])];
  }
  e.value = cmsDefault(type, e.options || [], e.min);
  return e;
}

/** Adding an element: where, its name and type (a dropdown's options, a slider's range). */
function addElementForm(c) {
  const err = el('p', { class: 'error', role: 'alert' });
  const [pageL, pageIn] = cmsField('cms-new-page', 'Page', { value: Object.keys(c.doc.pages)[0] || 'home' });
  const [formL, formIn] = cmsField('cms-new-form', 'Form', { value: Object.keys(Object.values(c.doc.pages)[0] || {})[0] || 'main' });
  const [nameL, nameIn] = cmsField('cms-new-name', 'Element');
  const typeIn = el('select', { id: 'cms-new-type' }, CMS_TYPES.map((t) => el('option', { value: t }, t)));
  const [optL, optIn] = cmsField('cms-new-options', 'Dropdown options', { placeholder: 'red, blue' });
  const [rangeL, rangeIn] = cmsField('cms-new-range', 'Slider range', { value: '0-100', placeholder: 'min-max' });
  return el('form', { class: 'cms-add', onsubmit: (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const [page, form, name] = [pageIn.value.trim(), formIn.value.trim(), nameIn.value.trim()];
    const bad = [['page', page], ['form', form], ['element', name]].find(([, v]) => !CMS_NAME.test(v));
    if (bad) { err.textContent = `The ${bad[0]} name "${bad[1]}": a letter or _, then letters, digits or _ (at most 64).`; return; }
    if (page === 'faq') { err.textContent = 'No page is named faq: bots read the FAQ tables as cms.faq.'; return; }
    if (c.doc.pages[page]?.[form]?.[name]) { err.textContent = `Page ${page}, form ${form} already has an element ${name}.`; return; }
    const e = newElement(typeIn.value, optIn.value, rangeIn.value);
    if (typeof e === 'string') { err.textContent = e; return; }
    const forms = c.doc.pages[page] || (c.doc.pages[page] = {});
    (forms[form] || (forms[form] = {}))[name] = e;
    nameIn.value = '';
    c.changed(); drawPages(c);
  } }, el('h3', {}, 'Add an element'), el('div', { class: 'fields' },
    el('div', {}, pageL, pageIn), el('div', {}, formL, formIn), el('div', {}, nameL, nameIn),
    el('div', {}, el('label', { for: 'cms-new-type' }, 'Type'), typeIn), el('div', {}, optL, optIn), el('div', {}, rangeL, rangeIn)),
  err, el('button', { type: 'submit', id: 'cms-add' }, 'Add element'));
}

/** Adding an FAQ table by its label. */
function addFaqForm(c) {
  const err = el('p', { class: 'error', role: 'alert' });
  const [faqL, faqIn] = cmsField('cms-new-faq', 'FAQ label');
  return el('form', { class: 'cms-add', onsubmit: (ev) => {
    ev.preventDefault();
    const label = faqIn.value.trim();
    err.textContent = '';
    if (!CMS_NAME.test(label)) { err.textContent = `The label "${label}": a letter or _, then letters, digits or _ (at most 64).`; return; }
    if (c.doc.faqs[label]) { err.textContent = `FAQ ${label} exists.`; return; }
    c.doc.faqs[label] = { questions: [], answers: [] };
    faqIn.value = '';
    c.changed(); drawFaqs(c);
  } }, faqL, faqIn, ' ', el('button', { type: 'submit', id: 'cms-add-faq' }, 'Add FAQ'), err);
}

/** Publish: the content edited as a new revision, with a changelog; the server's problems
 *  listed under it. */
function publishCard(c) {
  const problems = el('div', { class: 'error problems', role: 'alert', id: 'cms-problems' });
  const changelog = el('input', { id: 'cms-changelog', maxlength: 1000, placeholder: 'What changed' });
  const publish = el('form', { class: 'send', onsubmit: async (ev) => {
    ev.preventDefault();
    problems.replaceChildren();
    try {
      const r = await api('POST', `${c.P}/cms/revisions`, { ...c.doc, changelog: changelog.value });
      const trained = (r.nluTrainings || []).map((t) => `NLU ${t.nlu}: ${t.status}${t.error ? ` (${t.error})` : ''}`);
      await cmsView(c.pid);
      say([`Published CMS revision ${r.revision.slice(0, 10)}`, ...trained].join('; ') + '.');
    } catch (e) {
      if (e.status === 403) problems.append(el('p', {}, await refusal(e, 'publish CMS content', c.pid, c.access)));
      else problems.append(el('p', {}, 'Not published:'), el('ul', {}, String(e.message).replace(/^\d+: /, '').split('\n').map((l) => el('li', {}, l))));
      problems.scrollIntoView({ block: 'nearest' });
    }
  } }, el('label', { for: 'cms-changelog', class: 'visually-hidden' }, 'Changelog'), changelog,
  el('button', { type: 'submit', class: 'primary', id: 'cms-publish' }, 'Publish'));
  return el('div', { class: 'card' }, el('h2', {}, 'Publish'), c.dirty, publish, problems);
}

/** The newest revisions: each with where it runs (`inEnvs`) and, for those who may edit,
 *  Edit from this (the latest is marked instead). */
function revisionsTable(c, revs, latest, inEnvs) {
  if (!revs.data.length) return el('p', { class: 'muted' }, 'No revision yet.');
  return table({ id: 'cms-revisions' }, ['Revision', 'Changelog', 'Published by', 'When', 'Runs in', ''], revs.data.map((r, i) => el('tr', {},
    el('td', { class: 'mono' }, String(r.revision).slice(0, 10)), el('td', {}, r.changelog || ''),
    el('td', {}, r.publishedBy), el('td', { class: 'muted' }, time(r.createdAt)), el('td', { class: 'runs-in' }, inEnvs(r.revision)),
    el('td', {}, i === 0 && r.revision === latest.revision ? el('span', { class: 'muted' }, 'latest')
      : !c.mayEdit ? null : el('button', { type: 'button', class: 'load', onclick: () => loadRevision(c, r).catch((e) => say(e.message, 'error')) }, 'Edit from this')))));
}

/** Revision `r` loaded into the editor, to publish as the latest. */
async function loadRevision(c, r) {
  const full = await api('GET', `${c.P}/cms/revisions/${enc(r.revision)}`);
  c.doc = cmsCopy(full);
  c.base = full.revision;
  c.changed(); drawPages(c); drawFaqs(c);
  say(`Loaded revision ${cmsLabel(r)} into the editor: publish to make it the latest`);
}
