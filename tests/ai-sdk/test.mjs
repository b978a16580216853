// A real client against a real server: the published AI SDK, ai 5.0.0 and the
// latest 6.x, drives botbox's /v1 agent API. Starts `botbox serve` (BOTBOX_BIN, default
// ../../target/debug/botbox) on a fresh data folder, deploys the buttons example
// (bot.json, converted from examples/buttons/bot.yml), creates an agent key, then:
//  - DefaultChatTransport.sendMessages with Accept: text/event-stream (each line), the
//    stream read with readUIMessageStream({terminateOnError: true}), the final assistant
//    message compared with what the bot said;
//  - the same run replayed over GET /v1/chat/{runId}/stream (reconnectToStream);
//  - reconnect by chat id when idle: 204 → null.
// Any chunk outside a line's schema fails the read.
import assert from 'node:assert/strict';
import * as ai5 from 'ai5';
import * as ai6 from 'ai6';
import { agent } from './lib.mjs';

/** Reads a chunk stream into the final assistant message (any schema error rejects). */
async function finalMessage(lib, stream) {
  let last;
  const errors = [];
  for await (const m of lib.readUIMessageStream({ stream, terminateOnError: true, onError: (e) => errors.push(e) })) {
    last = m;
  }
  assert.deepEqual(errors, []);
  return last;
}

function textOf(message) {
  return message.parts.filter((p) => p.type === 'text').map((p) => p.text);
}

/** Reads a chunk stream to its end, collecting the chunks (a schema error rejects). */
async function collect(stream) {
  const out = [];
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return out;
    out.push(value);
  }
}

const { base, key, stop } = await agent();
let failed = false;
try {

  for (const [name, lib] of [['ai@5.0.0', ai5], ['ai@6', ai6]]) {
    const chatId = `chat-${name}`;
    const transport = new lib.DefaultChatTransport({
      api: `${base}/v1/chat`,
      headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' },
    });
    // Turn 1: "menu" → the button template as a data-bot-message part.
    const s1 = await transport.sendMessages({
      chatId,
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'menu' }] }],
      trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
    });
    const m1 = await finalMessage(lib, s1);
    const rich = m1.parts.filter((p) => p.type === 'data-bot-message');
    assert.equal(rich.length, 1, `${name}: ${JSON.stringify(m1)}`);
    assert.equal(rich[0].data.payload.template_type, 'button');
    const runId = m1.metadata.runId;
    assert.match(runId, /^run_/);
    assert.equal(m1.metadata.status, 'completed');
    // Turn 2: a click on "Tea" as a data part, with the whole history as useChat sends it.
    const s2 = await transport.sendMessages({
      chatId,
      messages: [
        { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'menu' }] },
        m1,
        { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'Tea' }, { type: 'data-postback', data: { choice: 'tea' } }] },
      ],
      trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
    });
    const m2 = await finalMessage(lib, s2);
    assert.deepEqual(textOf(m2), ['You picked tea.'], name);
    assert.equal(m2.metadata.conversationId, m1.metadata.conversationId);

    // The first run replayed over GET /v1/chat/{runId}/stream gives the same message.
    const replayer = new lib.DefaultChatTransport({
      api: `${base}/v1/chat`,
      headers: { Authorization: `Bearer ${key}` },
      prepareReconnectToStreamRequest: () => ({ api: `${base}/v1/chat/${runId}/stream`, headers: { Authorization: `Bearer ${key}` } }),
    });
    const replay = await replayer.reconnectToStream({ chatId });
    assert.ok(replay, `${name}: a finished run still replays`);
    const m1again = await finalMessage(lib, replay);
    assert.deepEqual(m1again.parts, m1.parts, name);
    // Raw chunks too (the transport validates each against the line's schema).
    const again = await replayer.reconnectToStream({ chatId });
    const chunks = await collect(again);
    assert.equal(chunks[0].type, 'start');
    assert.equal(chunks.at(-1).type, 'finish');

    // Idle conversation: the default reconnect URL answers 204 → null.
    const idle = new lib.DefaultChatTransport({ api: `${base}/v1/chat`, headers: { Authorization: `Bearer ${key}` } });
    assert.equal(await idle.reconnectToStream({ chatId }), null, name);
    console.log(`ok ${name}: send, data part, replay, 204 when idle`);
  }
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  stop();
}
process.exit(failed ? 1 : 0);
