// `spindle bench serve` against fake servers started here: an OpenAI-compatible one (SSE) and an
// Ollama-compatible one (NDJSON), each with controlled delays, tokens per chunk and failures. The bounds on
// TTFT / ITL / TPOT are generous: they check the metric arithmetic against the fakes' delays, not timing.
import t from 'tap';
import http from 'node:http';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseBenchServeArgs, type BenchServeConfig } from '../lib/bench/serve/args.js';
import { runBenchServe, type Io } from '../lib/bench/serve/command.js';
import { runCli } from '../lib/cli/dispatch.js';

interface FakeOptions {
  ttftMs: number; // delay before the first content chunk
  itlMs: number; // delay between content chunks
  tokensPerChunk: number;
  failEvery?: number; // every Nth request (1-based) answers 500
  streamErrorEvery?: number; // every Nth request sends an error message mid-stream
  apiKey?: string; // require Authorization: Bearer <key>
  templateTokens?: number; // prompt tokens added on top of the words (chat template)
}

interface Fake {
  url: string;
  inFlight: number;
  maxInFlight: number;
  requests: { path: string; body: Record<string, unknown>; auth: string | undefined; at: number }[];
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// prompt tokens as the fake counts them: a word each, or the ids of a token-id prompt
const words = (s: string | number[]) => (Array.isArray(s) ? s.length : s.split(' ').filter(Boolean).length);

/** Starts a fake server; `stream` writes one request's answer, `routes` answers the GET lists. */
async function startFake(opts: FakeOptions, stream: (req: Record<string, unknown>, path: string, res: http.ServerResponse, n: number) => Promise<void>,
  lists: Record<string, unknown>): Promise<Fake> {
  let count = 0;
  const fake: Fake = { url: '', inFlight: 0, maxInFlight: 0, requests: [], close: async () => {} };
  const server = http.createServer(async (req, res) => {
    const auth = req.headers.authorization;
    if (opts.apiKey && auth !== `Bearer ${opts.apiKey}`) {
      res.writeHead(401, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { message: 'bad key' } }));
      return;
    }
    if (req.method === 'GET') {
      const doc = lists[req.url ?? ''];
      res.writeHead(doc ? 200 : 404, { 'Content-Type': 'application/json' }).end(JSON.stringify(doc ?? { error: 'no' }));
      return;
    }
    let raw = '';
    for await (const c of req) raw += c;
    const body = JSON.parse(raw) as Record<string, unknown>;
    const n = ++count;
    fake.requests.push({ path: req.url ?? '', body, auth, at: performance.now() });
    fake.inFlight++;
    fake.maxInFlight = Math.max(fake.maxInFlight, fake.inFlight);
    try {
      if (opts.failEvery && n % opts.failEvery === 0) {
        await sleep(5);
        res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { message: `fake failure ${n}`, type: 'server_error' } }));
        return;
      }
      await stream(body, req.url ?? '', res, n);
    } finally {
      fake.inFlight--;
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  fake.url = `http://127.0.0.1:${port}`;
  fake.close = () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); });
  return fake;
}

/** OpenAI chat / completions SSE: role delta at once, content chunks, finish chunk, usage chunk, [DONE]. */
function openAiFake(opts: FakeOptions): Promise<Fake> {
  return startFake(opts, async (body, path, res, n) => {
    const chat = path === '/v1/chat/completions';
    const maxTokens = body.max_tokens as number;
    const prompt = chat ? (body.messages as { content: string }[])[0].content : (body.prompt as string);
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const choice = (text: string, finish: string | null) => chat
      ? { index: 0, delta: text === '' && finish === null ? { role: 'assistant', content: '' } : { content: text }, finish_reason: finish }
      : { index: 0, text, finish_reason: finish };
    if (chat) send({ choices: [choice('', null)] }); // the role-only delta, before "prefill"
    await sleep(opts.ttftMs);
    for (let done = 0; done < maxTokens; ) {
      const k = Math.min(opts.tokensPerChunk, maxTokens - done);
      if (done > 0) await sleep(opts.itlMs);
      if (opts.streamErrorEvery && n % opts.streamErrorEvery === 0 && done > 0) {
        send({ error: { message: 'fake stream error' } });
        res.end();
        return;
      }
      send({ choices: [choice(' tok'.repeat(k), null)] });
      done += k;
    }
    send({ choices: [choice('', 'length')] });
    send({ choices: [], usage: { prompt_tokens: words(prompt) + (opts.templateTokens ?? 0), completion_tokens: maxTokens } });
    res.end('data: [DONE]\n\n');
  }, { '/v1/models': { object: 'list', data: [{ id: 'fake-model', object: 'model' }, { id: 'other' }] } });
}

