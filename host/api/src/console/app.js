// The botbox console: a single page over the project API, in plain JavaScript (no build step,
// no dependency). Everything a bot or a user wrote is put in the page as text (textContent,
// never innerHTML); links and images take only http(s) URLs. The server sends it with a
// Content-Security-Policy that allows no inline script.
'use strict';

const TOKEN = 'botbox.token';
const main = document.getElementById('main');
const statusLine = document.getElementById('status');

/** An element with attributes (`on…` are listeners) and children (strings become text). */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** `u` when it is an http(s) URL, else null (no `javascript:`, no `data:` from a bot). */
function safeUrl(u) {
  try {
    const url = new URL(String(u), location.href);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch { return null; }
}

function show(...nodes) {
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
  main.focus();
}

function say(text) { statusLine.textContent = text; }

class ApiError extends Error {}
const BAD_REQUEST = 'Wrong API usage. Please refer to the documentation!\n';

async function api(method, path, body) {
  const headers = {};
  const form = body instanceof FormData;
  if (!form) headers['content-type'] = 'application/json';
  const token = sessionStorage.getItem(TOKEN);
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : (form ? body : JSON.stringify(body)) });
  const text = await res.text();
  if (res.status === 401 && path !== '/login') {
    sessionStorage.removeItem(TOKEN);
    signIn('Your session ended: sign in again.');
    throw new ApiError('not signed in');
  }
  if (!res.ok) {
    let msg = text;
    try { const j = JSON.parse(text); msg = j.message || j.detail || j.title || text; } catch { /* plain text */ }
    // A 400 opens with the sentence Kata clients expect; what is wrong follows it.
    if (msg.startsWith(BAD_REQUEST)) msg = msg.slice(BAD_REQUEST.length);
    throw new ApiError(`${res.status}: ${msg}`);
  }
  return text ? JSON.parse(text) : null;
}

/** A table with a header row. On a phone its rows stack, each cell named by its column. */
function table(attrs, headers, rows) {
  for (const tr of rows) [...tr.children].forEach((td, i) => { if (headers[i]) td.dataset.label = headers[i]; });
  return el('table', { ...attrs, class: ['stack', attrs.class].filter(Boolean).join(' ') },
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))), el('tbody', {}, rows));
}

function errorBox(e) { return el('p', { class: 'error', role: 'alert' }, String(e.message || e)); }

function time(ms) { return ms ? new Date(Number(ms)).toLocaleString() : ''; }
/** `1 message`, `3 messages`. */
function plural(n, noun) { return `${n} ${noun}${n === 1 ? '' : 's'}`; }
/** Microseconds as a person reads them: `840 µs`, `12.5 ms`, `3.2 s`. */
function duration(us) {
  if (us < 1000) return `${us} µs`;
  if (us < 1_000_000) return `${Number((us / 1000).toPrecision(3))} ms`;
  return `${Number((us / 1_000_000).toPrecision(3))} s`;
}

// ---------------------------------------------------------------------------------------
// Sign in

function signIn(message) {
  document.getElementById('who').textContent = '';
  document.getElementById('nav').replaceChildren();
  const err = el('p', { class: 'error', role: 'alert' }, message || '');
  const user = el('input', { id: 'username', name: 'username', autocomplete: 'username', required: true });
  const pass = el('input', { id: 'password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const form = el('form', { class: 'card signin', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      const t = await api('POST', '/login', { username: user.value, password: pass.value });
      sessionStorage.setItem(TOKEN, t.id);
      location.hash = '#/';
      route();
    } catch (e) { err.textContent = e.message.replace(/^401: /, ''); }
  } },
  el('h1', {}, 'Sign in to botbox'),
  el('label', { for: 'username' }, 'Username'), user,
  el('label', { for: 'password' }, 'Password'), pass,
  el('p', {}, el('button', { class: 'primary', type: 'submit', id: 'signin' }, 'Sign in')),
  err);
  show(form);
  user.focus();
}

