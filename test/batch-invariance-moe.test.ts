// Batch invariance of the engine on a mixture-of-experts model (qwen3moe, 16 experts, top 4): 32 prompts of
// mixed lengths (3..300 tokens) give the same token ids batched as one at a time, greedy and seeded; also with
// chunked prefill, and with a KV budget so small that the scheduler queues and preempts (recompute). In a batch
// the MoE block groups tokens by expert, so which tokens share an expert matmul changes from step to step;
// each token's output must not.
import t from 'tap';
import type { ModelSpec } from './tooling/fixtures/index.js';
import { checkBatchInvariance, MAX_LEN } from './helpers/batch-invariance.js';
import { fixtureModel } from './helpers/fixtures.js';

// The F32 fixture of test/forward-conformance-moe.test.ts (same spec: the cached file is shared).
const SPECS: { label: string; spec: ModelSpec; headDim: number }[] = [
  { label: 'F32', headDim: 16, spec: { arch: 'qwen3moe', tokenizer: 'qwen3', nLayer: 2, nHead: 4, nHeadKv: 2, nExpert: 16,
    nExpertUsed: 4, seed: 7, weights: 'F32', nEmbd: 64, nFf: 128, nFfExp: 64 } },
  { label: 'Q4_K_M', headDim: 64, spec: { arch: 'qwen3moe', tokenizer: 'qwen3', nLayer: 2, nHead: 4, nHeadKv: 2, nExpert: 16,
    nExpertUsed: 4, seed: 7, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, nFfExp: 256 } },
];
for (const { label, spec, headDim } of SPECS) {
  t.test(`qwen3moe ${label}: 32 mixed prompts batched == one at a time (greedy + seeded), chunked on/off, tight KV with preemption`, async (t) => {
    // KV for just 2 max-length sequences (float16 K and V of every layer: the CPU's default), so 32 requests must
    // queue and preempt
    const bytesPerToken = spec.nLayer * spec.nHeadKv * headDim * 2 * 2;
    await checkBatchInvariance(t, await fixtureModel(spec), {
      minDistinct: 32,
      tight: { chunkedPrefillSize: 32, maxNumBatchedTokens: 128, kvCacheMemory: 2 * MAX_LEN * bytesPerToken },
    });
  });
}
