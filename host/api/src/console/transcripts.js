// Transcripts: an environment's conversations by user, read as a chat.
import { api, backTo, duration, el, enc, errorBox, show, time } from './lib.js';

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
export async function transcripts(pid, envName, who, at) {
  // The environment's channels, to say which one each conversation came through (a user id
  // is a channel's own, and the console's test chats are told apart).
  const o = await api('GET', `/projects/${enc(pid)}/overview`).catch(() => ({}));
  const env = (o.environments || []).find((e) => e.name === envName) || {};
  const channelName = (id) => {
    if (id === 'console') return 'test chat in the console';
    const c = (env.channels || []).find((x) => x.id === id);
    return c ? `channel ${c.name} (${c.type})` : `channel ${id}`;
  };
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
      let q = `/projects/${enc(pid)}/transcripts?environment=${enc(envName)}&limit=1000`;
      if (hours.value === 'around') q += `&after=${around - 1800_000}&end=${around + 1800_000}`;
      else q += `&after=${hours.value ? Date.now() - Number(hours.value) * 3600_000 : -1}`;
      if (user.value.trim()) q += `&user=${enc(user.value.trim())}`;
      const page = await api('GET', q);
      // One conversation per channel and user.
      const byUser = new Map();
      for (const l of page.data) {
        const k = `${l.channelId}\u0000${l.userId}`;
        if (!byUser.has(k)) byUser.set(k, []);
        byUser.get(k).push(l);
      }
      if (!byUser.size) { out.replaceChildren(el('p', { class: 'muted' }, 'No messages in this range.')); return; }
      out.replaceChildren(...[...byUser].map(([k, lines]) => [k.split('\u0000'), lines]).map(([[ch, u], lines]) => el('section', { class: 'card conversation', 'data-channel': ch },
        el('h2', {}, `${u} · ${lines.length} messages`),
        el('p', { class: 'muted channel' }, channelName(ch)),
        el('div', { class: 'chat', tabindex: 0, role: 'log', 'aria-label': `Conversation with ${u}` }, lines.map((l) => el('div', { class: `bubble ${l.direction === 'in' ? 'user' : 'bot'}`,
          title: time(l.timestamp) + (l.stepUs != null ? ` · step ${duration(l.stepUs)}` : '') },
          messageText(l.message),
          l.direction === 'out' && l.intent ? el('div', { class: 'meta' }, `${l.flow || '-'} / ${l.intent}`) : null))))));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  show(el('h1', {}, `Transcripts · ${envName}`),
    el('p', {}, backTo(pid)),
    el('form', { class: 'card filters', onsubmit: (ev) => { ev.preventDefault(); load(); } },
      el('label', { for: 'user' }, 'User'), user, el('label', { for: 'since' }, 'Time'), hours,
      el('p', {}, el('button', { class: 'primary', type: 'submit', id: 'filter' }, 'Show'))),
    out);
  await load();
}
