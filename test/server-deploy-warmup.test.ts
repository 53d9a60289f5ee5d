// Warm-up, readiness and JSON logs (issue 21). In-process: with `warmup`, /health stays 503 after the load until
// the warm-up has finished, and a failed warm-up is a failed load. Through the CLI: --log-format json writes only
// JSON lines, the warm-up request's line comes before the `ready` line (with its times), every request's lines
// carry its id, and SIGTERM drains and exits 0. Then the measurement the issue asks for: on the demo model, the
// first request's time to first token divided by the second's stays within 1.5 with the warm-up (best of 3 fresh
// servers, for a 2-core CI machine's noise), and without it (--skip-server-warmup) the same ratio is above 1.5,
// which shows the measurement sees the one-time cost. Needs `npm run build:ts`.
import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';
import { startServe } from './helpers/serve-process.js';

const path = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const engine = () => normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 1 }, 'serve');

t.test('/health turns 200 only after the warm-up; a failed warm-up is a failed load', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], warmup: true });
  t.teardown(() => app.close());
  await app.engine.core.ready();
  t.equal((await app.inject({ url: '/health' })).statusCode, 503, 'loaded, no warm-up yet: 503');
  let finish!: (ms: number) => void;
  app.engine.startWarmup(() => new Promise<number>((resolve) => { finish = resolve; }));
  await new Promise((r) => setTimeout(r, 20));
  const during = await app.inject({ url: '/health' });
  t.equal(during.statusCode, 503, 'during the warm-up: 503');
  t.same(JSON.parse(during.body), { status: 'loading' });
  finish(42);
  await app.engine.settled();
  t.equal((await app.inject({ url: '/health' })).statusCode, 200, 'after it: 200');
  t.equal(app.engine.readyTimings?.warmupMs, 42);

  const failing = await buildApp({ engine: engine(), servedModelNames: ['m'], warmup: true });
  t.teardown(() => failing.close());
  failing.engine.startWarmup(() => Promise.reject(new Error('POST /v1/chat/completions answered 500: boom')));
  await failing.engine.settled();
  const health = await failing.inject({ url: '/health' });
  t.equal(health.statusCode, 503);
  t.match(JSON.parse(health.body), { status: 'failed', error: 'the warm-up generation failed: POST /v1/chat/completions answered 500: boom' });
});

t.test('spindle serve --log-format json: JSON lines, the warm-up before ready, request ids, drain on SIGTERM', async (t) => {
  const server = await startServe([path, '--max-model-len', '512', '--log-format', 'json', '--root-path', '/org/app', '--api-key', 'k']);
  t.teardown(() => server.stop());
  const r = await fetch(`${server.url}/org/app/v1/models`, { headers: { authorization: 'Key k', 'x-request-id': 'deploy-test-1' } });
  t.equal(r.status, 200);
  t.equal(r.headers.get('x-request-id'), 'deploy-test-1');
  await new Promise((res) => setTimeout(res, 100));
  const exited = once(server.child, 'exit');
  server.child.kill('SIGTERM');
  const [code] = await exited;
  t.equal(code, 0, 'SIGTERM: drained and exited 0');
  const lines = server.stdout().split('\n').filter((l) => l.length > 0);
  const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  t.ok(records.length >= 6, `${records.length} lines, every one JSON`);
  t.ok(records.every((r) => typeof r.level === 'number' && typeof r.time === 'number' && typeof r.msg === 'string'), 'level, time and msg on each');
  const ready = records.findIndex((r) => /^ready \d+ ms after start/.test(r.msg as string));
  t.ok(ready >= 0, 'a ready line');
  t.ok((records[ready].warmupMs as number) > 0 && (records[ready].loadMs as number) >= 0 && (records[ready].readyMs as number) > 0,
    `with its times: ${JSON.stringify({ readyMs: records[ready].readyMs, loadMs: records[ready].loadMs, warmupMs: records[ready].warmupMs })}`);
  const warm = records.findIndex((r) => r.reqId === 'spindle-warmup' && r.msg === 'request completed');
  t.ok(warm >= 0 && warm < ready, 'the warm-up request completed before the ready line');
  t.match(records[warm], { res: { statusCode: 200 } });
  const mine = records.filter((r) => r.reqId === 'deploy-test-1');
  t.same(mine.map((r) => r.msg), ['incoming request', 'request completed'], 'both lines of a request carry its id');
  t.match(mine[0], { req: { method: 'GET', url: /\/v1\/models$/ } });
  t.match(mine[1], { res: { statusCode: 200 }, responseTime: Number });
  const listening = records.findIndex((r) => /^listening on http:\/\/\S+ \(OpenAI-compatible API: http:\/\/\S+\/org\/app\/v1/.test(r.msg as string));
  t.ok(listening > ready, 'the listening line names the API under the root path, after the ready line');
  t.ok(records.some((r) => /SIGTERM: not taking new requests/.test(r.msg as string)), 'the drain is logged');
  t.equal(server.stderr(), '', 'nothing on stderr');
});

/** A client warmed up on its own (fetch, streaming reads, JSON) against a local fake SSE server, so that its
 * one-time costs are not measured as the server's. */
async function warmClient(): Promise<void> {
  const fake = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n');
      setTimeout(() => { res.end('data: {"choices":[{"delta":{"content":"x"},"finish_reason":null}]}\n\ndata: [DONE]\n\n'); }, 5);
    });
  });
  fake.listen(0, '127.0.0.1');
  await once(fake, 'listening');
  for (let i = 0; i < 3; i++) await ttft(`http://127.0.0.1:${(fake.address() as AddressInfo).port}`, 'warm');
  fake.close();
}

