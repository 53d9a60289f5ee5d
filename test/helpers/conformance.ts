// Shared pieces of the forward-conformance tests against llama.cpp (node-llama-cpp, CPU, no flash attention,
// F32 KV cache): the comparison tier of this machine, llama.cpp's greedy continuation plus its teacher-forced
// logits, and the per-position comparison with Spindle's logits. Same method as test/forward-conformance.test.ts
// (see its header for the tiers and for why the teacher batch is padded to a multiple of 4 tokens).
// Units: raw logits throughout (no softmax anywhere).
import { readFileSync } from 'node:fs';
import type { Llama, LlamaModel, Token } from 'node-llama-cpp';

export type Tier = 'exact' | 'approximate';

export const TOP_K = 8; // tokens per position whose logits are compared (llama.cpp's top-K and ours)
export const NEAR_TIE = 0.05; // llama.cpp top-1 minus top-2 below this: exempt from the argmax checks
const BATCH_MULTIPLE = 4; // llama.cpp's repacked gemm takes activation rows in groups of 4

/** True when node-llama-cpp's CPU backend on this machine is its "haswell" build (AVX2 + FMA + F16C). */
export function runsLlamaCppHaswellBuild(): boolean {
  if (process.platform !== 'linux' || process.arch !== 'x64') return false;
  let flags: Set<string>;
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('flags'));
    flags = new Set(line?.split(':')[1]?.trim().split(/\s+/) ?? []);
  } catch {
    return false;
  }
  return ['avx2', 'fma', 'f16c', 'bmi2'].every((f) => flags.has(f)) && !flags.has('avx512f') && !flags.has('avx_vnni');
}

/** 'exact' when Spindle runs its avx2 kernels against llama.cpp's haswell build (bit-identical logits expected). */
export function conformanceTier(spindleKernelLevel: string): Tier {
  return spindleKernelLevel === 'avx2' && runsLlamaCppHaswellBuild() ? 'exact' : 'approximate';
}

/** Indices of the k largest values of row (descending; ties by lower index). */
export function topK(row: Float32Array, k: number): number[] {
  const idx: number[] = [];
  for (let i = 0; i < row.length; i++) {
    if (idx.length === k && row[i] <= row[idx[k - 1]]) continue;
    let j = Math.min(idx.length, k - 1);
    idx[j] = i;
    while (j > 0 && row[idx[j - 1]] < row[i]) {
      idx[j] = idx[j - 1];
      idx[j - 1] = i;
      j--;
    }
  }
  return idx;
}

export type TeacherOut = Map<Token, number>[]; // llama.cpp's logits per position (a token subset, all at the end)

export interface Reference {
  model: LlamaModel;
  tokens: number[]; // prompt (BOS included when the model adds one) + llama.cpp's greedy continuation
  nPrompt: number;
  /** Teacher-forces `tokens` in one batch; at each position asks for llama.cpp's top-K plus our top-K. */
  teacher: (ours: Float32Array, nVocab: number) => Promise<TeacherOut>;
  dispose: () => Promise<void>;
}

