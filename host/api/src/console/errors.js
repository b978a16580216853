// Errors: the bot's latest errors of every kind of step, filtered; a channel user's error
// links to that conversation.
import { api, backTo, el, enc, errorBox, show, table, time } from './lib.js';

export async function errorsView(pid) {
  const envs = await api('GET', `/projects/${enc(pid)}/environments?limit=100`);
  const env = el('select', { id: 'error-env', 'aria-label': 'Environment' }, el('option', { value: '' }, 'every environment'),
    envs.data.map((e) => el('option', { value: e.id }, e.name)));
  const group = el('select', { id: 'error-group', 'aria-label': 'Kind' },
    [['', 'every kind'], ['step', 'failed steps'], ['bot', 'user errors']].map(([v, t]) => el('option', { value: v }, t)));
  const channel = el('input', { id: 'error-channel', 'aria-label': 'Channel', placeholder: 'channel id, console, agent, task' });
  const out = el('div', { class: 'card' });
  const load = async () => {
    let q = `/projects/${enc(pid)}/errors?limit=100`;
    if (env.value) q += `&environmentId=${enc(env.value)}`;
    if (group.value) q += `&errorGroup=${enc(group.value)}`;
    if (channel.value.trim()) q += `&channelId=${enc(channel.value.trim())}`;
    try {
      const page = await api('GET', q);
      // Channel steps have transcripts: the error links to its user's conversation then.
      let envName = new Map(envs.data.map((e) => [e.id, e.name]));
      // An environment made since the page opened: its name read again (rare).
      if (page.data.some((e) => e.environmentId && !envName.has(e.environmentId))) {
        envs.data = (await api('GET', `/projects/${enc(pid)}/environments?limit=100`)).data;
        envName = new Map(envs.data.map((e) => [e.id, e.name]));
      }
      const conversation = (e) => (e.userId && envName.has(e.environmentId) && !['console', 'agent', 'task'].includes(e.channelId)
        ? el('a', { class: 'conversation-link', href: `#/p/${enc(pid)}/transcripts/${enc(envName.get(e.environmentId))}/${enc(e.userId)}/${e.timestamp}` }, e.userId)
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
    el('p', {}, backTo(pid)),
    el('form', { class: 'card filters', onsubmit: (ev) => { ev.preventDefault(); load(); } },
      env, ' ', group, ' ', channel, ' ', el('button', { class: 'primary', type: 'submit', id: 'error-filter' }, 'Show')),
    out);
  await load();
}