/** Ollama /api/generate and /api/chat NDJSON: content lines, then the done line with the counts. */
function ollamaFake(opts: FakeOptions): Promise<Fake> {
  return startFake(opts, async (body, path, res, n) => {
    const chat = path === '/api/chat';
    const numPredict = (body.options as { num_predict: number }).num_predict;
    const prompt = chat ? (body.messages as { content: string }[])[0].content : (body.prompt as string);
    res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
    const send = (obj: unknown) => res.write(JSON.stringify(obj) + '\n');
    const line = (text: string, done: boolean) => chat
      ? { model: body.model, message: { role: 'assistant', content: text }, done }
      : { model: body.model, response: text, done };
    await sleep(opts.ttftMs);
    for (let done = 0; done < numPredict; ) {
      const k = Math.min(opts.tokensPerChunk, numPredict - done);
      if (done > 0) await sleep(opts.itlMs);
      if (opts.streamErrorEvery && n % opts.streamErrorEvery === 0 && done > 0) {
        res.end(JSON.stringify({ error: 'fake ollama stream error' }) + '\n');
        return;
      }
      send(line(' tok'.repeat(k), false));
      done += k;
    }
    res.end(JSON.stringify({ ...line('', true), done_reason: 'length', prompt_eval_count: words(prompt), eval_count: numPredict }) + '\n');
  }, { '/api/tags': { models: [{ name: 'fake-ollama:latest', model: 'fake-ollama:latest' }] } });
}

function sink(): Writable & { text: string } {
  const w = new Writable({ write(chunk, _enc, cb) { (w as unknown as { text: string }).text += String(chunk); cb(); } }) as Writable & { text: string };
  w.text = '';
  return w;
}

function config(fake: Fake, flags: string[]): BenchServeConfig {
  const cfg = parseBenchServeArgs(['--base-url', fake.url, '--disable-progress', ...flags], {});
  if (!cfg) throw new Error('unexpected --help');
  return cfg;
}

const quietIo = (): Io => ({ stdout: sink(), stderr: sink() });

