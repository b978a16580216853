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
 *  publish with a changelog, and the revisions (any of them can be loaded to edit from). */
export async function cmsView(pid) {
  const P = `/projects/${enc(pid)}`;
  // The overview: the project, its newest 20 CMS revisions and what the caller may do.
  const [o, latest] = await Promise.all([api('GET', `${P}/overview`), api('GET', `${P}/cms`)]);
  rememberAccess(pid, o.access);
  const access = o.access || null;
  const mayEdit = can(access, 'edit');
  const p = o.project;
  const revs = { data: o.cmsRevisions || [] };
  const copy = (r) => ({ pages: structuredClone(r.pages || {}), faqs: structuredClone(r.faqs || {}) });
  let doc = copy(latest);
  let base = latest.revision;
  const dirty = el('p', { class: 'muted', id: 'cms-state', 'aria-live': 'polite' });
  const changed = () => { dirty.textContent = `Unpublished changes (editing from ${String(base).slice(0, 10) || 'nothing published'})`; };
  const editor = el('div', { id: 'cms-pages' });
  const faqs = el('div', { id: 'cms-faqs' });
  const idOf = (...names) => `cms-${names.join('-')}`;

  const drawPages = () => {
    const pages = Object.entries(doc.pages);
    editor.replaceChildren(...(pages.length ? pages.map(([page, forms]) => el('section', { class: 'cms-page' }, el('h3', {}, `Page ${page}`),
      Object.entries(forms).map(([form, elements]) => el('fieldset', { class: 'cms-form' }, el('legend', {}, `Form ${form}`),
        Object.entries(elements).map(([name, e]) => {
          const id = idOf(page, form, name);
          if (!mayEdit) {
            return el('div', { class: 'cms-element' }, el('div', { class: 'cms-label', id }, e.label ? `${e.label} (${name}, ${e.type})` : `${name} (${e.type})`),
              cmsValue(e), el('div', { class: 'meta' }, `Bots read it as $(cms.${page}.${form}.${name}.value)`));
          }
          return el('div', { class: 'cms-element' },
            el('label', { for: id }, e.label ? `${e.label} (${name}, ${e.type})` : `${name} (${e.type})`),
            cmsControl(e, id, changed),
            e.type === 'textlist' ? el('span', { class: 'muted', id: `${id}-hint` }, 'One item per line.') : null,
            el('div', { class: 'meta' }, `Bots read it as $(cms.${page}.${form}.${name}.value) `,
              el('button', { type: 'button', class: 'remove', 'aria-label': `Remove element ${name}`, onclick: () => {
                delete elements[name];
                if (!Object.keys(elements).length) delete forms[form];
                if (!Object.keys(forms).length) delete doc.pages[page];
                changed(); drawPages();
              } }, 'Remove')));
        }))))) : [el('p', { class: 'muted' }, 'No pages yet: add an element below.')]));
  };

  const drawFaqs = () => {
    const lines = (v) => (Array.isArray(v) ? v : []).join('\n');
    const split = (t) => t.split('\n').map((l) => l.trim()).filter(Boolean);
    const rows = Object.entries(doc.faqs);
    if (!mayEdit) {
      const items = (v) => el('ul', {}, (Array.isArray(v) ? v : []).map((t) => el('li', {}, String(t))));
      faqs.replaceChildren(...(rows.length ? rows.map(([label, f]) => el('section', { class: 'cms-faq', 'data-label': label },
        el('h3', {}, `FAQ ${label}`), el('p', { class: 'muted' }, 'Questions'), items(f.questions),
        el('p', { class: 'muted' }, 'Answers (the bot picks one)'), items(f.answers),
        el('div', { class: 'meta' }, `Bots answer with $(cms.faq.${label}.answers); the NLU learns the questions as faq:${label}`)))
        : [el('p', { class: 'muted' }, 'No FAQ yet.')]));
      return;
    }
    faqs.replaceChildren(...(rows.length ? rows.map(([label, f]) => el('fieldset', { class: 'cms-faq', 'data-label': label }, el('legend', {}, `FAQ ${label}`),
      el('label', { for: idOf('faq', label, 'q') }, 'Questions (one per line)'),
      el('textarea', { id: idOf('faq', label, 'q'), rows: 3, oninput: (ev) => { f.questions = split(ev.target.value); changed(); } }, lines(f.questions)),
      el('label', { for: idOf('faq', label, 'a') }, 'Answers (one per line; the bot picks one)'),
      el('textarea', { id: idOf('faq', label, 'a'), rows: 2, oninput: (ev) => { f.answers = split(ev.target.value); changed(); } }, lines(f.answers)),
      el('div', { class: 'meta' }, `Bots answer with $(cms.faq.${label}.answers); the NLU learns the questions as faq:${label} `,
        el('button', { type: 'button', class: 'remove', 'aria-label': `Remove FAQ ${label}`, onclick: () => { delete doc.faqs[label]; changed(); drawFaqs(); } }, 'Remove'))))
      : [el('p', { class: 'muted' }, 'No FAQ yet.')]));
  };

  // Adding an element: where, its name and type (a dropdown's options, a slider's range).
  const addErr = el('p', { class: 'error', role: 'alert' });
  const field = (id, label, attrs) => [el('label', { for: id }, label), el('input', { id, ...attrs })];
  const [pageL, pageIn] = field('cms-new-page', 'Page', { value: Object.keys(doc.pages)[0] || 'home' });
  const firstPage = Object.values(doc.pages)[0] || {};
  const [formL, formIn] = field('cms-new-form', 'Form', { value: Object.keys(firstPage)[0] || 'main' });
  const [nameL, nameIn] = field('cms-new-name', 'Element');
  const typeIn = el('select', { id: 'cms-new-type' }, CMS_TYPES.map((t) => el('option', { value: t }, t)));
  const [optL, optIn] = field('cms-new-options', 'Dropdown options', { placeholder: 'red, blue' });
  const [rangeL, rangeIn] = field('cms-new-range', 'Slider range', { value: '0-100', placeholder: 'min-max' });
  const addForm = el('form', { class: 'cms-add', onsubmit: (ev) => {
    ev.preventDefault();
    addErr.textContent = '';
    const [page, form, name, type] = [pageIn.value.trim(), formIn.value.trim(), nameIn.value.trim(), typeIn.value];
    const bad = [['page', page], ['form', form], ['element', name]].find(([, v]) => !CMS_NAME.test(v));
    if (bad) { addErr.textContent = `The ${bad[0]} name "${bad[1]}": a letter or _, then letters, digits or _ (at most 64).`; return; }
    if (page === 'faq') { addErr.textContent = 'No page is named faq: bots read the FAQ tables as cms.faq.'; return; }
    const forms = doc.pages[page] || (doc.pages[page] = {});
    const elements = forms[form] || (forms[form] = {});
    if (elements[name]) { addErr.textContent = `Page ${page}, form ${form} already has an element ${name}.`; return; }
    const e = { type };
    if (type === 'dropdown') {
      e.options = optIn.value.split(',').map((o) => o.trim()).filter(Boolean);
      if (!e.options.length) { addErr.textContent = 'A dropdown needs its options.'; return; }
    }
    if (type === 'slider') {
      const m = rangeIn.value.match(/^\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*$/);
      if (!m || Number(m[1]) >= Number(m[2])) { addErr.textContent = 'A slider range is min-max, min below max (0-100).'; return; }
      [e.min, e.max] = [Number(m[1]), Number(m[2])];
    }
    e.value = cmsDefault(type, e.options || [], e.min);
    elements[name] = e;
    nameIn.value = '';
    changed(); drawPages();
  } }, el('h3', {}, 'Add an element'), el('div', { class: 'fields' },
    el('div', {}, pageL, pageIn), el('div', {}, formL, formIn), el('div', {}, nameL, nameIn),
    el('div', {}, el('label', { for: 'cms-new-type' }, 'Type'), typeIn), el('div', {}, optL, optIn), el('div', {}, rangeL, rangeIn)),
  addErr, el('button', { type: 'submit', id: 'cms-add' }, 'Add element'));

  const faqErr = el('p', { class: 'error', role: 'alert' });
  const [faqL, faqIn] = field('cms-new-faq', 'FAQ label');
  const addFaq = el('form', { class: 'cms-add', onsubmit: (ev) => {
    ev.preventDefault();
    const label = faqIn.value.trim();
    faqErr.textContent = '';
    if (!CMS_NAME.test(label)) { faqErr.textContent = `The label "${label}": a letter or _, then letters, digits or _ (at most 64).`; return; }
    if (doc.faqs[label]) { faqErr.textContent = `FAQ ${label} exists.`; return; }
    doc.faqs[label] = { questions: [], answers: [] };
    faqIn.value = '';
    changed(); drawFaqs();
  } }, faqL, faqIn, ' ', el('button', { type: 'submit', id: 'cms-add-faq' }, 'Add FAQ'), faqErr);

  const pubErr = el('div', { class: 'error problems', role: 'alert', id: 'cms-problems' });
  const changelog = el('input', { id: 'cms-changelog', maxlength: 1000, placeholder: 'What changed' });
  const publish = el('form', { class: 'send', onsubmit: async (ev) => {
    ev.preventDefault();
    pubErr.replaceChildren();
    try {
      const r = await api('POST', `${P}/cms/revisions`, { ...doc, changelog: changelog.value });
      const trained = (r.nluTrainings || []).map((t) => `NLU ${t.nlu}: ${t.status}${t.error ? ` (${t.error})` : ''}`);
      await cmsView(pid);
      say([`Published CMS revision ${r.revision.slice(0, 10)}`, ...trained].join('; ') + '.');
    } catch (e) {
      if (e.status === 403) pubErr.append(el('p', {}, await refusal(e, 'publish CMS content', pid, access)));
      else pubErr.append(el('p', {}, 'Not published:'), el('ul', {}, String(e.message).replace(/^\d+: /, '').split('\n').map((l) => el('li', {}, l))));
      pubErr.scrollIntoView({ block: 'nearest' });
    }
  } }, el('label', { for: 'cms-changelog', class: 'visually-hidden' }, 'Changelog'), changelog,
  el('button', { type: 'submit', class: 'primary', id: 'cms-publish' }, 'Publish'));

  const load = async (r) => {
    const full = await api('GET', `${P}/cms/revisions/${enc(r.revision)}`);
    doc = copy(full);
    base = full.revision;
    changed(); drawPages(); drawFaqs();
    say(`Loaded revision ${cmsLabel(r)} into the editor: publish to make it the latest`);
  };
  // Which CMS revision each environment runs: its deployment's (a canary's too).
  const cmsOf = (version) => {
    const d = (o.deployments || []).find((x) => x.version === version);
    return d ? d.cmsRevision || '' : null; // null: an older deployment than the page lists
  };
  const runs = (o.environments || []).flatMap((e) => {
    const current = e.deploymentVersion || e.depVersion;
    return [[e.name, current], ...(e.canary ? [[`${e.name} (canary)`, e.canary.depVersion]] : [])];
  }).map(([name, version]) => [name, version, cmsOf(version)]);
  const known = new Map(revs.data.map((r) => [r.revision, r]));
  const envRuns = runs.length ? el('ul', { id: 'cms-envs' }, runs.map(([name, version, rev]) => el('li', {},
    el('strong', {}, name), ` runs deployment ${version}: `, rev
      ? el('span', {}, el('span', { class: 'mono' }, rev.slice(0, 10)), known.get(rev)?.changelog ? ` · ${known.get(rev).changelog}` : '')
      : el('span', { class: 'muted' }, rev === null ? 'an older deployment: its CMS revision is on the project page' : 'no CMS content')))) : el('p', { class: 'muted', id: 'cms-envs' }, 'No environment yet.');
  const inEnvs = (rev) => runs.filter((r) => r[2] === rev).map((r) => r[0]).join(', ');
  const revRows = revs.data.map((r, i) => el('tr', {},
    el('td', { class: 'mono' }, String(r.revision).slice(0, 10)), el('td', {}, r.changelog || ''),
    el('td', {}, r.publishedBy), el('td', { class: 'muted' }, time(r.createdAt)), el('td', { class: 'runs-in' }, inEnvs(r.revision)),
    el('td', {}, i === 0 && r.revision === latest.revision ? el('span', { class: 'muted' }, 'latest')
      : !mayEdit ? null : el('button', { type: 'button', class: 'load', onclick: () => load(r).catch((e) => say(e.message, 'error')) }, 'Edit from this'))));

  drawPages();
  drawFaqs();
  show(el('h1', {}, `CMS · ${p.name}`),
    readOnlyNote(access),
    el('p', {}, backTo(pid),
      p.owner ? ` · owned by ${p.owner.type} ${p.owner.name}` : ''),
    latest.revision ? null : el('p', { class: 'muted' }, mayEdit ? 'Nothing published yet: the first publish makes the first revision.' : 'Nothing published yet.'),
    el('div', { class: 'card' }, el('h2', {}, 'Content'), editor, mayEdit ? addForm : null),
    el('div', { class: 'card' }, el('h2', {}, 'FAQ tables'), faqs, mayEdit ? addFaq : null),
    mayEdit ? el('div', { class: 'card' }, el('h2', {}, 'Publish'), dirty, publish, pubErr) : null,
    el('div', { class: 'card' }, el('h2', {}, 'In the environments'), envRuns),
    el('div', { class: 'card' }, el('h2', {}, 'Revisions'), revRows.length
      ? table({ id: 'cms-revisions' }, ['Revision', 'Changelog', 'Published by', 'When', 'Runs in', ''], revRows)
      : el('p', { class: 'muted' }, 'No revision yet.')));
}
