// SGLang's native HTTP API on a real socket, as SGLang's docs call it: POST /generate (text or input_ids, one or a
// batch, n samples, per-prompt sampling_params, SGLang's max_new_tokens default and context cut, stop strings with
// no_stop_trim, stop ids, logprobs with logprob_start_len / top_logprobs_num / return_text_in_logprobs, streamed
// frames carrying the whole answer so far, refusals by name), /abort_request, /flush_cache and vLLM's
// /reset_prefix_cache, /get_model_info, /get_server_info, /health_generate, /encode; and the offline
// Engine.flushCache / LLM.resetPrefixCache.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { Engine } from '../lib/engine.js';
import { LLM } from '../lib/llm.js';
import { Writable } from 'node:stream';
import { parseBenchServeArgs } from '../lib/bench/serve/args.js';
import { runBenchServe } from '../lib/bench/serve/command.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localKey, ModelStore } from '../lib/models/store.js';
import { fixtureModel } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const CTX = 512;
const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const app = await buildApp({
  engine: normalizeEngineOptions({ model: path, maxModelLen: CTX, threads: 2 }, 'serve'),
  servedModelNames: ['tiny'],
  apiKeys: ['k'],
});
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const auth = { authorization: 'Bearer k', 'content-type': 'application/json' };

type Entry = [number | null, number, string | null];
interface Out {
  text: string;
  output_ids: number[];
  index?: number;
  meta_info: {
    id: string; finish_reason: { type: string; matched?: string | number; length?: number } | null; prompt_tokens: number;
    completion_tokens: number; cached_tokens: number; e2e_latency?: number; weight_version: string;
    input_token_logprobs?: Entry[]; output_token_logprobs?: Entry[]; input_top_logprobs?: (Entry[] | null)[]; output_top_logprobs?: Entry[][];
  };
}

async function post(route: string, body: unknown): Promise<{ status: number; json: unknown; text: string }> {
  const r = await fetch(base + route, { method: 'POST', headers: auth, body: JSON.stringify(body) });
  const text = await r.text();
  let json: unknown = null;
  try { json = JSON.parse(text); } catch { /* text answers */ }
  return { status: r.status, json, text };
}

async function generate(body: unknown): Promise<Out | Out[]> {
  const r = await post('/generate', body);
  if (r.status !== 200) throw new Error(`/generate ${r.status}: ${r.text}`);
  return r.json as Out | Out[];
}

/** The SSE frames of a streamed /generate (parsed), and whether it ended with [DONE]. */
async function streamFrames(body: unknown): Promise<{ frames: Out[]; done: boolean }> {
  const r = await fetch(base + '/generate', { method: 'POST', headers: auth, body: JSON.stringify({ ...(body as object), stream: true }) });
  const text = await r.text();
  const data = text.split('\n\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
  return { frames: data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Out), done: data.at(-1) === '[DONE]' };
}