t.test('openai-chat: counts, TTFT skips the role delta, ITL/TPOT, concurrency cap, api key, warmup', async (t) => {
  const fake = await openAiFake({ ttftMs: 80, itlMs: 20, tokensPerChunk: 1, apiKey: 'sekret', templateTokens: 5 });
  t.teardown(fake.close);
  const { metrics: m, result, run } = await runBenchServe(config(fake, [
    '--backend', 'openai-chat', '--num-prompts', '8', '--random-input-len', '20', '--random-output-len', '6',
    '--max-concurrency', '2', '--warmup-requests', '2', '--ignore-eos', '--api-key', 'sekret', '--model', 'fake-model',
  ]), quietIo());
  t.equal(m.completed, 8);
  t.equal(m.failed, 0);
  t.equal(fake.requests.length, 10, '2 warmup + 8 measured requests reached the server');
  t.same(run.warmup, { requests: 2, failed: 0, firstError: '' });
  t.equal(fake.maxInFlight, 2, 'never more than --max-concurrency in flight');
  t.ok(fake.requests.every((r) => r.auth === 'Bearer sekret'), 'Authorization: Bearer sent on every request');
  const body = fake.requests[0].body;
  t.equal(body.model, 'fake-model');
  t.equal(body.stream, true);
  t.same(body.stream_options, { include_usage: true });
  t.equal(body.ignore_eos, true);
  t.equal(body.max_completion_tokens, 6);
  t.equal(body.max_tokens, 6);
  t.equal(m.totalOutput, 48, 'output tokens from usage.completion_tokens');
  const wordsSent = fake.requests.slice(2).reduce((a, r) => a + words((r.body.messages as { content: string }[])[0].content), 0);
  t.equal(m.totalInput, wordsSent + 8 * 5, 'input tokens from usage.prompt_tokens (words + template)');
  t.equal(wordsSent, 8 * 20, 'range ratio 0: every prompt has exactly 20 words');
  t.same(result.token_counts, { prompt: 'server', output: 'server' });
  t.ok(m.ttft.mean >= 78 && m.ttft.mean < 250, `TTFT mean ${m.ttft.mean.toFixed(1)} ms ~ 80 ms (role delta not counted)`);
  t.ok(m.itl.median >= 15 && m.itl.median < 80, `ITL median ${m.itl.median.toFixed(1)} ms ~ 20 ms`);
  t.ok(m.tpot.mean >= 15 && m.tpot.mean < 80, `TPOT mean ${m.tpot.mean.toFixed(1)} ms ~ 20 ms`);
  t.ok(run.outputs.every((o) => o.itl.length === 5), '6 one-token chunks -> 5 ITL entries each');
  t.ok(m.e2el.mean >= m.ttft.mean + 5 * 15, 'E2E covers TTFT plus 5 gaps');
  t.ok(m.maxConcurrentRequests <= 2);
  const qt = run.outputs.map((o) => o.queueTime);
  t.ok(Math.max(...qt) > 0.1, 'with concurrency 2, later requests waited in the client queue');
});