/** Time (ms) from sending a streamed chat request (a ~300-token prompt of `word`s) to its first token's chunk. */
async function ttft(url: string, word: string): Promise<number> {
  const content = Array.from({ length: 150 }, (_, i) => `${word}${i % 7}`).join(' ');
  const start = performance.now();
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], max_tokens: 2, temperature: 0, stream: true }),
  });
  let first: number | null = null;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of r.body!) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    const frames = buffer.split('\n\n');
    buffer = frames.pop()!;
    for (const f of frames) {
      if (!f.startsWith('data: {') || first !== null) continue;
      const choice = (JSON.parse(f.slice(6)) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> }).choices[0];
      if (choice.delta.content || choice.finish_reason) first = performance.now() - start; // not the role chunk
    }
  }
  if (first === null) throw new Error('no token came');
  return first;
}

/** first / second time to first token on a fresh `spindle serve` (demo model) started with `flags`. */
async function firstToSecond(flags: string[]): Promise<{ first: number; second: number; ratio: number }> {
  const server = await startServe(flags);
  try {
    const first = await ttft(server.url, 'apple');
    const second = await ttft(server.url, 'river');
    return { first, second, ratio: first / second };
  } finally {
    await server.stop();
  }
}

t.test('the first request\'s time to first token is within 1.5x of the second\'s (demo model)', async (t) => {
  await warmClient();
  const tries: Array<{ first: number; second: number; ratio: number }> = [];
  for (let i = 0; i < 3 && !tries.some((x) => x.ratio <= 1.5); i++) tries.push(await firstToSecond([]));
  const shown = tries.map((x) => `${x.first.toFixed(0)} / ${x.second.toFixed(0)} ms = ${x.ratio.toFixed(2)}`).join('; ');
  t.ok(tries.some((x) => x.ratio <= 1.5), `with the warm-up: ${shown}`);
  // up to 3 tries here too: one slow second request on a busy machine must not hide the cold start
  const colds: Array<{ first: number; second: number; ratio: number }> = [];
  for (let i = 0; i < 3 && !colds.some((x) => x.ratio > 1.5); i++) colds.push(await firstToSecond(['--skip-server-warmup']));
  const coldShown = colds.map((x) => `${x.first.toFixed(0)} / ${x.second.toFixed(0)} ms = ${x.ratio.toFixed(2)}`).join('; ');
  t.ok(colds.some((x) => x.ratio > 1.5), `without it: ${coldShown} (the one-time cost the warm-up pays)`);
});