/** Waits until the engine runs a request (a stream just sent has been submitted). */
async function waitRunning(): Promise<void> {
  for (;;) {
    const info = await (await fetch(base + '/get_server_info', { headers: auth })).json() as { internal_states: { num_running_reqs: number }[] };
    if (info.internal_states[0].num_running_reqs > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

const PROMPT = 'The capital of France is';
const greedy = (n: number): Record<string, unknown> => ({ temperature: 0, max_new_tokens: n, ignore_eos: true });

t.test('/generate: the shape SGLang answers, the same tokens as /v1/completions', async (t) => {
  const out = await generate({ text: PROMPT, sampling_params: greedy(12) }) as Out;
  t.type(out.text, 'string');
  t.equal(out.output_ids.length, 12);
  t.match(out.meta_info, { finish_reason: { type: 'length', length: 12 }, completion_tokens: 12, weight_version: 'default', cached_tokens: 0 });
  t.type(out.meta_info.id, 'string');
  t.ok(out.meta_info.e2e_latency! > 0);
  const cmpl = await post('/v1/completions', { prompt: PROMPT, max_tokens: 12, temperature: 0, ignore_eos: true, logprobs: 0 });
  const c = (cmpl.json as { choices: { text: string }[]; usage: { prompt_tokens: number } });
  t.equal(out.text, c.choices[0].text, 'the same text as /v1/completions on the same prompt');
  t.equal(out.meta_info.prompt_tokens, c.usage.prompt_tokens, 'the same prompt tokens');
  const byIds = await post('/tokenize', { prompt: PROMPT });
  const ids = (byIds.json as { tokens: number[] }).tokens;
  const again = await generate({ input_ids: ids, sampling_params: greedy(12), rid: 'mine' }) as Out;
  t.same(again.output_ids, out.output_ids, 'input_ids give the same tokens as the text');
  t.equal(again.meta_info.id, 'mine', 'meta_info.id is the rid');
  t.ok(again.meta_info.cached_tokens > 0 || ids.length < 16, 'the second run of a prompt finds its prefix cached (when a block is full)');
});

t.test("/generate: SGLang's max_new_tokens default (128), cut to the room the context leaves", async (t) => {
  const out = await generate({ text: PROMPT, sampling_params: { temperature: 0, ignore_eos: true } }) as Out;
  t.equal(out.meta_info.completion_tokens, 128);
  const long = Array.from({ length: CTX - 5 }, (_, i) => 100 + (i % 50));
  const cut = await generate({ input_ids: long, sampling_params: { temperature: 0, ignore_eos: true, max_new_tokens: 100 } }) as Out;
  t.equal(cut.meta_info.completion_tokens, 5, 'max_new_tokens cut to the context');
  t.same(cut.meta_info.finish_reason, { type: 'length', length: 5 });
  const over = await post('/generate', { input_ids: [...long, 1, 2, 3, 4, 5], sampling_params: greedy(4) });
  t.equal(over.status, 400);
  t.match(over.text, /The input \(512 tokens\) is longer than the model's context length \(512 tokens\)/);
});

t.test('/generate: a batch with n samples and per-prompt sampling_params, in SGLang order', async (t) => {
  const prompts = ['Once upon a time', 'In a hole in the ground'];
  const alone = await Promise.all(prompts.map((p) => generate({ text: p, sampling_params: greedy(6) }) as Promise<Out>));
  const outs = await generate({ text: prompts, sampling_params: [{ ...greedy(6), n: 2 }, { ...greedy(6), n: 2 }], rid: ['a', 'b'] }) as Out[];
  t.equal(outs.length, 4);
  t.same(outs.map((o) => o.meta_info.id), ['a_0', 'a_1', 'b_0', 'b_1'], 'sample j of prompt i at i * n + j');
  t.same(outs.map((o) => o.text), [alone[0].text, alone[0].text, alone[1].text, alone[1].text], 'greedy samples equal the prompt alone');
  const mixed = await generate({ text: prompts, sampling_params: [greedy(3), greedy(5)] }) as Out[];
  t.same(mixed.map((o) => o.meta_info.completion_tokens), [3, 5], 'each prompt its own sampling_params');
  const single = await generate({ text: prompts[0], sampling_params: { ...greedy(4), n: 2 } });
  t.ok(Array.isArray(single) && single.length === 2, 'one prompt with n > 1 answers a list');
  const bad = await post('/generate', { text: prompts, sampling_params: [{ n: 1 }, { n: 2 }] });
  t.equal(bad.status, 400);
  t.match(bad.text, /n must be the same for every prompt/);
});

t.test('/generate: stop strings (no_stop_trim keeps them), stop token ids matched', async (t) => {
  const free = await generate({ text: PROMPT, sampling_params: greedy(16) }) as Out;
  const stop = free.text.slice(4, 7);
  t.ok(stop.length === 3 && !free.text.slice(0, 4).includes(stop), `a stop string from the output (${JSON.stringify(stop)})`);
  const trimmed = await generate({ text: PROMPT, sampling_params: { ...greedy(16), stop } }) as Out;
  t.same(trimmed.meta_info.finish_reason, { type: 'stop', matched: stop });
  t.notOk(trimmed.text.includes(stop));
  t.ok(free.text.startsWith(trimmed.text));
  const kept = await generate({ text: PROMPT, sampling_params: { ...greedy(16), stop, no_stop_trim: true } }) as Out;
  t.equal(kept.text, trimmed.text + stop, 'no_stop_trim: the stop string stays');
  const id = free.output_ids[2];
  const byId = await generate({ text: PROMPT, sampling_params: { ...greedy(16), stop_token_ids: [id] } }) as Out;
  t.same(byId.meta_info.finish_reason, { type: 'stop', matched: id });
  t.same(byId.output_ids, free.output_ids.slice(0, free.output_ids.indexOf(id) + 1), 'the stop token is the last output id');
});

t.test('/generate: logprobs as SGLang lays them out', async (t) => {
  const ids = ((await post('/tokenize', { prompt: PROMPT })).json as { tokens: number[] }).tokens;
  const out = await generate({
    text: PROMPT, sampling_params: greedy(5), return_logprob: true, logprob_start_len: 0, top_logprobs_num: 2, return_text_in_logprobs: true,
  }) as Out;
  const m = out.meta_info;
  t.equal(m.input_token_logprobs!.length, ids.length, 'one entry per prompt token from logprob_start_len');
  t.same(m.input_token_logprobs![0].slice(0, 2), [null, ids[0]], 'the first has no logprob');
  t.same(m.input_token_logprobs!.map((e) => e[1]), ids, 'the prompt ids');
  t.equal(m.input_top_logprobs![0], null);
  t.ok(m.input_top_logprobs!.slice(1).every((l) => l!.length === 2));
  t.same(m.output_token_logprobs!.map((e) => e[1]), out.output_ids, 'one entry per output token');
  t.ok(m.output_token_logprobs!.every((e) => typeof e[0] === 'number' && e[0] <= 0 && typeof e[2] === 'string'));
  t.ok(m.output_top_logprobs!.every((l, k) => l.length === 2 && l[0][1] === out.output_ids[k] && l[0][0]! >= l[1][0]!),
    'greedy: the best alternative is the token taken, best first');
  // the same values as vLLM's prompt_logprobs on /v1/completions
  const v = await post('/v1/completions', { prompt: PROMPT, max_tokens: 1, temperature: 0, prompt_logprobs: 0 });
  const pl = (v.json as { choices: { prompt_logprobs: (Record<string, { logprob: number }> | null)[] }[] }).choices[0].prompt_logprobs;
  for (let k = 1; k < ids.length; k++) {
    t.ok(Math.abs(pl[k]![String(ids[k])].logprob - (m.input_token_logprobs![k][0] as number)) < 1e-6, `prompt position ${k}`);
  }
  const def = await generate({ text: PROMPT, sampling_params: greedy(3), return_logprob: true }) as Out;
  t.same(def.meta_info.input_token_logprobs, [[null, ids.at(-1), null]], 'by default: the last prompt token only, no text');
  t.equal(def.meta_info.output_token_logprobs!.length, 3);
  t.notOk('output_top_logprobs' in def.meta_info, 'no top lists without top_logprobs_num');
  const from = await generate({ text: PROMPT, sampling_params: greedy(1), return_logprob: true, logprob_start_len: 2 }) as Out;
  t.equal(from.meta_info.input_token_logprobs!.length, ids.length - 2);
  t.equal(from.meta_info.input_token_logprobs![0][0], null, 'the first reported position has none (as SGLang)');
  t.ok(Math.abs((from.meta_info.input_token_logprobs![1][0] as number) - (m.input_token_logprobs![3][0] as number)) < 1e-6);
  const bad = await post('/generate', { text: PROMPT, return_logprob: true, logprob_start_len: ids.length });
  t.equal(bad.status, 400);
  t.match(bad.text, /logprob_start_len must be -1 or a prompt position/);
});

t.test('/generate stream: every frame the whole answer so far; batches say their index', async (t) => {
  const whole = await generate({ text: PROMPT, sampling_params: greedy(10), return_logprob: true }) as Out;
  const { frames, done } = await streamFrames({ text: PROMPT, sampling_params: greedy(10), return_logprob: true });
  t.ok(done, 'data: [DONE] last');
  t.ok(frames.length >= 2);
  for (let k = 1; k < frames.length; k++) t.ok(frames[k].text.startsWith(frames[k - 1].text), 'cumulative text');
  t.ok(frames.slice(0, -1).every((f) => f.meta_info.finish_reason === null), 'finish_reason null before the last');
  const last = frames.at(-1)!;
  t.equal(last.text, whole.text);
  t.same(last.output_ids, whole.output_ids);
  t.same(last.meta_info.finish_reason, { type: 'length', length: 10 });
  t.same(last.meta_info.output_token_logprobs!.map((e) => e[1]), whole.output_ids);
  t.notOk('index' in last, 'one prompt: no index');
  const batch = await streamFrames({ text: ['a b c', 'd e f'], sampling_params: greedy(4) });
  t.same([...new Set(batch.frames.map((f) => f.index))].sort(), [0, 1]);
  t.equal(batch.frames.filter((f) => f.meta_info.finish_reason !== null).length, 2, 'each output finishes once');
});

t.test('/generate: refusals by name', async (t) => {
  const cases: [unknown, RegExp][] = [
    [{ text: 'x', input_ids: [1] }, /give exactly one of text or input_ids/],
    [{}, /give exactly one of text or input_ids/],
    [{ input_ids: [] }, /input_ids cannot be empty/],
    [{ input_embeds: [[0.1]] }, /input_embeds \(prompt embeddings\) is not supported/],
    [{ text: 'x', return_hidden_states: true }, /return_hidden_states is not supported/],
    [{ text: 'x', token_ids_logprob: [1, 2] }, /token_ids_logprob is not supported/],
    [{ text: 'x', sampling_params: { temperatur: 0 } }, /sampling_params: .*temperatur/],
    [{ text: 'x', sampling_params: { structural_tag: '{}' } }, /structural_tag is not supported/],
    [{ text: 'x', sampling_params: { temperature: -1 } }, /temperature must be/],
    [{ text: ['x', 'y'], rid: ['r', 'r'] }, /request ids .* must be unique/],
    [{ text: ['x', 'y'], rid: ['a', 'a_0'], sampling_params: { n: 2 } }, /request ids .* must be unique/],
    [{ text: 'x', image_data: 'data:image/png;base64,iVBORw0KGgo=' }, /image_data: this model takes text only/],
    [{ text: 'x', sampling_params: { seed: 1, sampling_seed: 2 } }, /seed/],
    [{ text: 'x', extra_key: '' }, /extra_key \(cache_salt\) must be a non-empty string/],
    [{ text: ['x', 'y'], sampling_params: [{}] }, /sampling_params has 1 entries for 2 prompts/],
    [{ input_ids: [1, 999999] }, /token id 999999 at position 1 is outside the vocabulary/],
    [{ text: 'x', lora_path: 'nope' }, /the LoRA adapter 'nope' is not loaded/],
  ];
  for (const [body, re] of cases) {
    const r = await post('/generate', body);
    t.equal(r.status, 400, JSON.stringify(body));
    t.match(r.text, re);
  }
  const unauthorized = await fetch(base + '/generate', { method: 'POST', body: JSON.stringify({ text: 'x' }), headers: { 'content-type': 'application/json' } });
  t.equal(unauthorized.status, 401, 'the API key guards /generate');
});

t.test('/abort_request ends a running request by its rid', async (t) => {
  const pending = streamFrames({ text: PROMPT, sampling_params: { temperature: 0, ignore_eos: true, max_new_tokens: 400 }, rid: 'long' });
  await waitRunning();
  const r = await post('/abort_request', { rid: 'long' });
  t.equal(r.status, 200);
  const { frames, done } = await pending;
  t.ok(done);
  t.match(frames.at(-1)!.meta_info.finish_reason, { type: 'abort' });
  t.ok(frames.at(-1)!.meta_info.completion_tokens < 400);
  t.equal((await post('/abort_request', { rid: 'gone' })).status, 200, 'an unknown rid: 200 too, as SGLang');
  t.equal((await post('/abort_request', {})).status, 400);
});

t.test('/flush_cache and /reset_prefix_cache: the next prompt computes its KV again; refused while requests run', async (t) => {
  const text = 'Spindles spin thread. '.repeat(12);
  await generate({ text, sampling_params: greedy(2) });
  const hit = await generate({ text, sampling_params: greedy(2) }) as Out;
  t.ok(hit.meta_info.cached_tokens > 0, 'the prefix is cached');
  const flushed = await post('/flush_cache', {});
  t.equal(flushed.status, 200);
  t.equal(flushed.text, 'Cache flushed.\n');
  const miss = await generate({ text, sampling_params: greedy(2) }) as Out;
  t.equal(miss.meta_info.cached_tokens, 0, 'nothing cached after the flush');
  t.equal(miss.text, hit.text, 'the same tokens');
  const get = await fetch(base + '/flush_cache', { headers: auth });
  t.equal(get.status, 200, 'GET works too');
  const running = streamFrames({ text: PROMPT, sampling_params: { temperature: 0, ignore_eos: true, max_new_tokens: 300 }, rid: 'busy' });
  await waitRunning();
  const refused = await post('/flush_cache', {});
  t.equal(refused.status, 400);
  t.match(refused.text, /1 request is running or waiting/);
  const vllm = await post('/reset_prefix_cache', {});
  t.equal(vllm.status, 400);
  await post('/abort_request', { rid: 'busy' });
  await running;
  t.equal((await post('/reset_prefix_cache', {})).status, 200, "vLLM's name, once idle");
});

t.test('/get_model_info, /get_server_info, /health_generate, /encode', async (t) => {
  const info = await (await fetch(base + '/get_model_info', { headers: auth })).json() as Record<string, unknown>;
  t.same(Object.keys(info).sort(), ['has_audio_understanding', 'has_image_understanding', 'is_generation', 'model_path',
    'preferred_sampling_params', 'tokenizer_path', 'weight_version']);
  t.match(info, { model_path: path, is_generation: true, has_image_understanding: false, preferred_sampling_params: null });
  const server = await (await fetch(base + '/get_server_info', { headers: auth })).json() as Record<string, unknown>;
  t.match(server, { model_path: path, served_model_name: 'tiny', context_length: CTX, disable_radix_cache: false, version: String });
  t.ok((server.max_total_num_tokens as number) >= CTX);
  t.match((server.internal_states as unknown[])[0], { num_running_reqs: Number, token_usage: Number });
  t.same(await (await fetch(base + '/server_info', { headers: auth })).json(), { ...server, internal_states: server.internal_states },
    '/server_info: the newer name');
  t.equal((await fetch(base + '/health_generate')).status, 200, 'open without the key, as /health');
  const one = await post('/encode', { text: 'hello world' });
  const e = one.json as { embedding: number[]; meta_info: { prompt_tokens: number } };
  t.equal(e.embedding.length, 64);
  t.ok(Math.abs(Math.hypot(...e.embedding) - 1) < 1e-4, 'normalized');
  const two = await post('/encode', { text: ['a', 'b'], rid: ['x', 'y'] });
  t.same((two.json as { meta_info: { id: string } }[]).map((o) => o.meta_info.id), ['x', 'y']);
});

t.test('offline: Engine.flushCache (SGLang) and LLM.resetPrefixCache (vLLM)', async (t) => {
  const text = 'Spindles spin thread. '.repeat(12);
  const engine = new Engine({ modelPath: path, contextLength: 256, threads: 2 });
  t.teardown(() => engine.shutdown());
  const params = { temperature: 0, max_new_tokens: 2 };
  await engine.generate({ prompt: text, samplingParams: params });
  const hit = await engine.generate({ prompt: text, samplingParams: params }) as { metaInfo: { cachedTokens: number } };
  t.ok(hit.metaInfo.cachedTokens > 0);
  const flushed = await engine.flushCache();
  t.equal(flushed.success, true);
  t.match(flushed.message, /^flushed \d+ cached blocks$/);
  const miss = await engine.generate({ prompt: text, samplingParams: params }) as { metaInfo: { cachedTokens: number } };
  t.equal(miss.metaInfo.cachedTokens, 0);
  const llm = new LLM({ model: path, maxModelLen: 256, threads: 2 });
  t.teardown(() => llm.close());
  await llm.generate(text, { maxTokens: 2, temperature: 0 });
  t.equal(await llm.resetPrefixCache(), true);
  const [after] = await llm.generate(text, { maxTokens: 2, temperature: 0 });
  t.equal(after.numCachedTokens, 0);
  const busy = llm.generate(text, { maxTokens: 200, temperature: 0, ignoreEos: true });
  while (llm.stats().running === 0) await new Promise((r) => setTimeout(r, 5));
  t.equal(await llm.resetPrefixCache(), false, 'not while a request runs');
  await busy;
});

t.test("spindle bench serve --backend sglang (SGLang's bench_serving default) against /generate", async (t) => {
  const quiet = (): Writable => new Writable({ write(_c, _e, cb) { cb(); } });
  for (const extra of [[], ['--random-token-ids', '500']]) {
    const cfg = parseBenchServeArgs(['--base-url', base, '--backend', 'sglang', '--num-prompts', '4', '--random-input-len', '8',
      '--random-output-len', '5', '--ignore-eos', '--api-key', 'k', '--disable-progress', ...extra], {})!;
    const { metrics: m, result } = await runBenchServe(cfg, { stdout: quiet(), stderr: quiet() });
    t.equal(m.completed, 4, `every request completed ${extra.join(' ')}`);
    t.equal(m.failed, 0);
    t.equal(m.totalOutput, 20, "output tokens from meta_info.completion_tokens");
    t.same(result.token_counts, { prompt: 'server', output: 'server' });
    if (extra.length > 0) t.equal(m.totalInput, 4 * 8, 'token-id prompts: exactly the asked lengths');
  }
});

t.test('/generate: rids as SGLang expands them; ids stay unique among running requests', async (t) => {
  const outs = await generate({ text: ['a', 'b'], rid: 'batch', sampling_params: greedy(2) }) as Out[];
  t.same(outs.map((o) => o.meta_info.id), ['batch_0', 'batch_1'], 'one rid for a batch: <rid>_<i>');
  const pending = streamFrames({ text: PROMPT, rid: 'x_0', sampling_params: { temperature: 0, ignore_eos: true, max_new_tokens: 400 } });
  await waitRunning();
  const clash = await post('/generate', { text: PROMPT, rid: 'x', sampling_params: { ...greedy(2), n: 2 } });
  t.equal(clash.status, 400, "a sample id (x_0) of a running request's id is refused");
  t.match(clash.text, /rid: 'x_0' is the id of a request still running/);
  await post('/abort_request', { rid: 'x_0' });
  const { frames } = await pending;
  t.match(frames.at(-1)!.meta_info.finish_reason, { type: 'abort' }, 'and the abort reached the right request');
});

t.test('/generate: max_new_tokens 0 scores the prompt only; min_new_tokens cut with the context; extra_key', async (t) => {
  const ids = ((await post('/tokenize', { prompt: PROMPT })).json as { tokens: number[] }).tokens;
  const scored = await generate({ text: PROMPT, sampling_params: { max_new_tokens: 0 }, return_logprob: true, logprob_start_len: 0 }) as Out;
  t.equal(scored.text, '');
  t.same(scored.output_ids, []);
  t.match(scored.meta_info, { completion_tokens: 0, finish_reason: { type: 'length', length: 0 } });
  t.equal(scored.meta_info.input_token_logprobs!.length, ids.length, 'the prompt scored');
  t.same(scored.meta_info.output_token_logprobs, []);
  const long = Array.from({ length: CTX - 3 }, (_, i) => 100 + (i % 50));
  const cut = await generate({ input_ids: long, sampling_params: { temperature: 0, max_new_tokens: 50, min_new_tokens: 10 } }) as Out;
  t.equal(cut.meta_info.completion_tokens, 3, 'min_new_tokens cut to the room too');
  const text = 'Salted prefixes stay apart. '.repeat(8);
  await generate({ text, sampling_params: greedy(1) });
  const salted = await generate({ text, sampling_params: greedy(1), extra_key: 'tenant' }) as Out;
  t.equal(salted.meta_info.cached_tokens, 0, "extra_key: another cache namespace (vLLM's cache_salt)");
  const again = await generate({ text, sampling_params: greedy(1), extra_key: 'tenant' }) as Out;
  t.ok(again.meta_info.cached_tokens > 0, 'its own prefix is found');
});

t.test('/health_generate while the engine is busy: progress counts; /encode refuses bad input_ids', async (t) => {
  const pending = streamFrames({ text: PROMPT, rid: 'busy-health', sampling_params: { temperature: 0, ignore_eos: true, max_new_tokens: 200 } });
  await waitRunning();
  t.equal((await fetch(base + '/health_generate')).status, 200, 'a busy engine that makes progress is healthy');
  await post('/abort_request', { rid: 'busy-health' });
  await pending;
  const bad = await post('/encode', { input_ids: [[1, 2], 3] });
  t.equal(bad.status, 400);
  t.match(bad.text, /input_ids/, "a 400 naming input_ids, not a 500");
});

t.test('runner mode: /generate names a store model; /health_generate and /flush_cache load nothing', async (t) => {
  const store = new ModelStore(mkdtempSync(join(tmpdir(), 'spindle-sglang-home-')));
  const blob = await store.importFile(path, 'tiny.gguf');
  store.write(localKey(null, 'tiny', 'latest'), { schemaVersion: 1, name: 'tiny:latest', createdAt: new Date().toISOString(), source: path,
    model: blob, mmproj: null, template: null, system: null, parameters: {}, messages: [], license: [] });
  const runner = await buildApp({ engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: [], runner: { store } });
  t.teardown(() => runner.close());
  t.equal((await runner.inject({ method: 'GET', url: '/health_generate' })).statusCode, 200, 'nothing loaded: the server is up');
  t.equal((await runner.inject({ method: 'POST', url: '/flush_cache' })).statusCode, 200, 'nothing loaded: nothing to flush');
  const missing = await runner.inject({ method: 'POST', url: '/generate', payload: { text: 'hi' } });
  t.equal(missing.statusCode, 400);
  t.match(missing.body, /model is required/);
  const r = await runner.inject({ method: 'POST', url: '/generate', payload: { model: 'tiny', text: 'hi', sampling_params: greedy(3) } });
  t.equal(r.statusCode, 200);
  t.equal((JSON.parse(r.body) as Out).meta_info.completion_tokens, 3);
  t.equal((await runner.inject({ method: 'GET', url: '/health_generate' })).statusCode, 200, 'the loaded model answers');
  t.equal((await runner.inject({ method: 'POST', url: '/flush_cache' })).statusCode, 200);
});

t.test("--incremental-streaming-output: frames carry what they add (SGLang's flag)", async (t) => {
  const { parseServeArgs } = await import('../lib/server/command.js');
  t.equal(parseServeArgs(['m.gguf', '--incremental-streaming-output'], {})!.serve.incrementalStreamingOutput, true);
  t.equal(parseServeArgs(['m.gguf'], {})!.serve.incrementalStreamingOutput, false);
  const inc = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['tiny'],
    incrementalStreamingOutput: true });
  t.teardown(() => inc.close());
  const body = { text: PROMPT, sampling_params: greedy(10), return_logprob: true, stream: true };
  const r = await inc.inject({ method: 'POST', url: '/generate', payload: body });
  const frames = r.body.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)) as Out);
  const whole = await generate({ ...body, stream: false }) as Out;
  t.equal(frames.map((f) => f.text).join(''), whole.text, 'the texts join to the whole');
  t.same(frames.flatMap((f) => f.output_ids), whole.output_ids, 'so do the output ids');
  t.same(frames.flatMap((f) => f.meta_info.output_token_logprobs!.map((e) => e[1])), whole.output_ids, 'and the output logprobs');
  t.ok(frames.every((f) => f.meta_info.input_token_logprobs!.length === 1), "the prompt's logprobs in every frame, as SGLang's");
  t.equal(frames.at(-1)!.meta_info.completion_tokens, 10, 'meta_info counts stay cumulative');
});

t.test('n up to 128 (OpenAI\'s limit); a request over 2048 sequences (prompts x n) is a 400', async (t) => {
  const r = await post('/v1/completions', { prompt: PROMPT, n: 16, max_tokens: 2, temperature: 1, seed: 3 });
  t.equal(r.status, 200, r.text.slice(0, 200));
  t.equal((r.json as { choices: unknown[] }).choices.length, 16);
  const g = await generate({ text: PROMPT, sampling_params: { n: 16, max_new_tokens: 2, sampling_seed: 3 } }) as Out[];
  t.equal(g.length, 16, '/generate too');
  const big = await post('/v1/completions', { prompt: Array.from({ length: 20 }, () => 'x'), n: 128, max_tokens: 1 });
  t.equal(big.status, 400);
  t.match(big.text, /a request may run at most 2048 sequences \(prompts x n\); this one asks for 2560/);
  t.equal((await post('/v1/completions', { prompt: 'x', n: 129 })).status, 400);
});
