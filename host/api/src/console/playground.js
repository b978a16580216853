// The agent playground: a chat over /v1/chat with an agent key pasted into the page (the AI
// SDK's stream read by hand: text parts, the bot's messages with their buttons, errors).
// What the bot sends is put in the page as text.
let conversationId = null;
const log = document.getElementById('log');
/** A bubble in the conversation (`user`, `bot` or `error`), kept in view. */
function line(cls, text) {
  const d = document.createElement('div');
  d.className = cls === 'error' ? 'bubble bot step-errors' : `bubble ${cls}`;
  d.textContent = text;
  log.appendChild(d);
  log.scrollTop = log.scrollHeight;
  return d;
}
function buttonsOf(msg) {
  const p = msg.payload || {};
  const out = [];
  const items = Array.isArray(p.items) ? p.items : (p.items ? [p.items] : []);
  for (const b of (p.buttons || p.actions || [])) out.push(b);
  for (const it of items) for (const b of (it.buttons || it.actions || [])) if (b.type !== 'url') out.push(b);
  for (const q of (p.quickReplies || p.quick_replies || [])) out.push(q);
  return out;
}
async function send(parts) {
  const key = document.getElementById('key').value.trim();
  const body = { messages: [{ id: 'm' + Date.now() + Math.random().toString(16).slice(2), role: 'user', parts }] };
  if (conversationId) body.conversationId = conversationId;
  const res = await fetch('/v1/chat', { method: 'POST', headers: { 'Authorization': 'Bearer ' + key, 'Content-Type': 'application/json', 'Accept': 'text/event-stream' }, body: JSON.stringify(body) });
  if (!res.ok) { line('error', 'error: ' + await res.text()); return; }
  conversationId = res.headers.get('X-Conversation-Id') || conversationId;
  const reader = res.body.getReader(); const dec = new TextDecoder(); let buf = ''; const texts = {};
  for (;;) {
    const { value, done } = await reader.read(); if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      const data = ev.split('\n').filter(l => l.startsWith('data: ')).map(l => l.slice(6)).join('\n');
      if (!data || data === '[DONE]') continue;
      const c = JSON.parse(data);
      if (c.type === 'text-start') texts[c.id] = line('bot', '');
      else if (c.type === 'text-delta') texts[c.id].textContent += c.delta;
      else if (c.type === 'data-bot-message') {
        const m = c.data; const d = line('bot', m.content || (m.payload && (m.payload.text || m.payload.title || (m.payload.items && (m.payload.items.text || m.payload.items.title)))) || '[' + ((m.payload && m.payload.template_type) || m.type) + ']');
        for (const b of buttonsOf(m)) {
          const btn = document.createElement('button'); btn.className = 'reply'; btn.textContent = b.label || b.title || b.text || 'button';
          btn.onclick = () => { line('user', btn.textContent); const payload = b.payload !== undefined ? b.payload : b; send([{ type: 'text', text: btn.textContent }, { type: 'data-postback', data: payload }]); };
          d.appendChild(btn);
        }
      } else if (c.type === 'error') line('error', 'error: ' + c.errorText);
    }
  }
}
document.getElementById('f').onsubmit = (e) => { e.preventDefault(); const t = document.getElementById('text'); if (!t.value) return; line('user', t.value); send([{ type: 'text', text: t.value }]); t.value = ''; };
