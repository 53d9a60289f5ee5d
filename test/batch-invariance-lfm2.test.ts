// Batch invariance of the engine on the hybrid lfm2 architecture (short-conv layers keep a per-sequence
// recurrent state in a slot beside the paged KV): 32 prompts of mixed lengths (3..300 tokens) give the same
// token ids batched as one at a time, greedy and seeded; with chunked prefill on (the conv state is carried
// between a prompt's chunks) and off; and with a memory budget (KV of 2 max-length sequences plus the state
// slots of maxNumSeqs 8) so small that requests queue and are preempted (state freed, rebuilt by recompute
// from position 0). Aborts in prefill and in decode free the only slot (maxNumSeqs 1) for the next request,
// which then produces exactly its tokens alone. The main test runs on lfm2 and on lfm2moe (MoE FFNs: tokens are
// grouped by expert, and a token's output must still not depend on its batch).
import t from 'tap';
import { LLM } from '../lib/index.js';
import { checkBatchInvariance, MAX_LEN } from './helpers/batch-invariance.js';
import { fixtureModel } from './helpers/fixtures.js';

// 6 layers: attention at 2 and 5, short conv (l_cache 3) elsewhere; the small llama2 vocabulary keeps it fast
const SPEC = { arch: 'lfm2', tokenizer: 'llama2', nEmbd: 64, nLayer: 6, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32',
  tiedEmbeddings: true, seed: 21 } as const;
const MOE_SPEC = { ...SPEC, arch: 'lfm2moe', nExpert: 16, nExpertUsed: 4, nFfExp: 64, leadingDenseBlocks: 1, seed: 22 } as const;
const N_ATTENTION = 2;
const N_CONV = 4;
const L_CACHE = 3;
const MAIN = '32 mixed prompts batched == one at a time (greedy + seeded), chunked on/off, tight memory with preemption';
for (const spec of [SPEC, MOE_SPEC]) t.test(`${spec.arch}: ${MAIN}`, async (t) => {
  // KV for 2 max-length sequences (float16 K and V of the attention layers: the CPU's default, and the prefix
  // cache's f32 conv-state checkpoint of every 16-token block) plus the state slots of 8 sequences
  const statePerSeq = N_CONV * (L_CACHE - 1) * SPEC.nEmbd * 4;
  const kvPerToken = N_ATTENTION * SPEC.nHeadKv * (SPEC.nEmbd / SPEC.nHead) * 2 * 2 + statePerSeq / 16;
  const tight = await checkBatchInvariance(t, await fixtureModel(spec), {
    arch: spec.arch,
    minDistinct: 50,
    extra: [{ label: '7-token chunks (chunk boundaries inside the conv window)', opts: { chunkedPrefillSize: 7, maxNumBatchedTokens: 40 } }],
    tight: { chunkedPrefillSize: 32, maxNumBatchedTokens: 128, maxNumSeqs: 8, kvCacheMemory: 2 * MAX_LEN * kvPerToken + 8 * statePerSeq },
  });
  t.equal(tight.kvBlocksTotal, Math.ceil(MAX_LEN / tight.kvBlockSize) * 2, 'the state slots and checkpoints took their share');
});

t.test('lfm2: a budget smaller than the state slots fails to load with a clear message', async (t) => {
  const model = await fixtureModel(SPEC);
  const llm = new LLM({ model, maxModelLen: MAX_LEN, threads: 1, maxNumSeqs: 256, kvCacheMemory: 100_000 });
  await t.rejects(llm.ready(), /recurrent state of maxNumSeqs 256 sequences needs 524288 bytes/);
  await llm.close();
});

t.test('lfm2: aborts in prefill and decode free the only state slot for the next request', async (t) => {
  const model = await fixtureModel(SPEC);
  const long = Array.from({ length: 290 }, (_, j) => 3 + ((j * 7) % 500));
  const next = Array.from({ length: 40 }, (_, j) => 5 + ((j * 13) % 300));
  const params = { temperature: 0, maxTokens: 8, ignoreEos: true };
  const ref = new LLM({ model, maxModelLen: MAX_LEN, threads: 2 });
  await ref.ready();
  const [want] = await ref.generate({ promptTokenIds: next }, params);
  await ref.close();

  const llm = new LLM({ model, maxModelLen: MAX_LEN, threads: 2, maxNumSeqs: 1, chunkedPrefillSize: 16, maxNumBatchedTokens: 16 });
  t.teardown(() => llm.close());
  await llm.ready();
  const inPrefill = new AbortController(), inDecode = new AbortController();
  const decode = llm.generate({ promptTokenIds: [3, 4, 5] }, { temperature: 0, maxTokens: 200, ignoreEos: true }, { signal: inDecode.signal });
  const prefill = llm.generate({ promptTokenIds: long }, { temperature: 0, maxTokens: 200, ignoreEos: true }, { signal: inPrefill.signal });
  const after = llm.generate({ promptTokenIds: next }, params);
  await new Promise((r) => setTimeout(r, 30));
  inDecode.abort();
  await new Promise((r) => setTimeout(r, 5));
  inPrefill.abort();
  const [d, p, a] = await Promise.all([decode, prefill, after]);
  t.equal(d[0].outputs[0].finishReason, 'abort');
  t.equal(p[0].outputs[0].finishReason, 'abort');
  t.same(a[0].outputs[0].tokenIds, want.outputs[0].tokenIds, 'the next request, in the reused slot, equals its run alone');
  const s = llm.stats();
  t.equal(s.kvBlocksUsed, 0);
  t.equal(s.running + s.waiting, 0);
});
