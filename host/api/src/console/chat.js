// The chat tester: talk to an environment's bot (recorded in its transcripts as channel
// `console`, with who chatted) or to the latest revision; replies drawn as a channel shows
// them, the last step's flow, state, intent, context, calls and errors beside them.
import { api, backTo, can, el, enc, refusal, plural, projectAccess, readOnlyNote, safeUrl, show } from './lib.js';

export async function chat(pid, envName) {
  // A test step runs the bot's api calls: it needs the right to change the project.
  const access = await projectAccess(pid).catch(() => null);
  if (!can(access, 'edit')) {
    show(el('h1', {}, `Chat · ${envName || 'latest revision'}`), readOnlyNote(access),
      el('p', {}, backTo(pid)),
      el('p', { class: 'card' }, 'A test conversation runs the bot as its developers do; your role does not. ',
        envName ? el('a', { href: `#/p/${enc(pid)}/transcripts/${enc(envName)}` }, `Read ${envName}'s conversations`) : null));
    return;
  }
  let session = null;
  const log = el('div', { class: 'chat', id: 'chat', 'aria-live': 'polite', tabindex: 0, role: 'log', 'aria-label': 'Conversation' });
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
      // Each error apart, marked as one (the other fields are values, not problems).
      ['Errors', (res.errors || []).length
        ? el('ul', { class: 'step-error-list' }, res.errors.map((e) => el('li', { class: 'error' }, e))) : 'none']];
    debug.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k.toLowerCase() }, v)]));
  };
  async function send(message, shown) {
    bubble('user', shown || message.content || JSON.stringify(message.payload));
    // Until the step answers: a pending bubble, and the form waits.
    const pending = bubble('bot pending', el('span', { class: 'visually-hidden' }, 'The bot is answering'), '…');
    log.setAttribute('aria-busy', 'true');
    sendButton.disabled = true;
    try {
      const res = await api('POST', `/projects/${enc(pid)}/bot/converse`, { message, session, record: true, ...(envName ? { environmentName: envName } : {}) });
      pending.remove();
      session = res.session;
      for (const r of res.responses || []) render(r);
      // The step's errors beside its replies, as well as in the debug panel.
      if ((res.errors || []).length) log.append(el('div', { class: 'step-errors', role: 'note' }, `${plural(res.errors.length, 'error')} in this step: `, res.errors.join('; ')));
      log.scrollTop = log.scrollHeight;
      showDebug(res);
    } catch (e) {
      pending.remove();
      log.append(el('p', { class: 'error', role: 'alert' }, await refusal(e, 'run test conversations', pid, access)));
      log.scrollTop = log.scrollHeight;
    } finally {
      log.removeAttribute('aria-busy');
      sendButton.disabled = false;
    }
  }
  const sendButton = el('button', { class: 'primary', type: 'submit', id: 'send' }, 'Send');
  const form = el('form', { class: 'send', onsubmit: (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    send({ type: 'text', content: text });
  } }, input, sendButton,
  el('button', { type: 'button', onclick: () => { session = null; log.replaceChildren(); debug.replaceChildren(); } }, 'Clear'));
  show(el('h1', {}, `Chat · ${envName || 'latest revision'}`),
    el('p', {}, backTo(pid), envName ? ' · what you say here is recorded in the environment\'s transcripts as channel console' : ''),
    el('div', { class: 'grid' },
      el('div', { class: 'card' }, log, form),
      el('div', { class: 'card' }, el('h2', {}, 'Last step'), debug)));
  input.focus();
}
