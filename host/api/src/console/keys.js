// Keys: an environment's agent keys, or the workspace keys of whom the console acts for;
// a new key is shown once, with a copy button.
import { ApiError, api, backTo, copyButton, el, enc, errorBox, say, show, table } from './lib.js';

/** `me` is who the console acts for (from the header), for workspace keys. */
export async function keys(pid, envName, me) {
  let base;
  let title;
  let back;
  if (pid) {
    const envs = await api('GET', `/projects/${enc(pid)}/environments?limit=100`);
    const env = envs.data.find((e) => e.name === envName);
    if (!env) throw new ApiError(`no environment ${envName}`);
    base = `/projects/${enc(pid)}/environments/${enc(env.id)}/keys`;
    title = `Agent keys · ${envName}`;
    back = backTo(pid);
  } else {
    base = `/teams/${enc(me.teamId || me.userId)}/keys`;
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
        try { await api('DELETE', `${base}/${enc(k.id)}`); say(`Revoked ${k.name}.`); await refresh(); } catch (e) { say(e.message, 'error'); }
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
        created.replaceChildren(el('p', {}, 'The new key, shown this once — copy it now:'),
          el('p', {}, el('span', { class: 'mono', id: 'newkey' }, k.key), ' ', copyButton(k.key, 'key')));
        await refresh();
      } catch (e) { created.replaceChildren(errorBox(e)); }
    } }, el('label', { for: 'keyname' }, 'New key'), name, ' ', el('button', { class: 'primary', type: 'submit', id: 'create-key' }, 'Create'), created),
    el('div', { class: 'card' }, list));
  await refresh();
}
