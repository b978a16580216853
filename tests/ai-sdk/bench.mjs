// The agent API's benchmark: on the pizza bot, time to first chunk (p50/p99; the
// `start` chunk, and the first reply chunk) and runs per second with 16 and 64 concurrent
// conversations; then the server's memory per idle open stream with 2,000 streams open on
// one run held in flight by an api call that never answers.
//
//   BOTBOX_BIN=target/release/botbox node tests/ai-sdk/bench.mjs
//   (BENCH_SECONDS per concurrency level, default 10; BENCH_STREAMS, default 2000)
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import http from 'node:http';
import { startServer, api, here, password } from './lib.mjs';

const seconds = Number(process.env.BENCH_SECONDS || 10);
const streams = Number(process.env.BENCH_STREAMS || 2000);
const agentOpts = { keepAlive: true, maxSockets: Infinity };
const agentHttp = new http.Agent(agentOpts);

/** One HTTP request with node:http (no client-side pooling limits); resolves on headers. */
function request(base, method, path, headers, body) {
  return new Promise((resolve, reject) => {
    const u = new URL(base + path);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, agent: agentHttp }, resolve);
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

async function deploy(base, admin, bot, env = 'production') {
  const project = await api(base, 'POST', '/projects', admin, { name: `bench-${Math.random().toString(16).slice(2, 8)}` });
  const rev = await api(base, 'POST', `/projects/${project.id}/bot/revisions`, admin, bot);
  await api(base, 'POST', `/projects/${project.id}/deployment/versions`, admin, { version: '1.0.0', botRevision: rev.revision });
  const e = await api(base, 'POST', `/projects/${project.id}/environments`, admin, { depId: project.id, depVersion: '1.0.0', name: env });
  return (await api(base, 'POST', `/projects/${project.id}/environments/${e.id}/keys`, admin, {})).key;
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function rssKb(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return Number(m[1]);
}

/** One run: POST with Accept: text/event-stream, read to [DONE]. */
async function run(base, key, chatId, n) {
  const body = JSON.stringify({ id: chatId, messages: [{ id: `${chatId}-${n}`, role: 'user', parts: [{ type: 'text', text: 'I want pizza' }] }] });
  const t0 = performance.now();
  const res = await request(base, 'POST', '/v1/chat', {
    authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': Buffer.byteLength(body),
  }, body);
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  let first, firstReply, buf = '';
  for await (const d of res) {
    const now = performance.now();
    first ??= now - t0;
    buf += d;
    if (firstReply === undefined && (buf.includes('"text-start"') || buf.includes('"data-bot-message"'))) firstReply = now - t0;
  }
  if (!buf.includes('data: [DONE]')) throw new Error('no [DONE]');
  return { first, firstReply };
}

const server = await startServer(['--agent-chat-limit', '100000000', '--agent-read-limit', '100000000', '--allow-private-egress']);
try {
  const admin = (await api(server.base, 'POST', '/login', null, { username: 'admin', password })).id;
  const pizza = JSON.parse(readFileSync(join(here, 'pizza.json'), 'utf8'));
  const key = await deploy(server.base, admin, pizza);
  await run(server.base, key, 'warm-up', 0);
  console.log('| concurrent conversations | runs | runs/s | first chunk p50 / p99 (ms) | first reply chunk p50 / p99 (ms) |');
  console.log('|---|---|---|---|---|');
  for (const conc of [16, 64]) {
    const firsts = [], replies = [];
    const end = performance.now() + seconds * 1000;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: conc }, async (_, i) => {
      let n = 0;
      while (performance.now() < end) {
        const r = await run(server.base, key, `c${conc}-${i}`, n++);
        firsts.push(r.first);
        replies.push(r.firstReply);
      }
    }));
    const el = (performance.now() - t0) / 1000;
    const f = (x) => x.toFixed(1);
    console.log(`| ${conc} | ${firsts.length} | ${f(firsts.length / el)} | ${f(pct(firsts, 50))} / ${f(pct(firsts, 99))} | ${f(pct(replies, 50))} / ${f(pct(replies, 99))} |`);
  }

  // Idle streams: a run held by an api call that never answers, then `streams` readers.
  const hang = http.createServer(() => {});
  await new Promise((r) => hang.listen(0, '127.0.0.1', r));
  const apiBot = JSON.parse(readFileSync(join(here, 'api-status.json'), 'utf8'));
  apiBot.config.base = `http://127.0.0.1:${hang.address().port}`;
  const key2 = await deploy(server.base, admin, apiBot, 'hang');
  const started = await api(server.base, 'POST', '/v1/chat', key2, { messages: [{ id: 'h1', role: 'user', parts: [{ type: 'text', text: 'check x' }] }] });
  const before = rssKb(server.pid);
  const open = [];
  for (let i = 0; i < streams; i += 100) {
    const batch = await Promise.all(Array.from({ length: Math.min(100, streams - i) }, () =>
      request(server.base, 'GET', `/v1/chat/${started.runId}/stream`, { authorization: `Bearer ${key2}` })));
    for (const res of batch) {
      if (res.statusCode !== 200) throw new Error(`stream status ${res.statusCode}`);
      res.on('data', () => {});
      open.push(res);
    }
  }
  await new Promise((r) => setTimeout(r, 1000));
  const after = rssKb(server.pid);
  console.log(`\n${open.length} idle open streams: server RSS ${(before / 1024).toFixed(1)} MB → ${(after / 1024).toFixed(1)} MB, ` +
    `${((after - before) / open.length).toFixed(1)} KB per stream`);
  await api(server.base, 'POST', `/v1/chat/${started.runId}/cancel`, key2, {});
  hang.close();
} finally {
  server.stop();
}
process.exit(0);
