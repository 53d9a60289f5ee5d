// Prompt logprobs: each prompt token's logprob given the tokens before it (vLLM's prompt_logprobs; OpenAI's
// legacy completions with echo and logprobs, which lm-evaluation-harness uses to score loglikelihoods). Offline
// (llm.generate with promptLogprobs) they match llama.cpp's log-softmax of its logits at every position (F32
// fixture: within 2e-3, the approximate tier's logit tolerance of 1e-3 on both terms; 1e-5 on the exact tier; with
// the CPU's default float16 KV cache, within 2e-2 of llama.cpp's default F16 cache and of float32 caches); over
// HTTP (the openai client) echo + logprobs gives the prompt's entries first (the first null) equal to the offline
// values, streamed as non-streamed, lm-eval's request and parsing work, vLLM's prompt_logprobs shape on completions
// and chat, lm-evaluation-harness's remote tokenizer (GET /tokenizer_info, /tokenize, /detokenize) and
// loglikelihood requests, and the errors name what was wrong.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { getLlama, type Token } from 'node-llama-cpp';
import { LLM } from '../lib/llm.js';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { conformanceTier } from './helpers/conformance.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureModel, PRESETS } from './helpers/fixtures.js';
import { completionLogprobs, promptCompletionLogprobs, vllmPromptLogprobs } from '../lib/server/logprobs.js';

const path = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const TEXT = 'The quick brown fox jumps over the lazy dog. Once upon a time there was';
// float32 K / V: the llama.cpp reference below runs with an F32 KV cache (the tolerances assume both)
const llm = new LLM({ model: path, maxModelLen: 256, threads: 2, dtype: 'float32' });
t.teardown(() => llm.close());
await llm.ready();
const ids = llm.tokenizer.encode(TEXT, { addSpecialTokens: false });
// Stated tolerance of the 16-bit cache's prompt logprobs (against llama.cpp's F16 cache, and against float32 caches):
// K / V rounded to 2^-11 relative (and llama.cpp's q and probabilities too) move a logprob by about that much of the
// logits' scale (about 5 on these fixtures); measured 7.3e-3 against llama.cpp and 6.1e-3 against float32 (AVX-512).
const F16_TOLERANCE = 2e-2;
// The q8_0 cache's: each value within half a step (amax / 254) of its block, about 0.4% relative, which moves this
// fixture's logprobs by about 0.1: measured 1.16e-1 from Spindle's float32 cache where llama.cpp's q8_0 cache moves
// its own by 1.41e-1 (flash attention, F32 as the reference); Spindle's q8_0 against llama.cpp's 1.32e-1. The test
// holds Spindle's deviation to 1.5x llama.cpp's (or this floor), and the two q8_0 caches to this plus llama.cpp's own.
const Q8_TOLERANCE = 5e-2;
// The q4_0 cache's: a value within a step (the block's largest magnitude / 8) of its block, 16x q8_0's half step,
// moves this small fixture's logprobs by about 6 (measured 5.95 from Spindle's float32 cache, llama.cpp's q4_0 cache
// 6.05 from its own), while the two q4_0 caches agree to 0.374 (they hold the same blocks; llama.cpp's attention also
// rounds q and the probabilities): the test holds that agreement to 0.75, on its own.
const Q4_TOLERANCE = 0.75;

/** log-softmax of llama.cpp's logits (node-llama-cpp's map of them) at token `id`. */
function logSoftmaxAt(logits: Map<Token, number>, id: number): number {
  let max = -Infinity;
  for (const v of logits.values()) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits.values()) sum += Math.exp(v - max);
  return logits.get(id as Token)! - max - Math.log(sum);
}

