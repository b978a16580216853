// Keys: an environment's agent keys, or the workspace keys of whom the console acts for;
// a new key is shown once, with a copy button. Created and revoked by those whose role
// allows it.
import { ApiError, api, backTo, can, copyButton, el, enc, refusal, readOnlyNote, rememberAccess, roleName, say, show, table, time } from './lib.js';

/** `me` is who the console acts for (from the header), for workspace keys. */
export async function keys(pid, envName, me) {
  let base;
  let title;
  let back;
  let access;
  let where;
  let note = null;
  if (pid) {
    // The overview: the environments and what the caller may do.
    const o = await api('GET', `/projects/${enc(pid)}/overview`);
    rememberAccess(pid, o.access);
    access = o.access || null;
    where = 'on this project';
    const env = (o.environments || []).find((e) => e.name === envName);
    if (!env) throw new ApiError(`no environment ${envName}`);
    base = `/projects/${enc(pid)}/environments/${enc(env.id)}/keys`;
    title = `Agent keys · ${envName}`;
    back = backTo(pid);
    note = readOnlyNote(access) || (can(access, 'keys') ? null
      : el('p', { class: 'note', id: 'read-only' }, `Your role on this project (${roleName(access.role)}) may not manage its keys.`));
  } else {
    base = `/teams/${enc(me.teamId || me.userId)}/keys`;
    title = `Workspace keys · ${me.teamName || me.username}`;
    back = el('a', { href: '#/' }, '← Projects');
    // A viewer lists a workspace's keys; developers and team admins make them.
    access = { role: me.roleId, allowed: me.roleId === 'viewer' ? [] : ['keys'] };
    where = 'in this workspace';
    if (me.roleId === 'viewer') note = el('p', { class: 'note', id: 'read-only' }, 'You have read access to this workspace (viewer): its keys are made by its developers.');
  }
  const mayKeys = can(access, 'keys');
  const created = el('div', { id: 'created', role: 'status' });
  const list = el('div');
  const refresh = async () => {
    let ks;
    try { ks = await api('GET', base); } catch (e) { list.replaceChildren(el('p', { class: 'error', role: 'alert' }, await refusal(e, 'see its keys', pid, access, where))); return; }
    const rows = ks.map((k) => el('tr', {},
      el('td', {}, k.name), el('td', { class: 'mono' }, k.hint), el('td', { class: 'created' }, time(k.createdAt)),
      el('td', { class: 'muted state' }, k.revokedAt ? `revoked ${time(k.revokedAt)}` : 'active'),
      el('td', {}, k.revokedAt || !mayKeys ? null : el('button', { type: 'button', class: 'revoke', onclick: async () => {
        if (!confirm(`Revoke key ${k.name} (${k.hint})? Clients using it stop working at once.`)) return;
        try { await api('DELETE', `${base}/${enc(k.id)}`); say(`Revoked ${k.name}.`); await refresh(); } catch (e) { say(await refusal(e, 'revoke keys', pid, access, where), 'error'); }
      } }, 'Revoke'))));
    list.replaceChildren(rows.length
      ? table({ id: 'keys' }, ['Name', 'Key', 'Created', 'State', ''], rows)
      : el('p', { class: 'muted' }, 'No keys yet.'));
  };
  const name = el('input', { id: 'keyname', 'aria-label': 'Key name', placeholder: 'name', required: true });
  show(el('h1', {}, title),
    note,
    el('p', {}, back),
    !mayKeys ? null : el('form', { class: 'card', onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const k = await api('POST', base, { name: name.value.trim() });
        name.value = '';
        created.replaceChildren(el('p', {}, 'The new key, shown this once — copy it now:'),
          el('p', {}, el('span', { class: 'mono', id: 'newkey' }, k.key), ' ', copyButton(k.key, 'key')));
        await refresh();
      } catch (e) { created.replaceChildren(el('p', { class: 'error', role: 'alert' }, await refusal(e, 'create keys', pid, access, where))); }
    } }, el('label', { for: 'keyname' }, 'New key'), name, ' ', el('button', { class: 'primary', type: 'submit', id: 'create-key' }, 'Create'), created),
    el('div', { class: 'card' }, list));
  await refresh();
}