t.test('multi-turn: each conversation sends its turns in order with its whole history; TTFT by turn', async (t) => {
  const fake = await openAiFake({ ttftMs: 10, itlMs: 2, tokensPerChunk: 1 });
  t.teardown(fake.close);
  const { result, run, report } = await runBenchServe(config(fake, [
    '--backend', 'openai-chat', '--dataset-name', 'multi-turn', '--multi-turn-conversations', '3', '--multi-turn-turns', '4',
    '--multi-turn-system-len', '30', '--multi-turn-user-len', '5', '--random-output-len', '3', '--ignore-eos',
    '--max-concurrency', '2',
  ]), quietIo());
  t.equal(run.outputs.length, 12);
  t.ok(run.outputs.every((o) => o.success));
  t.same(run.turns, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
  t.ok(fake.maxInFlight <= 2, 'at most --max-concurrency in flight');
  type Msg = { role: string; content: string };
  const bodies = fake.requests.map((r) => r.body.messages as Msg[]);
  t.ok(bodies.every((m) => m[0].role === 'system' && words(m[0].content) === 30), 'every request starts with the shared system prompt');
  t.equal(new Set(bodies.map((m) => m[0].content)).size, 1);
  t.same(bodies.map((m) => m.length).sort((a, b) => a - b), [2, 2, 2, 4, 4, 4, 6, 6, 6, 8, 8, 8]);
  for (const m of bodies) {  // the earlier turns: user message, then that turn's answer (3 tokens), in order
    for (let k = 0; 2 + 2 * k < m.length; k++) {
      t.equal(m[1 + 2 * k].role, 'user');
      t.equal(m[2 + 2 * k].role, 'assistant');
      t.equal(m[2 + 2 * k].content, ' tok'.repeat(3));
    }
    t.equal(m[m.length - 1].role, 'user');
  }
  // a turn is sent only after the previous one's answer: requests of one conversation arrive in turn order
  const byConversation = new Map<string, number[]>();
  for (const r of fake.requests) {
    const m = r.body.messages as Msg[];
    byConversation.set(m[1].content, [...(byConversation.get(m[1].content) ?? []), m.length]);
  }
  t.equal(byConversation.size, 3);
  for (const lens of byConversation.values()) t.same(lens, [2, 4, 6, 8]);
  t.equal(result.dataset_name, 'multi-turn');
  t.equal((result.mean_ttft_ms_by_turn as number[]).length, 4);
  t.type(result.mean_ttft_ms_later_turns, 'number');
  t.match(report, /Mean TTFT of turns 2\+ \(ms\):/);
});

t.test('openai completions: multi-token chunks are one ITL gap each; TPOT is per token', async (t) => {
  const fake = await openAiFake({ ttftMs: 40, itlMs: 30, tokensPerChunk: 2 });
  t.teardown(fake.close);
  const { metrics: m, run } = await runBenchServe(config(fake, [
    '--backend', 'openai', '--num-prompts', '4', '--random-input-len', '10', '--random-output-len', '8', '--ignore-eos',
  ]), quietIo());
  t.equal(m.completed, 4);
  t.equal(fake.requests[0].path, '/v1/completions');
  t.equal(typeof fake.requests[0].body.prompt, 'string');
  t.equal(fake.requests[0].body.model, 'fake-model', 'model defaulted to the first id of /v1/models');
  t.ok(run.outputs.every((o) => o.itl.length === 3 && o.outputTokens === 8), '8 tokens in 4 chunks: 3 gaps, 8 tokens');
  t.ok(m.itl.mean >= 25 && m.itl.mean < 120, `ITL mean ${m.itl.mean.toFixed(1)} ms ~ 30 ms per chunk`);
  // TPOT = (e2e - ttft) / 7 ~ 3 * 30 / 7 ~ 12.9 ms: per token, smaller than the per-chunk ITL
  const tpots = run.outputs.map((o) => ((o.latency - o.ttft) / 7) * 1000);
  t.ok(Math.abs(m.tpot.mean - tpots.reduce((a, b) => a + b, 0) / 4) < 1e-9, 'TPOT = (e2e - ttft) / (output_tokens - 1)');
  t.ok(m.tpot.mean > m.itl.mean * (3 / 7) * 0.8 && m.tpot.mean < m.itl.mean * (3 / 7) * 1.25 + 5,
    `TPOT ${m.tpot.mean.toFixed(1)} ~ 3/7 of ITL ${m.itl.mean.toFixed(1)}`);
  t.equal(fake.maxInFlight, 4, 'rate inf, no cap: all 4 in flight at once');
  const arrivals = fake.requests.map((r) => r.at);
  t.ok(Math.max(...arrivals) - Math.min(...arrivals) < 100, 'rate inf releases every request at once');
});

t.test('openai completions with --random-token-ids: prompts sent as token id arrays of the asked lengths', async (t) => {
  const fake = await openAiFake({ ttftMs: 5, itlMs: 5, tokensPerChunk: 1 });
  t.teardown(fake.close);
  const { metrics: m } = await runBenchServe(config(fake, [
    '--backend', 'openai', '--num-prompts', '3', '--random-input-len', '12', '--random-output-len', '2', '--random-token-ids', '500',
  ]), quietIo());
  t.equal(m.completed, 3);
  for (const r of fake.requests.filter((q) => q.path === '/v1/completions')) {
    const p = r.body.prompt as unknown;
    t.ok(Array.isArray(p) && p.length === 12 && p.every((x) => Number.isInteger(x) && x >= 0 && x < 500), '12 ids in [0, 500)');
  }
});

t.test('failures: HTTP 500 and mid-stream errors are counted with their messages', async (t) => {
  const fake = await openAiFake({ ttftMs: 10, itlMs: 5, tokensPerChunk: 1, failEvery: 3, streamErrorEvery: 4 });
  t.teardown(fake.close);
  const { metrics: m, result } = await runBenchServe(config(fake, [
    '--backend', 'openai-chat', '--num-prompts', '12', '--random-input-len', '8', '--random-output-len', '4', '--max-concurrency', '1',
  ]), quietIo());
  // concurrency 1 keeps server order = request order: 3, 6, 9, 12 -> 500; 4, 8 -> stream error
  t.equal(m.failed, 6);
  t.equal(m.completed, 6);
  t.equal(m.totalOutput, 6 * 4, 'failed requests add no output tokens');
  t.match(m.firstErrors[0], /^HTTP 500 .*fake failure 3/);
  t.ok(m.firstErrors.some((e) => /fake stream error/.test(e)), 'mid-stream error message kept');
  const errors = result.errors as string[];
  t.equal(errors.filter((e) => e !== '').length, 6);
  t.equal((result.output_lens as number[]).filter((x) => x === 0).length, 6);
});

t.test('request rate: Poisson arrivals spread over n / rate seconds', async (t) => {
  const fake = await openAiFake({ ttftMs: 5, itlMs: 2, tokensPerChunk: 2 });
  t.teardown(fake.close);
  const { run } = await runBenchServe(config(fake, [
    '--backend', 'openai', '--num-prompts', '10', '--random-input-len', '5', '--random-output-len', '4',
    '--request-rate', '20', '--seed', '7',
  ]), quietIo());
  // vLLM rescales the arrivals so the last one is at n / rate = 0.5 s
  t.ok(run.duration >= 0.49 && run.duration < 2, `duration ${run.duration.toFixed(3)} s >= 0.5 s`);
  const starts = run.outputs.map((o) => o.startTime - run.startTime);
  t.ok(Math.max(...starts) >= 0.48 && Math.max(...starts) < 1, 'last request sent at ~0.5 s');
  t.ok(fake.maxInFlight < 10, 'rate-limited requests do not all overlap');
});

t.test('ollama /api/generate: NDJSON, counts from eval_count / prompt_eval_count, model from /api/tags, errors', async (t) => {
  const fake = await ollamaFake({ ttftMs: 60, itlMs: 15, tokensPerChunk: 1, streamErrorEvery: 5 });
  t.teardown(fake.close);
  const { metrics: m, result, run } = await runBenchServe(config(fake, [
    '--backend', 'ollama', '--num-prompts', '10', '--random-input-len', '12', '--random-output-len', '5',
    '--max-concurrency', '3', '--ignore-eos', '--temperature', '0',
  ]), quietIo());
  t.equal(fake.requests[0].path, '/api/generate');
  t.same(fake.requests[0].body.options, { num_predict: 5, temperature: 0, ignore_eos: true });
  t.equal(fake.requests[0].body.model, 'fake-ollama:latest');
  t.equal(result.model_id, 'fake-ollama:latest');
  t.equal(m.completed, 8);
  t.equal(m.failed, 2, 'requests 5 and 10 broke mid-stream');
  t.match(m.firstErrors[0], /fake ollama stream error/);
  t.equal(m.totalOutput, 8 * 5);
  t.equal(m.totalInput, 8 * 12);
  t.same(result.token_counts, { prompt: 'server', output: 'server' });
  t.ok(fake.maxInFlight <= 3);
  t.ok(m.ttft.mean >= 58 && m.ttft.mean < 200, `TTFT ${m.ttft.mean.toFixed(1)} ms ~ 60`);
  t.ok(m.itl.median >= 12 && m.itl.median < 70, `ITL ${m.itl.median.toFixed(1)} ms ~ 15`);
  t.ok(m.tpot.mean >= 12 && m.tpot.mean < 70, `TPOT ${m.tpot.mean.toFixed(1)} ms ~ 15`);
  t.ok(run.outputs.filter((o) => o.success).every((o) => o.itl.length === 4));
});

t.test('ollama /api/chat via --endpoint', async (t) => {
  const fake = await ollamaFake({ ttftMs: 10, itlMs: 5, tokensPerChunk: 1 });
  t.teardown(fake.close);
  const { metrics: m } = await runBenchServe(config(fake, [
    '--backend', 'ollama', '--endpoint', '/api/chat', '--num-prompts', '3', '--random-input-len', '6', '--random-output-len', '3',
  ]), quietIo());
  t.equal(m.completed, 3);
  t.equal(fake.requests[0].path, '/api/chat');
  t.same((fake.requests[0].body.messages as { role: string }[]).map((x) => x.role), ['user']);
  t.equal(m.totalInput, 18);
});

t.test('CLI: spindle bench serve writes the table and the result JSON', async (t) => {
  const fake = await openAiFake({ ttftMs: 10, itlMs: 5, tokensPerChunk: 1, failEvery: 4 });
  t.teardown(fake.close);
  const dir = mkdtempSync(join(tmpdir(), 'bench-serve-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'sub', 'result.json');
  const io = { stdout: sink(), stderr: sink() };
  const code = await runCli(['bench', 'serve', '--base-url', fake.url, '--backend', 'openai-chat', '--num-prompts', '4',
    '--random-input-len', '16', '--random-output-len', '3', '--random-range-ratio', '0.5', '--metric-percentiles', '90,99',
    '--output-json', out, '--save-result', '--result-dir', dir, '--max-concurrency', '2'], io);
  t.equal(code, 0, io.stderr.text);
  t.match(io.stdout.text, /=+ Serving Benchmark Result =+/);
  t.match(io.stdout.text, /Successful requests:\s+3\n/);
  t.match(io.stdout.text, /Failed requests:\s+1\n/);
  t.match(io.stdout.text, /P90 TTFT \(ms\):/);
  t.match(io.stdout.text, /Error 0: HTTP 500/);
  t.match(io.stdout.text, /Input token counts from:\s+server usage/);
  const r = JSON.parse(readFileSync(out, 'utf8')) as Record<string, unknown>;
  for (const k of ['duration', 'completed', 'failed', 'total_input_tokens', 'total_output_tokens', 'request_throughput',
    'output_throughput', 'total_token_throughput', 'max_concurrent_requests']) t.type(r[k], 'number', k);
  for (const metric of ['ttft', 'tpot', 'itl', 'e2el']) {
    for (const s of ['mean', 'median', 'std', 'p90', 'p99']) t.type(r[`${s}_${metric}_ms`], 'number', `${s}_${metric}_ms`);
  }
  t.equal(r.completed, 3);
  t.equal(r.request_rate, 'inf');
  t.equal(r.max_concurrency, 2);
  t.equal(r.model_id, 'fake-model');
  for (const k of ['input_lens', 'output_lens', 'ttfts', 'itls', 'latencies', 'start_times', 'queue_times', 'errors', 'generated_texts']) {
    t.equal((r[k] as unknown[]).length, 4, `${k} has one entry per request`);
  }
  const lens = (r.input_lens as number[]);
  t.ok(lens.every((x) => x >= 8 && x <= 24), 'range ratio 0.5 of 16: lengths in [8, 24]');
  t.ok((r.request_throughput as number) > 0);
  const saved = readdirSync(dir).filter((f) => f.endsWith('.json'));
  t.equal(saved.length, 1);
  t.match(saved[0], /^openai-chat-infqps-concurrency2-fake-model-\d{8}-\d{6}\.json$/);
});

t.test('CLI: an unreachable server or a wrong key is exit 1 with a message', async (t) => {
  const fake = await openAiFake({ ttftMs: 1, itlMs: 1, tokensPerChunk: 1, apiKey: 'right' });
  t.teardown(fake.close);
  const io = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['bench', 'serve', '--base-url', fake.url, '--num-prompts', '1', '--api-key', 'wrong'], io), 1);
  t.match(io.stderr.text, /model list could not be read .*401.*bad key/);
  const io2 = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['bench', 'serve', '--base-url', fake.url, '--num-prompts', '2', '--model', 'm', '--warmup-requests', '1',
    '--api-key', 'wrong'], io2), 1);
  t.match(io2.stderr.text, /all 1 warmup requests failed; first error: HTTP 401/);
});
