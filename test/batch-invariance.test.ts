// Batch invariance of the engine: 32 prompts of mixed lengths (3..300 tokens) give the same token ids batched
// as one at a time, greedy and seeded; also with a KV budget so small the scheduler queues and preempts, and
// with chunked prefill on and off. Aborts before start / in prefill / in decode settle once and free all KV.
import t from 'tap';
import { LLM } from '../lib/index.js';
import { checkBatchInvariance, MAX_LEN } from './helpers/batch-invariance.js';
import { fixtureModel } from './helpers/fixtures.js';

const SPEC = { arch: 'llama', tokenizer: 'llama2', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 21 } as const;
t.test('32 mixed prompts: batched == one at a time (greedy + seeded), tight KV with preemption, chunked on/off', async (t) => {
  // KV for just 2 max-length sequences (float16 K and V of every layer: the CPU's default), so 32 requests must
  // queue and preempt
  const bytesPerToken = SPEC.nLayer * SPEC.nHeadKv * (SPEC.nEmbd / SPEC.nHead) * 2 * 2;
  await checkBatchInvariance(t, await fixtureModel(SPEC), {
    tight: { chunkedPrefillSize: 32, maxNumBatchedTokens: 128, kvCacheMemory: 2 * MAX_LEN * bytesPerToken },
  });
});

t.test('abort before start, during prefill and during decode: settles once, frees all KV', async (t) => {
  const model = await fixtureModel(SPEC);
  const llm = new LLM({ model, maxModelLen: MAX_LEN, threads: 2, maxNumSeqs: 1, chunkedPrefillSize: 16, maxNumBatchedTokens: 16 });
  t.teardown(() => llm.close());
  await llm.ready();
  const long = Array.from({ length: 290 }, (_, j) => 3 + (j % 50));
  const params = { temperature: 0, maxTokens: 200, ignoreEos: true };
  const inPrefill = new AbortController(), inDecode = new AbortController(), beforeStart = new AbortController();
  let settled = 0;
  const count = <T>(p: Promise<T>) => p.then((v) => { settled++; return v; }, (e) => { settled++; throw e; });
  const decode = count(llm.generate({ promptTokenIds: [3, 4, 5] }, params, { signal: inDecode.signal }));
  const prefill = count(llm.generate({ promptTokenIds: long }, params, { signal: inPrefill.signal }));
  const queued = count(llm.generate({ promptTokenIds: [6, 7, 8] }, params, { signal: beforeStart.signal }));
  beforeStart.abort();
  await new Promise((r) => setTimeout(r, 30));
  inDecode.abort();
  await new Promise((r) => setTimeout(r, 5));
  inPrefill.abort();
  const [d, p, q] = await Promise.all([decode, prefill, queued]);
  t.equal(q[0].outputs[0].finishReason, 'abort');
  t.equal(q[0].outputs[0].tokenIds.length, 0);
  t.equal(d[0].outputs[0].finishReason, 'abort');
  t.ok(d[0].outputs[0].tokenIds.length < 200);
  t.equal(p[0].outputs[0].finishReason, 'abort');
  await new Promise((r) => setTimeout(r, 20));
  t.equal(settled, 3);
  const s = llm.stats();
  t.equal(s.kvBlocksUsed, 0);
  t.equal(s.running + s.waiting, 0);
});