t.test('offline: llama.cpp log-softmax at every prompt position; null first; the token and its alternatives', async (t) => {
  const [out] = await llm.generate({ promptTokenIds: ids }, { promptLogprobs: 3, maxTokens: 1, temperature: 0 });
  const plps = out.promptLogprobs!;
  t.equal(plps.length, ids.length);
  t.equal(plps[0], null, 'the first token has nothing before it');
  for (let p = 1; p < ids.length; ++p) {
    const e = plps[p]!;
    t.ok(e[ids[p]] !== undefined, `position ${p}: the prompt token itself`);
    const ranks = Object.values(e).map((x) => x.rank).sort((a, b) => a - b);
    t.ok(ranks.slice(0, 3).join(',') === '1,2,3' || Object.keys(e).length === 4, 'top 3 alternatives');
  }
  const tier = conformanceTier(debugAddon().debugCpuLevel());
  const tolerance = tier === 'exact' ? 1e-5 : 2e-3;
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
  const model = await llama.loadModel({ modelPath: path });
  const ctx = await model.createContext({ contextSize: 128, batchSize: 128, threads: 1, flashAttention: false,
    experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32' });
  try {
    const res = await ctx.getSequence().controlledEvaluate(ids.map((tok) => [tok as Token, { generateNext: { logits: true } }]));
    let maxDiff = 0;
    for (let p = 1; p < ids.length; ++p) {
      const ref = logSoftmaxAt(res[p - 1]!.next.logits!, ids[p]);
      maxDiff = Math.max(maxDiff, Math.abs(plps[p]![ids[p]].logprob - ref));
    }
    t.ok(maxDiff <= tolerance, `max |logprob difference| over ${ids.length - 1} positions: ${maxDiff.toExponential(2)} (${tier} tier, <= ${tolerance})`);
  } finally {
    await ctx.dispose();
    await model.dispose();
  }
});

t.test("the CPU's default float16 KV cache against llama.cpp's default F16 cache: prompt logprobs within a stated tolerance", async (t) => {
  // Both caches hold K / V rounded to half precision; llama.cpp's attention also rounds q and the softmax
  // probabilities to half for its f16 matmuls, where Spindle keeps them float32: the logprobs differ by that rounding.
  const f16 = new LLM({ model: path, maxModelLen: 256, threads: 2 });
  t.teardown(() => f16.close());
  await f16.ready();
  t.equal(f16.modelInfo.kvCacheDtype, 'float16', 'auto: float16');
  const [out] = await f16.generate({ promptTokenIds: ids }, { promptLogprobs: 1, maxTokens: 1, temperature: 0 });
  const [ref32] = await llm.generate({ promptTokenIds: ids }, { promptLogprobs: 1, maxTokens: 1, temperature: 0 });
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
  const model = await llama.loadModel({ modelPath: path });
  const ctx = await model.createContext({ contextSize: 128, batchSize: 128, threads: 1, flashAttention: false });
  try {
    const res = await ctx.getSequence().controlledEvaluate(ids.map((tok) => [tok as Token, { generateNext: { logits: true } }]));
    let vsLlama = 0, vsF32 = 0;
    for (let p = 1; p < ids.length; ++p) {
      const ref = logSoftmaxAt(res[p - 1]!.next.logits!, ids[p]);
      const mine = out.promptLogprobs![p]![ids[p]].logprob;
      vsLlama = Math.max(vsLlama, Math.abs(mine - ref));
      vsF32 = Math.max(vsF32, Math.abs(mine - ref32.promptLogprobs![p]![ids[p]].logprob));
    }
    t.ok(vsLlama <= F16_TOLERANCE, `max |logprob - llama.cpp's (F16 cache)| over ${ids.length - 1} positions: ${vsLlama.toExponential(2)} (<= ${F16_TOLERANCE})`);
    t.ok(vsF32 > 0 && vsF32 <= F16_TOLERANCE, `against Spindle's float32 cache: ${vsF32.toExponential(2)} (the cache really is 16-bit)`);
  } finally {
    await ctx.dispose();
    await model.dispose();
  }
});

// q8_0 and q4_0 caches against llama.cpp's caches of the same type (flash attention, which its quantized V cache
// needs) and against float32: each moves Spindle's logprobs no more than 1.5x what it moves llama.cpp's (or the
// type's floor), and the two caches of a type agree within that floor (q8_0: plus llama.cpp's own deviation, which
// is as large as their distance; q4_0's is 16x their distance).
for (const [kv, floor] of [['q8_0', Q8_TOLERANCE], ['q4_0', Q4_TOLERANCE]] as const) {
  t.test(`a ${kv} KV cache (kvCacheDtype, llama.cpp's -ctk / -ctv ${kv}) against llama.cpp's ${kv} cache and float32: within a stated tolerance`, async (t) => {
    // head dim 32: whole blocks. Both store K / V as llama.cpp's CPU quantizers make them (x86 quantize_row_q8_0,
    // quantize_row_q4_0_ref); llama.cpp's flash attention also quantizes q to q8_0 and rounds the probabilities to
    // half, where Spindle multiplies the stored values in float32.
    const blockPath = await fixtureModel({ nEmbd: 128, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 12, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
    const typed = new LLM({ model: blockPath, maxModelLen: 256, threads: 2, kvCacheDtype: kv });
    const f32 = new LLM({ model: blockPath, maxModelLen: 256, threads: 2, dtype: 'float32' });
    t.teardown(() => Promise.all([typed.close(), f32.close()]));
    await Promise.all([typed.ready(), f32.ready()]);
    if (typed.modelInfo.device !== 'cpu') {
      t.equal(typed.modelInfo.kvCacheDtype, 'float16', `a GPU has no ${kv} cache: float16`);
      return;
    }
    t.equal(typed.modelInfo.kvCacheDtype, kv);
    const [out] = await typed.generate({ promptTokenIds: ids }, { promptLogprobs: 1, maxTokens: 1, temperature: 0 });
    const [ref32] = await f32.generate({ promptTokenIds: ids }, { promptLogprobs: 1, maxTokens: 1, temperature: 0 });
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
    const model = await llama.loadModel({ modelPath: blockPath });
    const logprobsOf = async (type: 'Q8_0' | 'Q4_0' | 'F32'): Promise<number[]> => {
      const ctx = await model.createContext({ contextSize: 128, batchSize: 128, threads: 1, flashAttention: true,
        experimentalKvCacheKeyType: type, experimentalKvCacheValueType: type });
      try {
        const res = await ctx.getSequence().controlledEvaluate(ids.map((tok) => [tok as Token, { generateNext: { logits: true } }]));
        return ids.map((id, p) => (p === 0 ? 0 : logSoftmaxAt(res[p - 1]!.next.logits!, id)));
      } finally {
        await ctx.dispose();
      }
    };
    try {
      const [llamaTyped, llamaF32] = [await logprobsOf(kv === 'q8_0' ? 'Q8_0' : 'Q4_0'), await logprobsOf('F32')];
      let vsLlama = 0, vsF32 = 0, llamaOwn = 0;
      for (let p = 1; p < ids.length; ++p) {
        const mine = out.promptLogprobs![p]![ids[p]].logprob;
        vsLlama = Math.max(vsLlama, Math.abs(mine - llamaTyped[p]));
        vsF32 = Math.max(vsF32, Math.abs(mine - ref32.promptLogprobs![p]![ids[p]].logprob));
        llamaOwn = Math.max(llamaOwn, Math.abs(llamaTyped[p] - llamaF32[p]));
      }
      t.comment(`${kv} against float32: Spindle ${vsF32.toExponential(2)}, llama.cpp ${llamaOwn.toExponential(2)}; Spindle against llama.cpp (both ${kv}) ${vsLlama.toExponential(2)}`);
      t.ok(vsF32 > 0, `the cache really is ${kv}`);
      t.ok(vsF32 <= Math.max(floor, 1.5 * llamaOwn), `${kv} moves Spindle's logprobs (${vsF32.toExponential(2)}) no more than 1.5x what it moves llama.cpp's (${llamaOwn.toExponential(2)}), or ${floor}`);
      const bound = kv === 'q8_0' ? floor + llamaOwn : floor;
      t.ok(vsLlama <= bound, `against llama.cpp's ${kv} cache: ${vsLlama.toExponential(2)} (<= ${bound.toExponential(2)})`);
    } finally {
      await model.dispose();
    }
  });
}

const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 256, threads: 2, dtype: 'float32' }, 'serve'), servedModelNames: ['m'] });
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const client = new OpenAI({ baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`, apiKey: 'unused', maxRetries: 0 });

t.test("completions echo + logprobs: the prompt's entries first, equal to the offline ones; streamed = whole", async (t) => {
  const [offline] = await llm.generate({ promptTokenIds: ids }, { promptLogprobs: 2, maxTokens: 1, temperature: 0 });
  // lm-evaluation-harness's loglikelihood request, as its local-completions model sends it
  const r = await client.completions.create({ model: 'm', prompt: ids, temperature: 0, max_tokens: 1, logprobs: 2, seed: 1234, echo: true });
  const lp = r.choices[0].logprobs!;
  t.equal(lp.token_logprobs!.length, ids.length + 1, 'every prompt token, then the generated one');
  t.equal(lp.token_logprobs![0], null);
  t.equal(lp.top_logprobs![0], null);
  for (let p = 1; p < ids.length; ++p) {
    if (lp.token_logprobs![p] !== offline.promptLogprobs![p]![ids[p]].logprob) t.fail(`position ${p} differs from the offline value`);
  }
  t.same(lp.tokens!.slice(0, ids.length), ids.map((id) => llm.tokenizer.decode([id])));
  t.equal(lp.text_offset![0], 0);
  t.ok(r.choices[0].text.startsWith(TEXT), 'the text echoes the prompt');
  // lm-eval's parse_logprobs: the continuation's tokens are token_logprobs[ctxlen:-1]; greedy when each is its top
  const ctxlen = 5;
  const continuation = lp.token_logprobs!.slice(ctxlen, -1) as number[];
  t.equal(continuation.length, ids.length - ctxlen);
  const offlineSum = ids.slice(ctxlen).reduce((a, id, i) => a + offline.promptLogprobs![ctxlen + i]![id].logprob, 0);
  t.ok(Math.abs(continuation.reduce((a, b) => a + b, 0) - offlineSum) < 1e-9, 'loglikelihood of the continuation');
  const greedy = continuation.every((v, i) => v === Math.max(...Object.values(lp.top_logprobs![ctxlen + i]!)));
  const offlineGreedy = ids.slice(ctxlen).every((id, i) => offline.promptLogprobs![ctxlen + i]![id].rank === 1);
  t.equal(greedy, offlineGreedy, 'is_greedy as lm-eval computes it');
  // streamed: the echo and the prompt's entries come with the first token
  const stream = await client.completions.create({ model: 'm', prompt: ids, temperature: 0, max_tokens: 3, logprobs: 2, echo: true, stream: true });
  let text = '';
  const joined: (number | null)[] = [];
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    joined.push(...(chunk.choices[0]?.logprobs?.token_logprobs ?? []));
  }
  const whole = await client.completions.create({ model: 'm', prompt: ids, temperature: 0, max_tokens: 3, logprobs: 2, echo: true });
  t.equal(text, whole.choices[0].text);
  t.same(joined, whole.choices[0].logprobs!.token_logprobs);
  const noEcho = await client.completions.create({ model: 'm', prompt: ids, temperature: 0, max_tokens: 3, logprobs: 2 });
  t.equal(noEcho.choices[0].logprobs!.token_logprobs!.length, 3, 'without echo: the generated tokens only');
});

t.test("vLLM's prompt_logprobs on completions and chat; errors", async (t) => {
  const body = { model: 'm', prompt: ids, temperature: 0, max_tokens: 1, prompt_logprobs: 1 } as OpenAI.CompletionCreateParamsNonStreaming;
  const r = await client.completions.create(body) as OpenAI.Completion & { choices: Array<{ prompt_logprobs: unknown[] }> };
  const plps = r.choices[0].prompt_logprobs as Array<Record<string, { logprob: number; rank: number; decoded_token: string }> | null>;
  t.equal(plps.length, ids.length);
  t.equal(plps[0], null);
  t.match(plps[1]![ids[1]], { logprob: Number, rank: Number, decoded_token: llm.tokenizer.decode([ids[1]]) });
  const chat = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi.' }], max_tokens: 1,
    prompt_logprobs: 0 } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming) as OpenAI.Chat.ChatCompletion & { prompt_logprobs: unknown[] };
  t.equal(chat.prompt_logprobs.length, chat.usage!.prompt_tokens, 'one entry per prompt token of the rendered chat');
  await t.rejects(client.completions.create({ ...body, stream: true } as unknown as OpenAI.CompletionCreateParamsStreaming),
    /prompt_logprobs is not available when streaming/);
  await t.rejects(client.completions.create({ ...body, prompt_logprobs: 21 } as OpenAI.CompletionCreateParamsNonStreaming),
    /prompt_logprobs must be an integer in \[0, 20\] \(got 21\)/);
  await t.rejects(llm.generate('x', { promptLogprobs: -2 }), /promptLogprobs must be/);
});

t.test("lm-evaluation-harness's remote tokenizer and loglikelihood, as its local-completions model runs them", async (t) => {
  const base = client.baseURL.replace(/\/v1$/, '');
  // check_remote_tokenizer_support: /tokenizer_info has eos_token, /tokenize answers tokens
  const info = await (await fetch(`${base}/tokenizer_info`)).json() as Record<string, unknown>;
  t.ok('eos_token' in info, 'eos_token');
  t.equal(info.eos_token, llm.tokenizer.eosToken);
  t.equal(info.chat_template, llm.tokenizer.chatTemplate);
  const encode = async (text: string): Promise<number[]> => ((await (await fetch(`${base}/tokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: text, add_special_tokens: false }),
  })).json()) as { tokens: number[] }).tokens;
  const context = 'Question: what colour is the sky? Answer:';
  const choices = [' blue', ' green with purple dots'];
  const ctx = await encode(context);
  t.same(ctx, llm.tokenizer.encode(context, { addSpecialTokens: false }));
  // one batched request of both (context + continuation) token lists, echo + logprobs + max_tokens 1
  const prompts = await Promise.all(choices.map(async (c) => [...ctx, ...(await encode(c))]));
  const r = await client.completions.create({ model: 'm', prompt: prompts, temperature: 0, max_tokens: 1, logprobs: 1, seed: 1234, echo: true });
  const scores = [...r.choices].sort((a, b) => a.index - b.index).map((c) => (c.logprobs!.token_logprobs!.slice(ctx.length, -1) as number[]).reduce((a, b) => a + b, 0));
  const offline = await llm.generate(prompts.map((p) => ({ promptTokenIds: p })), { promptLogprobs: 0, maxTokens: 1, temperature: 0 });
  const expected = offline.map((o, i) => prompts[i].slice(ctx.length).reduce((a, id, k) => a + o.promptLogprobs![ctx.length + k]![id].logprob, 0));
  for (let i = 0; i < choices.length; ++i) t.ok(Math.abs(scores[i] - expected[i]) < 1e-9, `loglikelihood of ${JSON.stringify(choices[i])}: ${scores[i].toFixed(4)}`);
  const detok = await (await fetch(`${base}/detokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: ctx }) })).json() as { prompt: string };
  t.equal(detok.prompt, context);
});

t.test('echo offsets index the echoed text: a BOS takes none, SentencePiece words keep their spaces', async (t) => {
  const text = 'Hello world, this is  a test. Ünïcode too: 日本語!';
  for (const preset of [PRESETS.llama3Tiny, PRESETS.llama2Tiny]) {
    const other = new LLM({ model: await fixtureModel(preset), maxModelLen: 128, threads: 1 });
    try {
      await other.ready();
      const ids = other.tokenizer.encodePrompt(text);
      t.equal(ids[0], other.tokenizer.bosTokenId, `${preset.tokenizer}: the prompt starts with BOS`);
      const lp = promptCompletionLogprobs(ids, undefined, other.tokenizer);
      const offsets = lp.text_offset;
      t.equal(offsets[0], 0);
      t.equal(offsets[1], 0, 'the BOS takes no text');
      t.ok(offsets.every((o, i) => i === 0 || o >= offsets[i - 1]), 'non-decreasing');
      const end = offsets[offsets.length - 1] + other.tokenizer.decode(ids.slice(-2), { skipSpecialTokens: true }).length
        - other.tokenizer.decode(ids.slice(-2, -1), { skipSpecialTokens: true }).length;
      t.equal(end, text.length, `${preset.tokenizer}: the tokens' texts cover the echoed text exactly`);
    } finally {
      await other.close();
    }
  }
});

