// GET /metrics: Prometheus text that parses line by line, vLLM's metric names under `spindle:`, and counters,
// gauges and histograms that move with requests (tokens, time to first token, inter-token latency, end to
// end latency, finish reasons, 429 rejections). Each app has its own registry.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const engine = normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 2, maxNumSeqs: 1 }, 'serve');
const app = await buildApp({ engine, servedModelNames: ['m'], maxQueuedRequests: 0, apiKeys: ['k'] });
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'k', maxRetries: 0 });

interface Sample { name: string; labels: Record<string, string>; value: number }

/** Parses the Prometheus text exposition format strictly: every line is a comment, blank, or a sample. */
function parseProm(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ')) continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      types.set(type[1], type[2]);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+-]+|NaN|\+Inf|-Inf)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    const rest = (m[2] ?? '').replace(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g, (_all, k: string, v: string) => {
      labels[k] = v;
      return '';
    });
    if (rest !== '') throw new Error(`bad labels in ${JSON.stringify(line)}`);
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { types, samples };
}

async function scrape(): Promise<{ types: Map<string, string>; value: (name: string, labels?: Record<string, string>) => number }> {
  const res = await fetch(base + '/metrics', { headers: { authorization: 'Bearer k' } });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  if (!/^text\/plain; version=0\.0\.4/.test(res.headers.get('content-type') ?? '')) throw new Error('wrong content type');
  const { types, samples } = parseProm(await res.text());
  const value = (name: string, labels: Record<string, string> = {}): number => {
    const hits = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    if (hits.length === 0) throw new Error(`no sample ${name} ${JSON.stringify(labels)}`);
    return hits.reduce((a, s) => a + s.value, 0);
  };
  return { types, value };
}

const NAMES: Record<string, string> = {
  'spindle:num_requests_running': 'gauge',
  'spindle:num_requests_waiting': 'gauge',
  'spindle:kv_cache_usage_perc': 'gauge',
  'spindle:prompt_tokens_total': 'counter',
  'spindle:generation_tokens_total': 'counter',
  'spindle:num_preemptions_total': 'counter',
  'spindle:num_requests_rejected_total': 'counter',
  'spindle:request_success_total': 'counter',
  'spindle:engine_failed_steps_total': 'counter',
  'spindle:engine_steps_total': 'counter',
  'spindle:engine_step_seconds_total': 'counter',
  'spindle:engine_forward_seconds_total': 'counter',
  'spindle:time_to_first_token_seconds': 'histogram',
  'spindle:inter_token_latency_seconds': 'histogram',
  'spindle:e2e_request_latency_seconds': 'histogram',
  'spindle:request_queue_time_seconds': 'histogram',
  'spindle:request_prefill_time_seconds': 'histogram',
  'spindle:request_decode_time_seconds': 'histogram',
  'spindle:request_inference_time_seconds': 'histogram',
};

t.test('/metrics needs the API key like /v1', async (t) => {
  t.equal((await fetch(base + '/metrics')).status, 401);
});

t.test('every metric is there with its type, labelled with the model name, at 0 before any request', async (t) => {
  const m = await scrape();
  for (const [name, type] of Object.entries(NAMES)) t.equal(m.types.get(name), type, name);
  t.equal(m.value('spindle:num_requests_running', { model_name: 'm' }), 0);
  t.equal(m.value('spindle:num_requests_rejected_total'), 0);
  t.equal(m.value('spindle:time_to_first_token_seconds_count'), 0);
});

t.test('counters, gauges and histograms move with requests', async (t) => {
  const before = await scrape();
  const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  const stream = await client.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 5, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming);
  for await (const _chunk of stream); // eslint-disable-line @typescript-eslint/no-unused-vars
  const after = await scrape();
  const grew = (name: string, labels?: Record<string, string>): number => after.value(name, labels) - before.value(name, labels);
  t.equal(grew('spindle:generation_tokens_total'), 13, '8 + 5 generated tokens');
  t.ok(grew('spindle:prompt_tokens_total') >= r.usage!.prompt_tokens + 4, 'prompt tokens of both requests');
  t.equal(grew('spindle:time_to_first_token_seconds_count'), 2, 'one first token per request');
  t.ok(grew('spindle:engine_steps_total') >= 8, 'a step per token of the longer request at least');
  const forward = grew('spindle:engine_forward_seconds_total'), stepTime = grew('spindle:engine_step_seconds_total');
  t.ok(forward > 0 && stepTime >= forward, `forward passes ${forward} s within the steps' ${stepTime} s`);
  t.equal(grew('spindle:inter_token_latency_seconds_count'), 7 + 4, 'one gap per later token');
  t.equal(grew('spindle:e2e_request_latency_seconds_count'), 2);
  t.ok(grew('spindle:e2e_request_latency_seconds_sum') > 0);
  t.equal(grew('spindle:request_success_total', { finished_reason: 'length' }), 2);
  t.equal(after.value('spindle:time_to_first_token_seconds_bucket', { le: '+Inf' }), after.value('spindle:time_to_first_token_seconds_count'));
  // the engine's phases of each request: queue + prefill within its time to first token, prefill + decode its
  // inference time, within its end-to-end latency
  for (const p of ['queue', 'prefill', 'decode', 'inference']) t.equal(grew(`spindle:request_${p}_time_seconds_count`), 2, p);
  const phase = (p: string): number => grew(`spindle:request_${p}_time_seconds_sum`);
  t.ok(phase('prefill') > 0 && phase('decode') > 0, 'prefill and decode took time');
  t.ok(phase('queue') + phase('prefill') <= grew('spindle:time_to_first_token_seconds_sum'), 'queue + prefill <= TTFT');
  t.ok(Math.abs(phase('prefill') + phase('decode') - phase('inference')) < 1e-3, 'inference = prefill + decode');
  t.ok(phase('inference') <= grew('spindle:e2e_request_latency_seconds_sum'), 'inference <= e2e');
  t.equal(after.value('spindle:num_requests_running'), 0);
  t.equal(after.value('spindle:kv_cache_usage_perc'), 0, 'KV cache empty again');
});

t.test('a running request shows in the gauges; a 429 counts as a rejection', async (t) => {
  const long = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 400, ignore_eos: true, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming);
  const it = long[Symbol.asyncIterator]();
  await it.next(); // role chunk
  await it.next(); // first content: the request holds KV now
  const busy = await scrape();
  t.equal(busy.value('spindle:num_requests_running'), 1);
  t.ok(busy.value('spindle:kv_cache_usage_perc') > 0 && busy.value('spindle:kv_cache_usage_perc') <= 1);
  const err = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }).then(() => null, (e: unknown) => e);
  t.ok(err instanceof OpenAI.RateLimitError);
  long.controller.abort();
  for (let i = 0; i < 200 && app.engine.inflight > 0; i++) await new Promise((r) => setTimeout(r, 10));
  const after = await scrape();
  t.equal(after.value('spindle:num_requests_rejected_total'), 1);
  t.equal(after.value('spindle:request_success_total', { finished_reason: 'abort' }), 1, 'the dropped stream finished as abort');
  t.equal(after.value('spindle:num_requests_running'), 0);
});

t.test('each app has its own registry', async (t) => {
  const other = await buildApp({ engine, servedModelNames: ['other'] });
  t.teardown(() => other.close());
  await other.engine.ready();
  const res = await other.inject({ method: 'GET', url: '/metrics' });
  t.equal(res.statusCode, 200);
  t.match(res.body, /spindle:generation_tokens_total\{model_name="other"\} 0/);
  t.notMatch(res.body, /model_name="m"/);
});
