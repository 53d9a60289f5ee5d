// Server lifecycle: graceful shutdown (503 for new requests, drain, abort the rest with finish_reason
// 'abort'), the built `spindle serve` (dist/cli) exiting 0 on SIGTERM, and admission (429 with Retry-After past the queue limit).
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { startServer } from '../lib/server/serve.js';
import { fixtureModel } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const messages = [{ role: 'user' as const, content: 'Hello there' }];
const long = { model: 'm', messages, max_tokens: 480, ignore_eos: true, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming;

async function collect(stream: AsyncIterable<OpenAI.ChatCompletionChunk>): Promise<{ text: string; finish: string | null }> {
  let text = '';
  let finish: string | null = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

t.test('shutdown: 503 for new requests, drain deadline, the rest aborted', async (t) => {
  const server = await startServer({
    engine: normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 2 }, 'serve'),
    servedModelNames: ['m'], port: 0, drainTimeoutMs: 300,
  });
  await server.app.engine.ready();
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'x', maxRetries: 0 });
  const streams = await Promise.all([1, 2, 3].map(() => client.chat.completions.create(long)));
  const results = streams.map(collect);
  await new Promise((r) => setTimeout(r, 50));
  const stopped = server.shutdown();
  const refused = await fetch(server.url + '/v1/models');
  t.equal(refused.status, 503);
  t.match(await refused.json(), { error: { code: 'server_shutting_down' } });
  t.equal((await fetch(server.url + '/health')).status, 503);
  const done = await Promise.all(results);
  t.same(done.map((d) => d.finish), ['abort', 'abort', 'abort'], 'past the drain deadline the streams end with abort');
  t.same(await stopped, { drained: false });
});

t.test('shutdown lets short requests finish', async (t) => {
  const server = await startServer({
    engine: normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 2 }, 'serve'),
    servedModelNames: ['m'], port: 0, drainTimeoutMs: 20_000,
  });
  await server.app.engine.ready();
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'x', maxRetries: 0 });
  const stream = await client.chat.completions.create({ ...long, max_tokens: 40 });
  const result = collect(stream);
  const stopped = server.shutdown();
  t.equal((await result).finish, 'length');
  t.same(await stopped, { drained: true });
});

t.test('shutdown: a background response is drained, and can still be polled and cancelled while the server drains', async (t) => {
  const server = await startServer({
    engine: normalizeEngineOptions({ model: path, maxModelLen: 4096, threads: 2 }, 'serve'),
    servedModelNames: ['m'], port: 0, drainTimeoutMs: 20_000,
  });
  await server.app.engine.ready();
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'x', maxRetries: 0 });
  const q = await client.responses.create({ model: 'm', input: 'Go on.', background: true, temperature: 0,
    max_output_tokens: 3000, ignore_eos: true } as never) as unknown as OpenAI.Responses.Response;
  const stopped = server.shutdown();
  t.equal((await fetch(server.url + '/v1/models')).status, 503, 'new work is refused');
  const polled = await client.responses.retrieve(q.id);
  t.ok(polled.status === 'queued' || polled.status === 'in_progress', `polled while draining: ${polled.status}`);
  const c = await client.responses.cancel(q.id);
  t.equal(c.status, 'cancelled', 'cancelled while draining');
  t.same(await stopped, { drained: true }, 'the drain ended with it');
});

t.test('admission: past max-num-seqs + max-queued-requests, 429 with Retry-After (typed client error)', async (t) => {
  const server = await startServer({
    engine: normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 2, maxNumSeqs: 1 }, 'serve'),
    servedModelNames: ['m'], port: 0, maxQueuedRequests: 1, drainTimeoutMs: 0,
  });
  t.teardown(() => server.shutdown());
  await server.app.engine.ready();
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'x', maxRetries: 0 });
  const busy = await Promise.all([1, 2].map(() => client.chat.completions.create(long)));
  const err = await client.chat.completions.create({ model: 'm', messages, max_tokens: 2 }).then(() => null, (e: unknown) => e);
  t.ok(err instanceof OpenAI.RateLimitError, 'a RateLimitError');
  const e429 = err as InstanceType<typeof OpenAI.RateLimitError>;
  t.equal(e429.status, 429);
  t.equal(e429.headers?.get('retry-after'), '1');
  for (const s of busy) s.controller.abort();
  for (let i = 0; i < 200 && server.app.engine.inflight > 0; i++) await new Promise((r) => setTimeout(r, 10));
  const ok = await client.chat.completions.create({ model: 'm', messages, max_tokens: 2 });
  t.equal(ok.choices.length, 1, 'accepted again once the queue drained');
});

t.test('`spindle serve` (the built CLI) exits 0 on SIGTERM with a stream in flight and --drain-timeout 0', async (t) => {
  const child = spawn(process.execPath, [join(root, 'dist/cli/main.js'), 'serve', path,
    '--port', '0', '--max-model-len', '512', '--threads', '2', '--served-model-name', 'm', '--drain-timeout', '0'],
  { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
  let stdout = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
      const m = /listening on (http:\/\/\S+) /.exec(stdout);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
  const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'x', maxRetries: 0 });
  const result = collect(await client.chat.completions.create(long));
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  t.equal(code, 0, stderr);
  t.equal((await result).finish, 'abort');
  t.match(stderr, /SIGTERM: not taking new requests/);
});