t.test('edge cases: a one-token prompt; /v1/responses refuses prompt_logprobs', async (t) => {
  const [one] = await llm.generate({ promptTokenIds: [ids[0]] }, { promptLogprobs: 1, maxTokens: 1, temperature: 0 });
  t.same(one.promptLogprobs, [null], 'only the first token, which has nothing to score it');
  const r = await client.completions.create({ model: 'm', prompt: [ids[0]], max_tokens: 1, logprobs: 0, echo: true, temperature: 0 });
  t.same(r.choices[0].logprobs!.token_logprobs!.slice(0, 1), [null]);
  await t.rejects(client.responses.create({ model: 'm', input: 'x', prompt_logprobs: 1 } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming),
    /prompt_logprobs is not available on \/v1\/responses/);
});

t.test('top_logprobs keyed by text keep the higher of two same-text alternatives; -Infinity is sent as -9999', async (t) => {
  const byText = new Map<string, number[]>();
  for (let id = 0; id < 400; id++) {
    const text = llm.tokenizer.decode([id]);
    byText.set(text, [...(byText.get(text) ?? []), id]);
  }
  const twins = [...byText.values()].find((ids) => ids.length >= 2)!; // e.g. two byte tokens that each decode to U+FFFD
  t.ok(twins, 'the vocabulary has two ids with the same text');
  const lp = { tokenId: twins[0], logprob: -Infinity, rank: 3, topTokenIds: [ids[1], twins[0], twins[1]], topLogprobs: [-0.5, -1.25, -3] };
  const out = completionLogprobs([lp], llm.tokenizer);
  t.equal(out.token_logprobs[0], -9999);
  t.equal(out.top_logprobs[0]![llm.tokenizer.decode([twins[0]])], -1.25, 'the higher of the two');
  t.same(JSON.parse(JSON.stringify(vllmPromptLogprobs([lp], llm.tokenizer)))[1][twins[0]].logprob, -9999);
});
