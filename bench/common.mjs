// What the benchmark scripts share: the performance-shaped fixture models (generated once into bench/.models/,
// named by a hash of their spec and the generator's fingerprint), deterministic prompt ids, the median, and the
// streaming-read memory bandwidth that sets the decode floor (bench/membw/membw.cpp, compiled on first use).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { generateModel, generatorFingerprint } from '../dist-tooling/test/tooling/fixtures/index.js';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const llama1b = { arch: 'llama', tokenizer: 'llama3', nEmbd: 2048, nLayer: 16, nHead: 32, nHeadKv: 8, nFf: 8192, tiedEmbeddings: true, seed: 11 };
const qwen06b = { arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 1024, nLayer: 28, nHead: 16, nHeadKv: 8, headDim: 128, nFf: 3072, tiedEmbeddings: true, seed: 12 };
// LFM2-1.2B shape as issue 6 gives it (vocabulary: the Llama 3 tokenizer's 128256 instead of LFM2's 65536; no
// LFM2 tokenizer package exists here). A small Qwen3-MoE shape: 16 experts of width 768, 4 per token.
const lfm2_12b = { arch: 'lfm2', tokenizer: 'llama3', nEmbd: 2048, nLayer: 16, nHead: 32, nHeadKv: 8, nFf: 8192, attentionLayers: [2, 5, 8, 10, 12, 14], shortConvLCache: 3, ropeFreqBase: 1e6, tiedEmbeddings: true, seed: 13 };
const qwen3moeSmall = { arch: 'qwen3moe', tokenizer: 'qwen3', nEmbd: 1024, nLayer: 16, nHead: 16, nHeadKv: 4, headDim: 128, nFf: 3072, nExpert: 16, nExpertUsed: 4, nFfExp: 768, tiedEmbeddings: false, seed: 14 };
// Gemma 3 1B's shape (google/gemma-3-1b-it config.json): 26 layers, 4 heads of 256 over one KV head, a 512-position
// sliding window on five layers of six, its own 262144-token vocabulary.
const gemma3_1b = { arch: 'gemma3', tokenizer: 'gemma3', nEmbd: 1152, nLayer: 26, nHead: 4, nHeadKv: 1, headDim: 256, nFf: 6912, slidingWindow: 512, seed: 16 };
export const MODELS = {
  'gemma3-1b-q4_k_m': { ...gemma3_1b, weights: 'Q4_K_M' },
  'lfm2-1.2b-q4_k_m': { ...lfm2_12b, weights: 'Q4_K_M' },
  'qwen3moe-small-q4_k_m': { ...qwen3moeSmall, weights: 'Q4_K_M' },
  'llama1b-q4_k_m': { ...llama1b, weights: 'Q4_K_M' },
  'llama1b-q8_0': { ...llama1b, weights: 'Q8_0' },
  // issue 18's comparison set: llama-quantize's Q5_K_M, Q6_K and Q3_K_M of the same shape
  'llama1b-q5_k_m': { ...llama1b, weights: 'Q5_K_M' },
  'llama1b-q6_k': { ...llama1b, weights: 'Q6_K' },
  'llama1b-q3_k_m': { ...llama1b, weights: 'Q3_K_M' },
  // pure files of the other types (issue 18's kernels) against llama.cpp
  'llama1b-q4_0': { ...llama1b, weights: 'Q4_0' },
  'llama1b-q4_1': { ...llama1b, weights: 'Q4_1' },
  'llama1b-q5_0': { ...llama1b, weights: 'Q5_0' },
  'llama1b-q5_1': { ...llama1b, weights: 'Q5_1' },
  'llama1b-iq4_nl': { ...llama1b, weights: 'IQ4_NL' },
  'llama1b-iq4_xs': { ...llama1b, weights: 'IQ4_XS' },
  'llama1b-q2_k': { ...llama1b, weights: 'Q2_K' },
  'qwen3-0.6b-q8_0': { ...qwen06b, weights: 'Q8_0' },
  // a tiny draft model with the Llama 3 vocabulary (speculative decoding's draft-model path)
  'llama-draft-tiny-q8_0': { arch: 'llama', tokenizer: 'llama3', nEmbd: 256, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 512,
    tiedEmbeddings: true, seed: 15, weights: 'Q8_0' },
};

export async function modelPath(name) {
  const spec = MODELS[name];
  if (!spec) throw new Error(`unknown model ${name}; known: ${Object.keys(MODELS).join(', ')}`);
  // The file name carries a hash of the spec and the generator's fingerprint: a changed generator never reuses a stale file.
  const key = createHash('sha256').update(JSON.stringify(spec)).update(generatorFingerprint()).digest('hex').slice(0, 12);
  const path = join(root, 'bench', '.models', `${name}-${key}.gguf`);
  if (existsSync(path)) return path;
  mkdirSync(dirname(path), { recursive: true });
  const t0 = performance.now();
  await generateModel({ ...spec, name }, path + '.tmp');
  renameSync(path + '.tmp', path);
  console.error(`generated ${path} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return path;
}

// Deterministic prompt ids avoiding the special-token range (ids below 1000 are ordinary text tokens in
// both the Llama 3 and Qwen vocabularies).
export const promptIds = (n, salt) => Array.from({ length: n }, (_, i) => 1000 + ((i * 7919 + salt * 104729) % 20000));

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// Streaming-read bandwidth on `threads` threads (GB/s), compiled from bench/membw/membw.cpp on first use.
export function measureBandwidth(threads) {
  const bin = join(root, 'bench', '.build', 'membw');
  const src = join(root, 'bench', 'membw', 'membw.cpp');
  if (!existsSync(bin) || statSync(bin).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(dirname(bin), { recursive: true });
    execFileSync('g++', ['-O3', '-march=native', '-std=c++17', src, '-o', bin, '-lpthread']);
  }
  return JSON.parse(execFileSync(bin, [String(threads), '1024', '7'], { encoding: 'utf8' })).gbps;
}


/**
 * Runs each engine's timed job once to warm up, then `reps` times alternating engine by engine; returns the best
 * seconds and the last result of each. `runs`: { name: async () => ({ seconds, ...result }) }.
 */
export async function bestOfAlternating(runs, reps) {
  const best = {};
  const last = {};
  for (const [name, run] of Object.entries(runs)) { await run(); best[name] = Infinity; } // warm-up (packs the weights)
  for (let r = 0; r < reps; r++) {
    for (const [name, run] of Object.entries(runs)) {
      const x = await run();
      best[name] = Math.min(best[name], x.seconds);
      last[name] = x;
    }
  }
  return { best, last };
}
