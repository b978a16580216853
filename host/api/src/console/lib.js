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

/** Replaces the page's content. */
export function show(...nodes) {
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
  main.focus();
}

/** A notice above the page's content (never over it); `error` ones are red. Empty: none. */
export function say(text, kind = 'info') {
  notice.textContent = text;
  notice.className = text ? `notice ${kind}` : 'notice';
  notice.hidden = !text;
}

export class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
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
    let msg = text;
    try { const j = JSON.parse(text); msg = j.message || j.detail || j.title || text; } catch { /* plain text */ }
    if (msg.startsWith(BAD_REQUEST)) msg = msg.slice(BAD_REQUEST.length);
    throw new ApiError(`${res.status}: ${msg}`, res.status);
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
