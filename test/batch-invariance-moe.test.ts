// Batch invariance of the engine on a mixture-of-experts model (qwen3moe, 16 experts, top 4): 32 prompts of
// mixed lengths (3..300 tokens) give the same token ids batched as one at a time, greedy and seeded; also with
// chunked prefill, and with a KV budget so small that the scheduler queues and preempts (recompute). In a batch
// the MoE block groups tokens by expert, so which tokens share an expert matmul changes from step to step;
// each token's output must not.
import t from 'tap';
import { LLM } from '../lib/index.js';
import type { ModelSpec } from '../lib/fixtures/index.js';
import { fixtureModel } from './helpers/fixtures.js';

// The F32 fixture of test/forward-conformance-moe.test.ts (same spec: the cached file is shared).
const SPECS: { label: string; spec: ModelSpec; headDim: number }[] = [
  { label: 'F32', headDim: 16, spec: { arch: 'qwen3moe', tokenizer: 'qwen3', nLayer: 2, nHead: 4, nHeadKv: 2, nExpert: 16,
    nExpertUsed: 4, seed: 7, weights: 'F32', nEmbd: 64, nFf: 128, nFfExp: 64 } },
  { label: 'Q4_K_M', headDim: 64, spec: { arch: 'qwen3moe', tokenizer: 'qwen3', nLayer: 2, nHead: 4, nHeadKv: 2, nExpert: 16,
    nExpertUsed: 4, seed: 7, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, nFfExp: 256 } },
];
const MAX_LEN = 320;
const OUT = 12;

function prompts(nVocab: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < 32; i++) {
    const len = 3 + ((i * 97) % 298); // 3..300
    out.push(Array.from({ length: len }, (_, j) => 3 + ((i * 131 + j * 17) % (nVocab - 3))));
  }
  return out;
}

async function run(model: string, opts: Record<string, unknown>, ps: number[][], params: object[], oneAtATime: boolean) {
  const llm = new LLM({ model, maxModelLen: MAX_LEN, threads: 2, ...opts });
  try {
    await llm.ready();
    const inputs = ps.map((p) => ({ promptTokenIds: p }));
    let ids: number[][];
    if (oneAtATime) {
      ids = [];
      for (let i = 0; i < inputs.length; i++) ids.push((await llm.generate(inputs[i], params[i]))[0].outputs[0].tokenIds);
    } else {
      ids = (await llm.generate(inputs, params)).map((o) => o.outputs[0].tokenIds);
    }
    return { ids, stats: llm.stats() };
  } finally {
    await llm.close();
  }
}

for (const { label, spec, headDim } of SPECS) {
  t.test(`qwen3moe ${label}: 32 mixed prompts batched == one at a time (greedy + seeded), chunked on/off, tight KV with preemption`, async (t) => {
    const model = await fixtureModel(spec);
    const probe = new LLM({ model, maxModelLen: MAX_LEN, threads: 2 });
    await probe.ready();
    const ps = prompts(probe.modelInfo.nVocab);
    await probe.close();
    const params = ps.map((_, i) => (i % 2 === 0
      ? { temperature: 0, maxTokens: OUT, ignoreEos: true }
      : { temperature: 0.9, topK: 20, seed: 1000 + i, maxTokens: OUT, ignoreEos: true }));
    const alone = await run(model, {}, ps, params, true);
    t.ok(new Set(alone.ids.flat()).size > 32, 'the outputs are varied');
    const batched = await run(model, { chunkedPrefillSize: -1 }, ps, params, false);
    t.same(batched.ids, alone.ids, 'batched, prompts never split');
    const chunked = await run(model, { chunkedPrefillSize: 64, maxNumBatchedTokens: 256 }, ps, params, false);
    t.same(chunked.ids, alone.ids, 'batched, chunked prefill');
    // KV for just 2 max-length sequences (f32 K and V of every layer), so 32 requests must queue and preempt
    const bytesPerToken = spec.nLayer * spec.nHeadKv * headDim * 2 * 4;
    const tight = await run(model, { chunkedPrefillSize: 32, maxNumBatchedTokens: 128, kvCacheMemory: 2 * MAX_LEN * bytesPerToken },
      ps, params, false);
    t.same(tight.ids, alone.ids, 'batched with a tight KV budget');
    t.ok(tight.stats.preemptions > 0, `preemptions happened (${tight.stats.preemptions})`);
    t.equal(tight.stats.kvBlocksUsed, 0, 'every KV block free afterwards');
  });
}