/** Loads the model in llama.cpp and generates its greedy continuation of `prompt` (step-by-step decoding). */
export async function llamaCppReference(llama: Llama, path: string, prompt: string, nGenerate: number): Promise<Reference> {
  const model = await llama.loadModel({ modelPath: path });
  const ctx = await model.createContext({
    contextSize: 128, batchSize: 128, threads: 1, flashAttention: false,
    experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
  });
  const seq = ctx.getSequence();
  const promptTokens = model.tokenize(prompt, false);
  const tokens: number[] = model.tokens.shouldPrependBosToken && model.tokens.bos != null
    ? [model.tokens.bos, ...promptTokens] : [...promptTokens];
  const nPrompt = tokens.length;
  let res = await seq.controlledEvaluate(
    tokens.map((tok, i) => (i === nPrompt - 1 ? [tok as Token, { generateNext: { token: true } }] : (tok as Token))));
  for (let i = 0; i < nGenerate; i++) {
    const next = res[res.length - 1]?.next.token;
    if (next == null) throw new Error(`llama.cpp generated no token at step ${i}`);
    tokens.push(next);
    if (i < nGenerate - 1) res = await seq.controlledEvaluate([[next, { generateNext: { token: true } }]]);
  }
  const teacher = async (ours: Float32Array, nVocab: number): Promise<TeacherOut> => {
    await seq.clearHistory();
    const last = tokens.length - 1;
    const items: Parameters<typeof seq.controlledEvaluate>[0] = tokens.map((tok, p) => {
      const ourTop = topK(ours.subarray(p * nVocab, (p + 1) * nVocab), TOP_K) as Token[];
      return [tok as Token, { generateNext: { logits: p === last ? true : { filter: { tokens: ourTop, includeTop: TOP_K } } } }];
    });
    // fillers ask for an output too: llama.cpp keeps only output rows for the last layer's matmuls
    const filler: (typeof items)[number] = [tokens[last] as Token, { generateNext: { logits: { filter: { tokens: [], includeTop: 1 } } } }];
    while (items.length % BATCH_MULTIPLE !== 0) items.push(filler);
    const out = await seq.controlledEvaluate(items);
    return out.slice(0, tokens.length).map((o) => {
      if (!o?.next.logits) throw new Error('llama.cpp returned no logits');
      return o.next.logits;
    });
  };
  return { model, tokens, nPrompt, teacher, dispose: async () => { await ctx.dispose(); await model.dispose(); } };
}

export interface Comparison {
  positions: number;
  agree: number; // argmax agreements among non-near-tie positions
  compared: number; // non-near-tie positions
  agreeAll: number; // argmax agreements over every position
  greedy: number; // generated tokens whose preceding position's argmax (ours) equals llama.cpp's pick
  identical: number; // positions whose compared logits are all bit-identical
  maxDiff: number; // max |logit difference| over llama.cpp top-K ∪ ours at every position, full vocab at the last
  maxDiffLast: number; // the same at the last position only (the full vocabulary)
  divergences: { pos: number; llamaGap: number }[]; // argmax differs: llama.cpp's top-1 minus top-2 there
}

/** Compares our logits [tokens, nVocab] with llama.cpp's teacher-forced ones, position by position. */
export function compareLogits(tokens: number[], nPrompt: number, ours: Float32Array, nVocab: number, ref: TeacherOut): Comparison {
  const c: Comparison = { positions: tokens.length, agree: 0, compared: 0, agreeAll: 0, greedy: 0, identical: 0, maxDiff: 0,
    maxDiffLast: 0, divergences: [] };
  for (let p = 0; p < tokens.length; p++) {
    const ourRow = ours.subarray(p * nVocab, (p + 1) * nVocab);
    const entries = [...ref[p].entries()].sort((a, b) => b[1] - a[1]); // llama.cpp's, highest first
    let d = 0;
    for (const [tok, logit] of entries) d = Math.max(d, Math.abs(logit - ourRow[tok]));
    if (d === 0) c.identical++;
    c.maxDiff = Math.max(c.maxDiff, d);
    if (p === tokens.length - 1) c.maxDiffLast = d;
    const ourArgmax = topK(ourRow, 1)[0];
    if (ourArgmax === entries[0][0]) c.agreeAll++;
    if (p >= nPrompt - 1 && p < tokens.length - 1 && ourArgmax === tokens[p + 1]) c.greedy++;
    const gap = entries.length >= 2 ? entries[0][1] - entries[1][1] : Infinity;
    if (ourArgmax !== entries[0][0]) c.divergences.push({ pos: p, llamaGap: gap });
    if (gap < NEAR_TIE) continue;
    c.compared++;
    if (ourArgmax === entries[0][0]) c.agree++;
  }
  return c;
}
