// Activity: the audit trail (`GET /audit`), newest first, 50 entries a page with More, filtered
// by action: a project's (`#/p/<id>/activity`), or every tenant's for administrators
// (`#/activity`). Entries are tenants' text: put in as text only.
import { api, backTo, el, enc, failure, show, table, time } from './lib.js';

const LIMIT = 50;
/** Actions offered as the filter's suggestions (the server's filter is the exact name). */
const ACTIONS = ['bot.push', 'cms.publish', 'nlu.train', 'deployment.create', 'deployment.rollback', 'environment.create',
  'environment.update', 'canary.start', 'canary.promote', 'canary.abort', 'canary.rollback', 'channel.create', 'key.create',
  'key.revoke', 'task.review', 'team.member.add', 'team.member.remove', 'login', 'login.failed'];

/** Who acted, as people read it: a user's name, a key with whom it acts for, or botbox. */
function who(a) {
  if (!a) return '';
  if (a.kind === 'system') return `${a.name || 'system'} (botbox itself)`;
  return a.owner ? `${a.name} (for ${a.owner})` : a.name;
}

/** The audit trail of project `pid`, or (none) everything the caller may see: all of it for
 *  an administrator. */
export async function activity(pid, me) {
  const everyone = !pid;
  const admin = me && me.roleId === 'admin';
  let page = 0;
  let total = 0;
  const entries = [];
  const action = el('input', { id: 'activity-action', list: 'activity-actions', autocomplete: 'off', placeholder: 'every action', spellcheck: 'false' });
  const suggestions = el('datalist', { id: 'activity-actions' });
  const suggest = () => {
    const names = new Set([...ACTIONS, ...entries.map((e) => e.action)]);
    suggestions.replaceChildren(...[...names].sort().map((a) => el('option', { value: a })));
  };
  const list = el('div', { id: 'activity' }, el('p', { class: 'muted' }, 'Loading…'));
  const count = el('p', { class: 'muted', id: 'activity-count', role: 'status' });
  const more = el('button', { type: 'button', id: 'activity-more', hidden: true, onclick: () => load(false) }, 'More');
  const heads = ['When', 'Who', 'Action', ...(everyone ? ['Project'] : []), 'Resource', 'Outcome', 'Address'];
  const row = (e) => el('tr', { 'data-action': e.action, class: `outcome-${e.outcome}` },
    el('td', {}, time(e.at)),
    el('td', {}, who(e.actor)),
    el('td', { class: 'mono action' }, e.action),
    everyone ? el('td', { class: 'mono' }, e.projectId ? el('a', { href: `#/p/${enc(e.projectId)}/activity` }, e.projectId) : '') : null,
    el('td', {}, e.resource ? [`${e.resource.kind} `, el('span', { class: 'mono' }, e.resource.id)] : ''),
    el('td', {}, el('span', { class: e.outcome === 'ok' ? '' : 'error' }, e.outcome), e.detail ? el('div', { class: 'muted detail' }, e.detail) : null),
    el('td', { class: 'mono' }, e.address || ''));
  const draw = () => {
    list.replaceChildren(entries.length
      ? table({ class: 'audit' }, heads, entries.map(row))
      : el('p', { class: 'muted' }, action.value.trim() ? `No ${action.value.trim()} entries.` : 'Nothing recorded yet.'));
    count.textContent = entries.length ? `${entries.length} of ${total} entries, newest first.` : '';
    more.hidden = entries.length >= total;
  };
  // `fresh`: from the first page (a new filter); else the next page after those shown.
  const load = async (fresh) => {
    if (fresh) { page = 0; entries.length = 0; }
    more.disabled = true;
    try {
      const q = new URLSearchParams({ page: String(page + 1), limit: String(LIMIT) });
      if (pid) q.set('projectId', pid);
      if (action.value.trim()) q.set('action', action.value.trim());
      const r = await api('GET', `/audit?${q}`);
      page += 1;
      total = r.total;
      entries.push(...(r.data || []));
      draw();
      suggest();
    } catch (e) {
      list.replaceChildren(el('p', { class: 'error', role: 'alert' }, failure(e, 'read this activity', null, everyone ? 'here' : 'on this project')));
      list.scrollIntoView({ block: 'nearest' });
    } finally { more.disabled = false; }
  };
  const filter = el('form', { class: 'card filters', onsubmit: (ev) => { ev.preventDefault(); load(true); } },
    el('label', { for: 'activity-action', class: 'inline' }, 'Action'), action, suggestions, ' ',
    el('button', { type: 'submit', id: 'activity-filter' }, 'Filter'));
  show(el('h1', {}, everyone ? (admin ? 'Activity of every tenant' : 'Your activity') : 'Activity'),
    el('p', {}, pid ? backTo(pid) : el('a', { href: '#/' }, '← Projects'),
      pid ? ' · who changed what in this project, and who was refused' : ' · who changed what, signed in, or was refused'),
    filter,
    el('div', { class: 'card' }, count, list, el('p', {}, more)));
  await load(true);
}
