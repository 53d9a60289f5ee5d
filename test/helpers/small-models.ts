// Small fixture specs shared by the engine-level tests (prefix caching, speculative decoding): one per model family.
// LFM2: 6 layers, attention at 2 and 5, short conv elsewhere.
export const DENSE = { arch: 'llama', tokenizer: 'llama2', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 21 } as const;
export const MOE = { arch: 'qwen3moe', tokenizer: 'qwen3', nLayer: 2, nHead: 4, nHeadKv: 2, nExpert: 16, nExpertUsed: 4, seed: 7,
  weights: 'F32', nEmbd: 64, nFf: 128, nFfExp: 64 } as const;
export const LFM2 = { arch: 'lfm2', tokenizer: 'llama2', nEmbd: 64, nLayer: 6, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32',
  tiedEmbeddings: true, seed: 21 } as const;
export const LFM2MOE = { ...LFM2, arch: 'lfm2moe', nExpert: 16, nExpertUsed: 4, nFfExp: 64, leadingDenseBlocks: 1, seed: 22 } as const;
