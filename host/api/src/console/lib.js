// What every page of the console shares: building elements, the one fetch helper (every
// error it meets is shown), notices, tables, times.
//
// Everything a bot or a user wrote goes into the page as text (textContent, never
// innerHTML); links and images take only http(s) URLs. The server sends the console with a
// Content-Security-Policy that allows no inline script.

export const TOKEN = 'botbox.token';
const main = document.getElementById('main');
const notice = document.getElementById('status');

/** An element with attributes (`on…` are listeners) and children (strings become text). */
export function el(tag, attrs, ...children) {
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

/** `u` when it is an http(s) URL, else null (no `javascript:`, no `data:` from a bot, and
 *  nothing for a missing one). */
export function safeUrl(u) {
  if (typeof u !== 'string' || !u.trim()) return null;
  try {
    const url = new URL(u, location.href);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch { return null; }
}

/** Replaces the page's content and moves focus to its heading (its first h1, which a
 *  screen reader then reads; `main` for a page without one). `inPlace`: the same page drawn
 *  again after an action, the window left where it was. */
export function show(...nodes) {
  const inPlace = nodes[0] === IN_PLACE;
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false && n !== IN_PLACE));
  const heading = main.querySelector('h1');
  if (heading && !heading.hasAttribute('tabindex')) heading.setAttribute('tabindex', '-1');
  // A new page opens at its top (the header in view); one drawn again stays where it was.
  if (!inPlace) window.scrollTo(0, 0);
  (heading || main).focus({ preventScroll: true });
}
export const IN_PLACE = Symbol('in place');

/** A notice above the page's content (never over it), scrolled into view; `error` ones are
 *  red. Empty: none. */
export function say(text, kind = 'info') {
  notice.textContent = text;
  notice.className = text ? `notice ${kind}` : 'notice';
  notice.hidden = !text;
  if (text) notice.scrollIntoView({ block: 'nearest' });
}

/** `text` in `where` (a role=status or role=alert element beside the control that acted),
 *  scrolled into view and focused. */
export function tell(where, text, kind = 'info') {
  if (!where) { say(text, kind); return; }
  where.textContent = text;
  where.className = `result ${kind}`;
  where.hidden = !text;
  if (!text) return;
  if (!where.hasAttribute('tabindex')) where.setAttribute('tabindex', '-1');
  where.focus({ preventScroll: true });
  where.scrollIntoView({ block: 'nearest' });
}

export class ApiError extends Error {
  /** `said`: the server's text (its first line dropped on a 400). */
  constructor(message, status, said) { super(message); this.status = status; this.said = said; }
}
/** A 400 opens with the sentence Kata clients expect; what is wrong follows it. */
const BAD_REQUEST = 'Wrong API usage. Please refer to the documentation!\n';

/** A request to the project API with the page's token (`opts.token` another); the JSON
 *  answer (`opts.text`: the text). A failure is an ApiError whose message is what the server
 *  said; a 401 ends the session (`botbox:signed-out`). */
export async function api(method, path, body, opts = {}) {
  const headers = {};
  const form = body instanceof FormData;
  if (!form) headers['content-type'] = 'application/json';
  const token = opts.token || sessionStorage.getItem(TOKEN);
  if (token) headers.authorization = `Bearer ${token}`;
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : (form ? body : JSON.stringify(body)) });
  } catch (e) {
    throw new ApiError(`The server did not answer (${e.message}): check the connection and try again.`, 0);
  }
  const text = await res.text();
  if (res.status === 401 && path !== '/login') {
    sessionStorage.removeItem(TOKEN);
    window.dispatchEvent(new CustomEvent('botbox:signed-out', { detail: 'Your session ended: sign in again.' }));
    throw new ApiError('not signed in', 401);
  }
  if (!res.ok) {
    // Refused: what the page thought the caller may do there is read again next time.
    const pm = res.status === 403 && path.match(/^\/projects\/([^/?]+)/);
    if (pm) accessOf.delete(decodeURIComponent(pm[1]));
    let msg = text;
    try { const j = JSON.parse(text); msg = j.message || j.detail || j.title || text; } catch { /* plain text */ }
    if (msg.startsWith(BAD_REQUEST)) msg = msg.slice(BAD_REQUEST.length);
    throw new ApiError(`${res.status}: ${msg}`, res.status, msg);
  }
  if (opts.text) return text;
  return text ? JSON.parse(text) : null;
}