async function header() {
  const me = await api('GET', '/me');
  document.getElementById('who').textContent = `${me.username}${me.teamName ? ' · ' + me.teamName : ''}`;
  // Acting for a team: a team token, from the user's own token (kept beside it).
  const userToken = sessionStorage.getItem(`${TOKEN}.user`) || sessionStorage.getItem(TOKEN);
  let teams = [];
  try {
    const res = await fetch(`/users/${encodeURIComponent(me.userId)}/teams`, { headers: { authorization: `Bearer ${userToken}` } });
    if (res.ok) teams = await res.json();
  } catch { /* no teams shown */ }
  const teamPick = teams.length ? el('select', { id: 'team', 'aria-label': 'Act for', onchange: async (ev) => {
    const id = ev.target.value;
    try {
      if (!id) { sessionStorage.setItem(TOKEN, userToken); }
      else {
        const res = await fetch('/tokens', { method: 'POST', headers: { authorization: `Bearer ${userToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ type: 'team', teamId: id }) });
        if (!res.ok) throw new Error(`${res.status}: ${await res.text()}`);
        sessionStorage.setItem(`${TOKEN}.user`, userToken);
        sessionStorage.setItem(TOKEN, (await res.json()).id);
      }
      location.hash = '#/';
      route();
    } catch (e) { say(e.message); }
  } }, el('option', { value: '' }, 'Myself'), teams.map((t) => el('option', { value: t.id, selected: me.teamId === t.id }, t.name))) : null;
  document.getElementById('nav').replaceChildren(...[
    el('a', { href: '#/' }, 'Projects'),
    el('a', { href: '#/keys', id: 'workspace-keys' }, 'Workspace keys'),
    teamPick,
    el('button', { type: 'button', id: 'signout', onclick: async () => {
      try { await api('POST', '/logout'); } catch { /* signed out anyway */ }
      sessionStorage.removeItem(TOKEN);
      sessionStorage.removeItem(`${TOKEN}.user`);
      signIn();
    } }, 'Sign out')].filter(Boolean));
  return me;
}

// ---------------------------------------------------------------------------------------
// Projects

/** The projects the caller reaches (its own and its teams'), each with its owner; an
 *  administrator also gets a link to every tenant's (`#/all`). */
async function projects(me, all) {
  const page = await api('GET', `/projects?limit=100${all ? '&owner=all' : ''}`);
  const rows = page.data.map((p) => el('tr', {},
    el('td', {}, el('a', { href: `#/p/${encodeURIComponent(p.id)}` }, p.name)),
    el('td', {}, p.owner ? `${p.owner.name} (${p.owner.type})` : ''),
    el('td', {}, p.label || p.description || ''),
    el('td', { class: 'muted' }, time(p.updatedAt || p.createdAt))));
  const admin = me && me.roleId === 'admin' && me.credential === 'login';
  const filter = admin ? el('p', {}, el('a', { href: all ? '#/' : '#/all', id: 'all-tenants' },
    all ? 'Show my projects and my teams\' only' : 'Show every tenant\'s projects')) : null;
  show(el('h1', {}, all ? 'Projects of every tenant' : 'Projects'), filter, el('div', { class: 'card' }, rows.length
    ? table({}, ['Name', 'Owner', 'Description', 'Updated'], rows)
    : el('p', { class: 'muted' }, 'No projects yet: `botbox push` in a bot folder makes one.')));
}

function nextVersion(versions) {
  const parse = (v) => (String(v).match(/^(\d+)\.(\d+)\.(\d+)$/) || []).slice(1).map(Number);
  let best = [0, 0, 0];
  for (const v of versions) {
    const p = parse(v);
    if (p.length === 3 && (p[0] > best[0] || (p[0] === best[0] && (p[1] > best[1] || (p[1] === best[1] && p[2] > best[2]))))) best = p;
  }
  return `${best[0]}.${best[1]}.${best[2] + 1}`;
}

/** A short description of a CMS revision for a list: `3f2a9c1d0e · the greeting · time`. */
function cmsLabel(r) {
  return [String(r.revision).slice(0, 10), r.changelog, time(r.createdAt)].filter(Boolean).join(' · ');
}

/** The deploy dialog: which environment, and which CMS revision goes with the bot revision
 *  (the latest unless another is picked). Deploys as the next deployment version. */
function deployDialog(pid, rev, envs, deps, cmsRevs) {
  const P = `/projects/${encodeURIComponent(pid)}`;
  const version = nextVersion(deps.map((d) => d.version));
  const envList = el('datalist', { id: 'deploy-envs' }, envs.map((e) => el('option', { value: e.name })));
  const target = el('input', { id: 'deploy-env', list: 'deploy-envs', required: true, value: (envs[0] && envs[0].name) || 'production' });
  const cms = cmsRevs.length
    ? el('select', { id: 'deploy-cms' }, cmsRevs.map((r, i) => el('option', { value: r.revision }, `${cmsLabel(r)}${i === 0 ? ' (latest)' : ''}`)))
    : null;
  const err = el('p', { class: 'error', role: 'alert' });
  const dialog = el('dialog', { id: 'deploy-dialog', 'aria-labelledby': 'deploy-title' });
  const close = () => { dialog.close(); dialog.remove(); };
  const form = el('form', { method: 'dialog', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const name = target.value.trim();
    const env = envs.find((e) => e.name === name || e.slug === name);
    try {
      await api('POST', `${P}/deployment/versions`, { version, botRevision: rev.revision, ...(cms ? { cmsRevision: cms.value } : {}) });
      if (env) await api('PUT', `${P}/environments/${encodeURIComponent(env.id)}`, { depVersion: version });
      else await api('POST', `${P}/environments`, { depId: pid, depVersion: version, name });
      close();
      await project(pid);
      say(`Deployed bot ${rev.version} as deployment ${version} to ${name}`);
    } catch (e) { err.textContent = e.message; }
  } },
  el('h2', { id: 'deploy-title' }, `Deploy bot ${rev.version} as deployment ${version}`),
  el('label', { for: 'deploy-env' }, 'Environment (a new name makes a new environment)'), target, envList,
  cms ? [el('label', { for: 'deploy-cms' }, 'CMS revision'), cms] : null,
  err,
  el('p', { class: 'buttons' }, el('button', { type: 'button', onclick: close }, 'Cancel'),
    el('button', { type: 'submit', class: 'primary', id: 'deploy-confirm' }, 'Deploy')));
  dialog.append(form);
  document.body.append(dialog);
  dialog.showModal();
  target.focus();
}

async function project(pid) {
  const [p, revs, envs, deps, cmsRevs] = await Promise.all([
    api('GET', `/projects/${encodeURIComponent(pid)}`),
    api('GET', `/projects/${encodeURIComponent(pid)}/bot/revisions?limit=20`),
    api('GET', `/projects/${encodeURIComponent(pid)}/environments?limit=100`),
    api('GET', `/projects/${encodeURIComponent(pid)}/deployment/versions?limit=20`).catch(() => ({ data: [] })),
    api('GET', `/projects/${encodeURIComponent(pid)}/cms/revisions?limit=20`).catch(() => ({ data: [] })),
  ]);
  const channels = await Promise.all(envs.data.map((e) => api('GET', `/projects/${encodeURIComponent(pid)}/environments/${encodeURIComponent(e.id)}/channels`)
    .then((c) => (Array.isArray(c) ? c : (c && c.data) || [])).catch(() => [])));
  const deploy = (rev) => deployDialog(pid, rev, envs.data, deps.data, cmsRevs.data);
  const warnings = (r) => {
    const w = r.warnings || [];
    return w.length
      ? el('details', { class: 'warnings' }, el('summary', {}, `${w.length} warning${w.length > 1 ? 's' : ''}`), el('ul', {}, w.map((t) => el('li', {}, t))))
      : el('span', { class: 'muted' }, 'none');
  };
  const revRows = revs.data.map((r) => el('tr', {},
    el('td', {}, r.version), el('td', { class: 'muted' }, time(r.createdAt)),
    el('td', { class: 'muted' }, String(r.revision || '').slice(0, 10)), el('td', {}, warnings(r)),
    el('td', {}, el('button', { type: 'button', class: 'deploy', 'data-version': r.version, onclick: () => deploy(r) }, 'Deploy…'))));
  const envLink = (e, what, label) => el('a', { href: `#/p/${encodeURIComponent(pid)}/${what}/${encodeURIComponent(e.name)}`, class: `${what}-link` }, label);
  const envRows = envs.data.map((e, i) => el('tr', {},
    el('td', {}, e.name,
      (channels[i] || []).map((c) => el('div', { class: 'muted channel' }, `${c.name} (${c.type}) · webhook `, el('span', { class: 'mono' }, c.webhook)))),
    el('td', {}, e.deploymentVersion || e.depVersion || ''),
    el('td', { class: 'links' }, envLink(e, 'chat', 'Chat'), ' · ', envLink(e, 'transcripts', 'Transcripts'), ' · ',
      envLink(e, 'analytics', 'Analytics'), ' · ', envLink(e, 'keys', 'Keys'))));
  const rollback = async (d) => {
    if (!confirm(`Roll back to deployment ${d.version}? Every environment on a newer version moves to it.`)) return;
    try {
      const r = await api('POST', `/deployments/${encodeURIComponent(d.id)}/rollback`, { version: d.version, changelog: 'from the console' });
      say(r.environments.length ? `Rolled back ${r.environments.join(', ')} to ${d.version}` : `Nothing was newer than ${d.version}`);
      await project(pid);
    } catch (e) { say(e.message); }
  };
  const depRows = deps.data.map((d) => el('tr', {}, el('td', {}, d.version), el('td', { class: 'muted' }, String(d.botRevision || '').slice(0, 10)),
    el('td', { class: 'muted' }, String(d.cmsRevision || '').slice(0, 10)),
    el('td', {}, el('button', { type: 'button', class: 'rollback', 'data-version': d.version, onclick: () => rollback(d) }, 'Roll back to this'))));
  show(
    el('h1', {}, p.name),
    p.owner ? el('p', { class: 'muted', id: 'owner' }, `Owned by ${p.owner.type} ${p.owner.name}`) : null,
    el('p', { class: 'links' }, el('a', { href: `#/p/${encodeURIComponent(pid)}/errors`, id: 'errors-link' }, 'Errors'), ' · ',
      el('a', { href: `#/p/${encodeURIComponent(pid)}/cases`, id: 'cases-link' }, 'Cases and reviews'), ' · ',
      el('a', { href: `#/p/${encodeURIComponent(pid)}/bot`, id: 'bot-link' }, 'Bot source'), ' · ',
      el('a', { href: `#/p/${encodeURIComponent(pid)}/nl`, id: 'nl-link' }, 'NL Studio'), ' · ',
      el('a', { href: `#/p/${encodeURIComponent(pid)}/cms`, id: 'cms-link' }, 'CMS')),
    el('div', { class: 'card' }, el('h2', {}, 'Environments'), envRows.length
      ? table({ id: 'environments' }, ['Environment', 'Deployment', ''], envRows)
      : el('p', { class: 'muted' }, 'No environment yet: deploy a revision.')),
    el('div', { class: 'card' }, el('h2', {}, 'Bot revisions'),
      revRows.length ? el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}/chat` }, 'Chat with the latest revision')) : null,
      revRows.length
      ? table({ id: 'revisions' }, ['Version', 'Pushed', 'Revision', 'Warnings', ''], revRows)
      : el('p', { class: 'muted' }, 'No revision yet: `botbox push` makes one.')),
    el('div', { class: 'card' }, el('h2', {}, 'Deployments'), depRows.length
      ? table({}, ['Version', 'Bot revision', 'CMS revision', ''], depRows)
      : el('p', { class: 'muted' }, 'No deployment yet.')));
}

// ---------------------------------------------------------------------------------------
// Chat tester

function chat(pid, envName) {
  let session = null;
  const log = el('div', { class: 'chat', id: 'chat', 'aria-live': 'polite' });
  const debug = el('dl', { class: 'debug', id: 'debug' });
  const input = el('input', { id: 'text', 'aria-label': 'Message', autocomplete: 'off' });
  const bubble = (who, ...content) => { const b = el('div', { class: `bubble ${who}` }, ...content); log.append(b); log.scrollTop = log.scrollHeight; return b; };
  const actionsOf = (acts) => el('div', { class: 'actions' }, (acts || []).map((a) => {
    if (a.type === 'url') {
      const href = safeUrl(a.url);
      return href ? el('a', { href, target: '_blank', rel: 'noopener noreferrer' }, a.label || href) : null;
    }
    return el('button', { type: 'button', class: 'reply', onclick: () => {
      if (a.type === 'message') send({ type: 'text', content: a.text || a.label || '' }, a.label);
      else send({ type: 'data', payload: a.payload === undefined ? {} : a.payload }, a.label);
    } }, a.label || '…');
  }));
  const image = (u, alt) => { const src = safeUrl(u); return src ? el('img', { src, alt: alt || '', loading: 'lazy' }) : null; };
  const render = (r) => {
    if (r.type === 'text') { bubble('bot', r.content || ''); return; }
    const p = r.payload || {};
    const items = p.items;
    switch (p.template_type) {
      case 'carousel': {
        const cards = (Array.isArray(items) ? items : []).map((it) => el('div', { class: 'item' },
          image(it.thumbnailImageUrl, it.title), el('strong', {}, it.title || ''), el('div', {}, it.text || ''), actionsOf(it.actions)));
        log.append(el('div', { class: 'cards' }, cards));
        break;
      }
      case 'button': case 'confirm':
        bubble('bot', el('strong', {}, (items && items.title) || ''), el('div', {}, (items && items.text) || ''), actionsOf(items && items.actions));
        break;
      case 'image':
        bubble('bot', image((items && (items.originalContentUrl || items.previewImageUrl)) || p.url, 'image') || '[image]');
        break;
      case 'sticker':
        bubble('bot', `[sticker ${(items && items.stickerId) || ''}]`);
        break;
      default:
        bubble('bot', p.template_type ? `[${p.template_type}]` : JSON.stringify(p));
    }
    const quick = items && !Array.isArray(items) && items.quickreply;
    if (Array.isArray(quick)) log.append(actionsOf(quick.filter((q) => q.type !== 'location').map((q) => ({ type: 'postback', label: q.label, payload: q.payload }))));
  };
  const showDebug = (res) => {
    const meta = (res.session && res.session.meta) || {};
    const msg = (res.messages && res.messages[0]) || {};
    const rows = [['Flow', meta.lastFlow || '-'], ['State', meta.lastState || '-'], ['Intent', msg.intent || '-'],
      ['Context', JSON.stringify((res.session && res.session.contexes && meta.lastFlow && res.session.contexes[meta.lastFlow]) || {}, null, 1)],
      ['Calls', (res.calls || []).map((c) => (c.type === 'method' ? `method ${c.name}`
        : `${c.method} ${c.url} → ${c.error ? 'error: ' + c.error : `${c.result.status} ${String(c.result.body).slice(0, 200)}`}`)).join('\n') || 'none'],
      ['Errors', (res.errors || []).join('\n') || 'none']];
    debug.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k.toLowerCase() }, v)]));
  };
  async function send(message, shown) {
    bubble('user', shown || message.content || JSON.stringify(message.payload));
    try {
      const res = await api('POST', `/projects/${encodeURIComponent(pid)}/bot/converse`, { message, session, ...(envName ? { environmentName: envName } : {}) });
      session = res.session;
      for (const r of res.responses || []) render(r);
      showDebug(res);
    } catch (e) { log.append(errorBox(e)); }
  }
  const form = el('form', { class: 'send', onsubmit: (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    send({ type: 'text', content: text });
  } }, input, el('button', { class: 'primary', type: 'submit', id: 'send' }, 'Send'),
  el('button', { type: 'button', onclick: () => { session = null; log.replaceChildren(); debug.replaceChildren(); } }, 'Clear'));
  show(el('h1', {}, `Chat · ${envName || 'latest revision'}`),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project')),
    el('div', { class: 'grid' },
      el('div', { class: 'card' }, log, form),
      el('div', { class: 'card' }, el('h2', {}, 'Last step'), debug)));
  input.focus();
}

// ---------------------------------------------------------------------------------------
// Transcripts, errors, keys

/** A message of a transcript line as a person reads it. */
function messageText(m) {
  if (!m || typeof m !== 'object') return String(m);
  if (m.type === 'text') return m.content || '';
  if (m.type === 'command') return `[command ${m.content || ''}]`;
  const p = m.payload || {};
  if (p.template_type) {
    const items = Array.isArray(p.items) ? p.items : (p.items ? [p.items] : []);
    const parts = items.map((i) => [i.title, i.text].filter(Boolean).join(': ')).filter(Boolean);
    return `[${p.template_type}] ${parts.join(' | ')}`;
  }
  return `[${m.type}] ${JSON.stringify(p)}`;
}

/** An environment's conversations; `who` and `at` (Unix ms) come from an error's link: that
 * user's messages in the hour around that time. */
async function transcripts(pid, envName, who, at) {
  const user = el('input', { id: 'user', 'aria-label': 'User id', placeholder: 'any user', value: who || '' });
  const around = Number(at) > 0 ? Number(at) : null;
  const hours = el('select', { id: 'since', 'aria-label': 'Since' },
    [...(around ? [['around', `around ${time(around)}`]] : []),
      ['1', 'last hour'], ['24', 'last day'], ['168', 'last week'], ['', 'all kept']].map(([v, t]) => el('option', { value: v }, t)));
  hours.value = around ? 'around' : '24';
  const out = el('div', { id: 'conversations' });
  const load = async () => {
    out.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      let q = `/projects/${encodeURIComponent(pid)}/transcripts?environment=${encodeURIComponent(envName)}&limit=1000`;
      if (hours.value === 'around') q += `&after=${around - 1800_000}&end=${around + 1800_000}`;
      else q += `&after=${hours.value ? Date.now() - Number(hours.value) * 3600_000 : -1}`;
      if (user.value.trim()) q += `&user=${encodeURIComponent(user.value.trim())}`;
      const page = await api('GET', q);
      const byUser = new Map();
      for (const l of page.data) {
        if (!byUser.has(l.userId)) byUser.set(l.userId, []);
        byUser.get(l.userId).push(l);
      }
      if (!byUser.size) { out.replaceChildren(el('p', { class: 'muted' }, 'No messages in this range.')); return; }
      out.replaceChildren(...[...byUser].map(([u, lines]) => el('section', { class: 'card conversation' },
        el('h2', {}, `${u} · ${lines.length} messages`),
        el('div', { class: 'chat' }, lines.map((l) => el('div', { class: `bubble ${l.direction === 'in' ? 'user' : 'bot'}`,
          title: time(l.timestamp) + (l.stepUs != null ? ` · step ${duration(l.stepUs)}` : '') },
          messageText(l.message),
          l.direction === 'out' && l.intent ? el('div', { class: 'meta' }, `${l.flow || '-'} / ${l.intent}`) : null))))));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  show(el('h1', {}, `Transcripts · ${envName}`),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project')),
    el('form', { class: 'card filters', onsubmit: (ev) => { ev.preventDefault(); load(); } },
      el('label', { for: 'user' }, 'User'), user, el('label', { for: 'since' }, 'Time'), hours,
      el('p', {}, el('button', { class: 'primary', type: 'submit', id: 'filter' }, 'Show'))),
    out);
  await load();
}

async function errorsView(pid) {
  const envs = await api('GET', `/projects/${encodeURIComponent(pid)}/environments?limit=100`);
  const env = el('select', { id: 'error-env', 'aria-label': 'Environment' }, el('option', { value: '' }, 'every environment'),
    envs.data.map((e) => el('option', { value: e.id }, e.name)));
  const group = el('select', { id: 'error-group', 'aria-label': 'Kind' },
    [['', 'every kind'], ['step', 'failed steps'], ['bot', 'user errors']].map(([v, t]) => el('option', { value: v }, t)));
  const channel = el('input', { id: 'error-channel', 'aria-label': 'Channel', placeholder: 'channel id, console, agent, task' });
  const out = el('div', { class: 'card' });
  const load = async () => {
    let q = `/projects/${encodeURIComponent(pid)}/errors?limit=100`;
    if (env.value) q += `&environmentId=${encodeURIComponent(env.value)}`;
    if (group.value) q += `&errorGroup=${encodeURIComponent(group.value)}`;
    if (channel.value.trim()) q += `&channelId=${encodeURIComponent(channel.value.trim())}`;
    try {
      const page = await api('GET', q);
      // Channel steps have transcripts: the error links to its user's conversation then.
      const current = await api('GET', `/projects/${encodeURIComponent(pid)}/environments?limit=100`);
      const envName = new Map(current.data.map((e) => [e.id, e.name]));
      const conversation = (e) => (e.userId && envName.has(e.environmentId) && !['console', 'agent', 'task'].includes(e.channelId)
        ? el('a', { class: 'conversation-link', href: `#/p/${encodeURIComponent(pid)}/transcripts/${encodeURIComponent(envName.get(e.environmentId))}/${encodeURIComponent(e.userId)}/${e.timestamp}` }, e.userId)
        : el('span', { class: 'muted' }, e.userId || ''));
      const rows = page.data.map((e) => el('tr', {},
        el('td', { class: 'muted' }, time(e.timestamp)), el('td', {}, `${e.errorGroup}/${e.errorCode}`),
        el('td', {}, e.channelId), el('td', {}, conversation(e)), el('td', { class: 'message' }, e.errorMessage)));
      out.replaceChildren(rows.length
        ? table({ id: 'errors' }, ['Time', 'Kind', 'Channel', 'Conversation', 'Message'], rows)
        : el('p', { class: 'muted' }, 'No errors: every step went through.'));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  show(el('h1', {}, 'Errors'),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project')),
    el('form', { class: 'card filters', onsubmit: (ev) => { ev.preventDefault(); load(); } },
      env, ' ', group, ' ', channel, ' ', el('button', { class: 'primary', type: 'submit', id: 'error-filter' }, 'Show')),
    out);
  await load();
}

async function keys(pid, envName) {
  let base;
  let title;
  let back;
  if (pid) {
    const envs = await api('GET', `/projects/${encodeURIComponent(pid)}/environments?limit=100`);
    const env = envs.data.find((e) => e.name === envName);
    if (!env) throw new ApiError(`no environment ${envName}`);
    base = `/projects/${encodeURIComponent(pid)}/environments/${encodeURIComponent(env.id)}/keys`;
    title = `Agent keys · ${envName}`;
    back = el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project');
  } else {
    const me = await api('GET', '/me');
    base = `/teams/${encodeURIComponent(me.teamId || me.userId)}/keys`;
    title = `Workspace keys · ${me.teamName || me.username}`;
    back = el('a', { href: '#/' }, '← Projects');
  }
  const created = el('div', { id: 'created', role: 'status' });
  const list = el('div');
  const refresh = async () => {
    const ks = await api('GET', base);
    const rows = ks.map((k) => el('tr', {},
      el('td', {}, k.name), el('td', { class: 'mono' }, k.hint), el('td', { class: 'muted' }, k.revokedAt ? 'revoked' : 'active'),
      el('td', {}, k.revokedAt ? null : el('button', { type: 'button', class: 'revoke', onclick: async () => {
        if (!confirm(`Revoke key ${k.name} (${k.hint})? Clients using it stop working at once.`)) return;
        try { await api('DELETE', `${base}/${encodeURIComponent(k.id)}`); say(`Revoked ${k.name}`); await refresh(); } catch (e) { say(e.message); }
      } }, 'Revoke'))));
    list.replaceChildren(rows.length
      ? table({ id: 'keys' }, ['Name', 'Key', 'State', ''], rows)
      : el('p', { class: 'muted' }, 'No keys yet.'));
  };
  const name = el('input', { id: 'keyname', 'aria-label': 'Key name', placeholder: 'name', required: true });
  show(el('h1', {}, title),
    el('p', {}, back),
    el('form', { class: 'card', onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const k = await api('POST', base, { name: name.value.trim() });
        name.value = '';
        created.replaceChildren(el('p', {}, 'The new key, shown this once — copy it now:'), el('p', { class: 'mono', id: 'newkey' }, k.key));
        await refresh();
      } catch (e) { created.replaceChildren(errorBox(e)); }
    } }, el('label', { for: 'keyname' }, 'New key'), name, ' ', el('button', { class: 'primary', type: 'submit', id: 'create-key' }, 'Create'), created),
    el('div', { class: 'card' }, list));
  await refresh();
}

/** Cases of the project with their tasks by state, and the review queue: a task in review
 * shows its inputs and proposed outputs; a person approves it or rejects it with a note. */
async function cases(pid) {
  const P = `/projects/${encodeURIComponent(pid)}`;
  const list = await api('GET', `${P}/cases`);
  const pretty = (v) => el('pre', { class: 'mono' }, JSON.stringify(v === undefined ? null : v, null, 2));
  const sections = [];
  const queue = [];
  for (const c of list.data) {
    const tasks = (await api('GET', `${P}/cases/${encodeURIComponent(c.id)}/tasks`)).data;
    for (const t of tasks.filter((t) => t.status === 'review')) {
      const note = el('textarea', { 'aria-label': 'Note', rows: 2, class: 'note', placeholder: 'A note for the record (required to reject)' });
      const err = el('p', { class: 'error', role: 'alert' });
      const decide = async (decision) => {
        err.textContent = '';
        if (decision === 'reject' && !note.value.trim()) { err.textContent = 'Say why it is rejected.'; return; }
        try {
          await api('POST', `${P}/tasks/${encodeURIComponent(t.id)}/review`, { decision, comment: note.value.trim() || undefined });
          say(`Task ${t.id.slice(0, 12)} ${decision === 'approve' ? 'approved' : 'rejected'}`);
          await cases(pid);
        } catch (e) { err.textContent = e.message; }
      };
      queue.push(el('section', { class: 'card review', 'data-task': t.id },
        el('h2', {}, `${c.name} · task ${t.id.slice(0, 12)}`),
        el('div', { class: 'grid' }, el('div', {}, el('strong', {}, 'Inputs'), pretty(t.inputs)), el('div', {}, el('strong', {}, 'Proposed outputs'), pretty(t.outputs))),
        note,
        el('p', { class: 'actions' },
          el('button', { type: 'button', class: 'primary approve', onclick: () => decide('approve') }, 'Approve'),
          el('button', { type: 'button', class: 'reject', onclick: () => decide('reject') }, 'Reject')),
        err));
    }
    const rows = tasks.map((t) => el('tr', { 'data-task': t.id },
      el('td', { class: 'mono' }, t.id.slice(0, 12)), el('td', { class: 'status' }, t.status),
      el('td', { class: 'muted' }, t.createdAt || ''), el('td', {}, t.error ? `${t.error.code}: ${t.error.message}` : '')));
    sections.push(el('div', { class: 'card' }, el('h2', {}, `${c.name}${c.review ? ' (review)' : ''}`), rows.length
      ? table({ class: 'tasks' }, ['Task', 'Status', 'Created', 'Error'], rows)
      : el('p', { class: 'muted' }, 'No tasks.')));
  }
  show(el('h1', {}, 'Cases'),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project')),
    el('h2', {}, 'Waiting for review'),
    queue.length ? el('div', { id: 'queue' }, queue) : el('p', { class: 'muted', id: 'queue' }, 'Nothing waits for a review.'),
    ...(sections.length ? sections : [el('p', { class: 'muted' }, 'No Cases: `botbox case create` makes one.')]));
}

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

async function analyticsView(pid, envName) {
  const range = el('select', { id: 'range', 'aria-label': 'Range' },
    [['24', 'last 24 hours, by hour'], ['168', 'last 7 days, by day'], ['720', 'last 30 days, by day']].map(([v, t]) => el('option', { value: v }, t)));
  const out = el('div', { id: 'analytics' });
  const load = async () => {
    out.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      const hours = Number(range.value);
      const to = Date.now();
      const a = await api('GET', `/projects/${encodeURIComponent(pid)}/analytics?environment=${encodeURIComponent(envName)}&from=${to - hours * 3600_000}&to=${to + 1}&bucket=${hours <= 24 ? 'hour' : 'day'}`);
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
  show(el('h1', {}, `Analytics · ${envName}`),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project')),
    el('p', {}, el('label', { for: 'range' }, 'Range'), range), out);
  await load();
}

/** The latest bot revision, flow by flow: intents, states with their actions and
 * transitions, methods; read-only (edit and `botbox push` from the files). */
async function botSource(pid) {
  const bot = await api('GET', `/projects/${encodeURIComponent(pid)}/bot`);
  const yaml = el('pre', { class: 'mono', id: 'yaml' });
  const yamlView = el('details', { class: 'card' }, el('summary', { id: 'yaml-toggle' }, 'The whole bot as YAML'), yaml);
  yamlView.addEventListener('toggle', async () => {
    if (!yamlView.open || yaml.textContent) return;
    try {
      const res = await fetch(`/projects/${encodeURIComponent(pid)}/bot?format=yaml`, { headers: { authorization: `Bearer ${sessionStorage.getItem(TOKEN)}` } });
      yaml.textContent = res.ok ? await res.text() : `${res.status}: ${await res.text()}`;
    } catch (e) { yaml.textContent = String(e); }
  });
  const pretty = (v) => el('pre', { class: 'mono' }, JSON.stringify(v, null, 2));
  const flows = Object.entries(bot.flows || {}).map(([name, f]) => el('details', { class: 'card flow', open: true },
    el('summary', {}, el('strong', {}, name), ` · ${Object.keys(f.states || {}).length} states, ${Object.keys(f.intents || {}).length} intents`),
    el('h2', {}, 'Intents'), pretty(f.intents || {}),
    el('h2', {}, 'States'),
    Object.entries(f.states || {}).map(([s, st]) => el('details', { class: 'state' },
      el('summary', {}, s, st.initial ? ' (initial)' : '', st.end ? ' (end)' : ''), pretty(st)))));
  show(el('h1', {}, `${bot.name || 'Bot'} ${bot.version || ''}`),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project')),
    yamlView,
    flows.length ? flows : el('p', { class: 'muted' }, 'No flows.'),
    bot.methods ? el('div', { class: 'card' }, el('h2', {}, 'Methods'),
      Object.entries(bot.methods).map(([sig, code]) => el('div', {}, el('strong', { class: 'mono' }, sig), el('pre', { class: 'mono' }, typeof code === 'string' ? code : JSON.stringify(code, null, 2))))) : null);
}

/** NL Studio: a project NLU's entities, its training sentences with their labels shown on
 * the text (select words of a sentence to label them), training, and a predict box. */
async function nlStudio(pid, chosen) {
  const P = `/projects/${encodeURIComponent(pid)}/nlus`;
  const nlus = (await api('GET', P)).data;
  if (!nlus.length) {
    show(el('h1', {}, 'NL Studio'), el('p', { class: 'muted' }, 'This project has no NLU: create the project with options.nlu, or add one through the API.'));
    return;
  }
  const nlu = nlus.find((n) => n.name === chosen) || nlus[0];
  const N = `${P}/${encodeURIComponent(nlu.name)}`;
  const entities = nlu.entities || {};
  const spanEntities = Object.entries(entities).filter(([, e]) => e.type !== 'trait').map(([n]) => n);
  const rows = (await api('GET', `${N}/training_data?limit=100`)).data;
  const status = el('p', { id: 'training-status', role: 'status' }, `Training: ${nlu.training.status}${nlu.training.revision ? ` (revision ${String(nlu.training.revision).slice(0, 10)})` : ''}`);
  const sentence = (r) => {
    const spans = r.entities.filter((e) => e.end > e.start && entities[e.entity] && entities[e.entity].type !== 'trait').sort((a, b) => a.start - b.start);
    const parts = [];
    let at = 0;
    for (const s of spans) {
      if (s.start < at) continue;
      parts.push(r.input.slice(at, s.start));
      parts.push(el('mark', { title: `${s.entity}${s.label ? ':' + s.label : ''}` }, r.input.slice(s.start, s.end)));
      at = s.end;
    }
    parts.push(r.input.slice(at));
    const traits = r.entities.filter((e) => entities[e.entity] && entities[e.entity].type === 'trait')
      .map((e) => el('span', { class: 'chip' }, `${e.entity}: ${e.label || e.value}`));
    const text = el('span', { class: 'sentence', 'data-row': r.id }, parts);
    const labeller = el('span', { class: 'labeller' });
    text.addEventListener('mouseup', () => {
      const sel = window.getSelection();
      if (!sel || sel.isCollapsed || !text.contains(sel.anchorNode) || !text.contains(sel.focusNode)) return;
      const range = sel.getRangeAt(0);
      const pre = document.createRange();
      pre.selectNodeContents(text);
      pre.setEnd(range.startContainer, range.startOffset);
      const start = pre.toString().length;
      const value = range.toString();
      const end = start + value.length;
      if (!value.trim()) return;
      if (!spanEntities.length) { labeller.replaceChildren(el('span', { class: 'error' }, 'No span entity (dictionary, phrase …) to label with.')); return; }
      const pick = el('select', { 'aria-label': 'Entity', class: 'entity' }, spanEntities.map((n) => el('option', { value: n }, n)));
      const label = el('input', { 'aria-label': 'Label (optional)', class: 'label', placeholder: 'label' });
      labeller.replaceChildren(`“${value}” as `, pick, ' ', label, ' ',
        el('button', { type: 'button', class: 'primary apply-label', onclick: async () => {
          try {
            const ents = r.entities.concat([{ entity: pick.value, label: label.value.trim() || undefined, start, end, value }]);
            await api('PUT', `${N}/training_data/${encodeURIComponent(r.id)}`, { entities: ents });
            await nlStudio(pid, nlu.name);
          } catch (e) { labeller.replaceChildren(errorBox(e)); }
        } }, 'Label'));
    });
    return el('li', {}, text, ' ', traits, labeller);
  };
  const lines = el('textarea', { id: 'lines', rows: 4, 'aria-label': 'Sentences to add', placeholder: 'one per line: I want pepperoni #intent:order' });
  const predictIn = el('input', { id: 'predict-text', 'aria-label': 'Sentence to predict' });
  const predictOut = el('pre', { id: 'prediction', class: 'mono' });
  show(el('h1', {}, `NL Studio · ${nlu.name}`),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project'), ' · ', nlu.nluId),
    el('div', { class: 'card' }, el('h2', {}, 'Entities'),
      Object.keys(entities).length ? el('ul', {}, Object.entries(entities).map(([n, e]) => el('li', {}, el('strong', {}, n), ` ${e.type}${e.labels ? ': ' + e.labels.join(', ') : ''}`)))
        : el('p', { class: 'muted' }, 'No entities.')),
    el('div', { class: 'card' }, el('h2', {}, `Training data (${rows.length})`),
      el('p', { class: 'muted' }, 'Select words of a sentence to label them.'),
      rows.length ? el('ul', { id: 'training' }, rows.map(sentence)) : el('p', { class: 'muted' }, 'No sentences yet.'),
      el('form', { onsubmit: async (ev) => {
        ev.preventDefault();
        const f = new FormData();
        for (const l of lines.value.split('\n').map((x) => x.trim()).filter(Boolean)) f.append('sentence', l);
        status.textContent = 'Training…';
        try {
          const a = await api('POST', `${N}/train`, f);
          await nlStudio(pid, nlu.name);
          document.getElementById('training-status').textContent = `Training: ${a.status}${a.revision ? ` (revision ${String(a.revision).slice(0, 10)})` : ''}${a.errors && a.errors.length ? ' · refused: ' + a.errors.join('; ') : ''}`;
        } catch (e) { status.textContent = e.message; }
      } }, el('label', { for: 'lines' }, 'Add sentences and train'), lines, el('p', {}, el('button', { class: 'primary', type: 'submit', id: 'train' }, 'Train'))),
      status),
    el('form', { class: 'card', onsubmit: async (ev) => {
      ev.preventDefault();
      const f = new FormData();
      f.append('sentence', predictIn.value);
      try { predictOut.textContent = JSON.stringify((await api('POST', `${N}/predict`, f)).result, null, 2); } catch (e) { predictOut.textContent = e.message; }
    } }, el('h2', {}, 'Predict'), predictIn, ' ', el('button', { type: 'submit', id: 'predict' }, 'Predict'), predictOut));
}

// ---------------------------------------------------------------------------------------
// CMS

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

/** The value a new element of `type` starts with. */
function cmsDefault(type, options, min) {
  return { text: '', textarea: '', textlist: [], slider: min, dropdown: options[0], toggle: false }[type];
}

/** The CMS page: the latest revision's pages, forms and elements as a form, its FAQ tables,
 *  publish with a changelog, and the revisions (any of them can be loaded to edit from). */
async function cmsView(pid) {
  const P = `/projects/${encodeURIComponent(pid)}`;
  const [p, latest, revs] = await Promise.all([api('GET', P), api('GET', `${P}/cms`), api('GET', `${P}/cms/revisions?limit=20`)]);
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
      say([`Published CMS revision ${r.revision.slice(0, 10)}`, ...trained].join('; '));
    } catch (e) {
      pubErr.append(el('p', {}, 'Not published:'), el('ul', {}, String(e.message).replace(/^\d+: /, '').split('\n').map((l) => el('li', {}, l))));
    }
  } }, el('label', { for: 'cms-changelog', class: 'visually-hidden' }, 'Changelog'), changelog,
  el('button', { type: 'submit', class: 'primary', id: 'cms-publish' }, 'Publish'));

  const load = async (r) => {
    const full = await api('GET', `${P}/cms/revisions/${encodeURIComponent(r.revision)}`);
    doc = copy(full);
    base = full.revision;
    changed(); drawPages(); drawFaqs();
    say(`Loaded revision ${cmsLabel(r)} into the editor: publish to make it the latest`);
  };
  const revRows = revs.data.map((r, i) => el('tr', {},
    el('td', { class: 'mono' }, String(r.revision).slice(0, 10)), el('td', {}, r.changelog || ''),
    el('td', {}, r.publishedBy), el('td', { class: 'muted' }, time(r.createdAt)),
    el('td', {}, i === 0 && r.revision === latest.revision ? el('span', { class: 'muted' }, 'latest')
      : el('button', { type: 'button', class: 'load', onclick: () => load(r).catch((e) => say(e.message)) }, 'Edit from this'))));

  drawPages();
  drawFaqs();
  show(el('h1', {}, `CMS · ${p.name}`),
    el('p', {}, el('a', { href: `#/p/${encodeURIComponent(pid)}` }, '← Project'),
      p.owner ? ` · owned by ${p.owner.type} ${p.owner.name}` : ''),
    latest.revision ? null : el('p', { class: 'muted' }, 'Nothing published yet: the first publish makes the first revision.'),
    el('div', { class: 'card' }, el('h2', {}, 'Content'), editor, addForm),
    el('div', { class: 'card' }, el('h2', {}, 'FAQ tables'), faqs, addFaq),
    el('div', { class: 'card' }, el('h2', {}, 'Publish'), dirty, publish, pubErr),
    el('div', { class: 'card' }, el('h2', {}, 'Revisions'), revRows.length
      ? table({ id: 'cms-revisions' }, ['Revision', 'Changelog', 'Published by', 'When', ''], revRows)
      : el('p', { class: 'muted' }, 'No revision yet.')));
}

// ---------------------------------------------------------------------------------------

async function route() {
  if (!sessionStorage.getItem(TOKEN)) { signIn(); return; }
  say(''); // what the last page said is not about this one
  try {
    const me = await header();
    const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    if (parts[0] === 'keys') await keys(null, null);
    else if (parts[0] === 'p' && parts[2] === 'chat') chat(parts[1], parts[3]);
    else if (parts[0] === 'p' && parts[2] === 'transcripts') await transcripts(parts[1], parts[3], parts[4], parts[5]);
    else if (parts[0] === 'p' && parts[2] === 'keys') await keys(parts[1], parts[3]);
    else if (parts[0] === 'p' && parts[2] === 'errors') await errorsView(parts[1]);
    else if (parts[0] === 'p' && parts[2] === 'cases') await cases(parts[1]);
    else if (parts[0] === 'p' && parts[2] === 'analytics') await analyticsView(parts[1], parts[3]);
    else if (parts[0] === 'p' && parts[2] === 'bot') await botSource(parts[1]);
    else if (parts[0] === 'p' && parts[2] === 'nl') await nlStudio(parts[1], parts[3]);
    else if (parts[0] === 'p' && parts[2] === 'cms') await cmsView(parts[1]);
    else if (parts[0] === 'p' && parts[1]) await project(parts[1]);
    else await projects(me, parts[0] === 'all');
  } catch (e) {
    if (!(e instanceof ApiError && e.message === 'not signed in')) show(errorBox(e));
  }
}

window.addEventListener('hashchange', route);
route();
