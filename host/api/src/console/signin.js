// Signing in and the header: who is signed in, the team the console acts for, sign out.
import { TOKEN, api, el, enc, say, show } from './lib.js';

/** Starts the console again at the project list, the header read anew: after signing in
 *  or switching teams. One route: by the hash change, or (already there) by asking. */
function restart() {
  window.dispatchEvent(new Event('botbox:reset'));
  if (location.hash === '#/') window.dispatchEvent(new Event('botbox:navigate'));
  else location.hash = '#/';
}

// On a phone the header folds into a menu: *Menu* (a disclosure button) shows or hides the
// navigation and who is signed in; a page change or Escape folds it again. Wider windows show
// them on the header's one line and no button (app.css).
const toggle = document.getElementById('menu-toggle');
const menu = document.getElementById('menu');
/** Opens or folds the phone's menu; folded, focus that was in it goes back to *Menu*. */
function setMenu(open) {
  toggle.setAttribute('aria-expanded', String(open));
  if (!open && toggle.getClientRects().length && menu.contains(document.activeElement)) toggle.focus();
}
toggle.addEventListener('click', () => setMenu(toggle.getAttribute('aria-expanded') !== 'true'));
document.querySelector('header.top').addEventListener('keydown', (ev) => {
  if (ev.key !== 'Escape' || toggle.getAttribute('aria-expanded') !== 'true') return;
  setMenu(false);
  toggle.focus();
});
window.addEventListener('hashchange', () => setMenu(false));
// A link followed: the menu folds; one to the page shown draws it again (focus on its h1).
document.getElementById('nav').addEventListener('click', (ev) => {
  const link = ev.target.closest('a');
  if (!link) return;
  setMenu(false);
  if (link.getAttribute('href') === location.hash) window.dispatchEvent(new Event('botbox:navigate'));
});

export function signIn(message) {
  document.getElementById('who').textContent = '';
  document.getElementById('who').removeAttribute('title');
  document.getElementById('nav').replaceChildren();
  setMenu(false);
  toggle.hidden = true;
  const err = el('p', { class: 'error', role: 'alert' }, message || '');
  const user = el('input', { id: 'username', name: 'username', autocomplete: 'username', required: true });
  const pass = el('input', { id: 'password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const form = el('form', { class: 'card signin', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      const t = await api('POST', '/login', { username: user.value, password: pass.value });
      sessionStorage.setItem(TOKEN, t.id);
      restart();
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

/** Fills the header for the signed-in user; answers `/me`. */
export async function header() {
  const me = await api('GET', '/me');
  const who = document.getElementById('who');
  who.textContent = `${me.username}${me.teamName ? ' · ' + me.teamName : ''}`;
  who.title = who.textContent; // cut with an ellipsis in a narrow window
  // Acting for a team: a team token, from the user's own token (kept beside it).
  const userToken = sessionStorage.getItem(`${TOKEN}.user`) || sessionStorage.getItem(TOKEN);
  const teams = await api('GET', `/users/${enc(me.userId)}/teams`, undefined, { token: userToken })
    .catch((e) => { say(`Your teams could not be listed: ${e.message}`, 'error'); return []; });
  const teamPick = teams.length ? el('select', { id: 'team', 'aria-label': 'Act for', onchange: async (ev) => {
    const id = ev.target.value;
    try {
      if (!id) sessionStorage.setItem(TOKEN, userToken);
      else {
        const t = await api('POST', '/tokens', { type: 'team', teamId: id }, { token: userToken });
        sessionStorage.setItem(`${TOKEN}.user`, userToken);
        sessionStorage.setItem(TOKEN, t.id);
      }
      restart();
    } catch (e) { say(e.message, 'error'); }
  } }, el('option', { value: '' }, 'Myself'), teams.map((t) => el('option', { value: t.id, selected: me.teamId === t.id }, t.name))) : null;
  document.getElementById('nav').replaceChildren(...[
    el('a', { href: '#/' }, 'Projects'),
    el('a', { href: '#/keys', id: 'workspace-keys' }, 'Keys'),
    // Every tenant's audit trail: administrators only (others read a project's).
    me.roleId === 'admin' ? el('a', { href: '#/activity', id: 'activity-link' }, 'Activity') : null,
    teamPick,
    el('button', { type: 'button', id: 'signout', onclick: async () => {
      try { await api('POST', '/logout'); } catch { /* signed out anyway */ }
      sessionStorage.removeItem(TOKEN);
      sessionStorage.removeItem(`${TOKEN}.user`);
      signIn();
    } }, 'Sign out')].filter(Boolean));
  toggle.hidden = false;
  return me;
}