/** A table with a header row. On a phone its rows stack, each cell named by its column. */
export function table(attrs, headers, rows) {
  for (const tr of rows) [...tr.children].forEach((td, i) => { if (headers[i]) td.dataset.label = headers[i]; });
  return el('table', { ...attrs, class: ['stack', attrs.class].filter(Boolean).join(' ') },
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))), el('tbody', {}, rows));
}

export function errorBox(e) { return el('p', { class: 'error', role: 'alert' }, String(e.message || e)); }

/** A button that copies `text` and says so. */
export function copyButton(text, what) {
  return el('button', { type: 'button', class: 'copy', 'aria-label': `Copy ${what}`, onclick: async (ev) => {
    try { await navigator.clipboard.writeText(text); ev.target.textContent = 'Copied'; } catch { say(`Select the ${what} and copy it: the browser refused.`, 'error'); }
  } }, 'Copy');
}

/** A time as every page writes it (the browser's locale and time zone), from Unix ms or an
 *  ISO text. */
export function time(t) {
  if (t === undefined || t === null || t === '' || t === 0) return '';
  const d = new Date(typeof t === 'number' || /^\d+$/.test(String(t)) ? Number(t) : t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString();
}
/** `1 message`, `3 messages`. */
export function plural(n, noun) { return `${n} ${noun}${n === 1 ? '' : 's'}`; }
/** Microseconds as a person reads them: `840 µs`, `12.5 ms`, `3.2 s`. */
export function duration(us) {
  if (us < 1000) return `${us} µs`;
  if (us < 1_000_000) return `${Number((us / 1000).toPrecision(3))} ms`;
  return `${Number((us / 1_000_000).toPrecision(3))} s`;
}
/** A path segment. */
export const enc = encodeURIComponent;
/** `← Project` back to project `pid`. */
export function backTo(pid) { return el('a', { href: `#/p/${enc(pid)}` }, '← Project'); }

// What the caller may do on a project: `overview.access`, {role, allowed ⊆ [edit, deploy,
// keys, members]}, kept per project for pages that do not read the overview. The server
// decides: this only leaves out controls it would refuse.
const accessOf = new Map();
/** Keeps a project's access (from its overview). */
export function rememberAccess(pid, access) { accessOf.set(pid, access || null); }
/** Forgets every project's access (signed in again, another team) or one project's. */
export function forgetAccess(pid) { if (pid === undefined) accessOf.clear(); else accessOf.delete(pid); }
/** A project's access: kept, or read with its overview. Null when the server does not say. */
export async function projectAccess(pid) {
  if (!accessOf.has(pid)) rememberAccess(pid, (await api('GET', `/projects/${enc(pid)}/overview`)).access);
  return accessOf.get(pid) || null;
}
/** Whether `access` allows `what` (`edit`, `deploy`, `keys`, `members`); a server that does
 *  not say allows everything (it refuses what it must). */
export function can(access, what) {
  return !access || !Array.isArray(access.allowed) || access.allowed.includes(what);
}
const ROLE_NAMES = { admin: 'administrator', teamAdmin: 'team admin' };
/** A role as people read it. */
export function roleName(role) { return ROLE_NAMES[role] || role; }
/** The sentence a read-only page opens with, or null when the caller may change it. */
export function readOnlyNote(access, what = 'edit') {
  if (can(access, what)) return null;
  return el('p', { class: 'note', id: 'read-only' },
    `You have read access to this project (${roleName(access.role)}): changes are made by its developers.`);
}
const REFUSED = "You're not authorized to view this page.";
/** Why an action failed, in the console's words: a refusal (403) names the caller's role and
 *  what it may not `what` (`deploy`), the server's detail after it; other errors as said. */
export function failure(e, what, access, where = 'on this project') {
  if (!(e instanceof ApiError) || e.status !== 403) return String((e && e.message) || e);
  const detail = String(e.said || '').replace(REFUSED, '').trim().replace(/\.$/, '');
  const role = access && access.role ? ` (${roleName(access.role)})` : '';
  return `Your role ${where}${role} may not ${what}.${detail ? ` (${detail}.)` : ''}`;
}
/** `failure`, naming the role the server sees now: after a refusal, project `pid`'s access
 *  is read again (the role may have changed since the page was drawn). */
export async function refusal(e, what, pid, access, where) {
  if (e instanceof ApiError && e.status === 403 && pid) {
    accessOf.delete(pid);
    access = await projectAccess(pid).catch(() => access);
  }
  return failure(e, what, access, where);
}
