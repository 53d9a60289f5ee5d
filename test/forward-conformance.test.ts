// Forward-pass conformance against llama.cpp (node-llama-cpp, CPU, no flash attention, F32 KV cache).
// For each architecture / tokenizer and weight type: a prompt plus llama.cpp's greedy continuation is
// teacher-forced through both engines; Spindle's logits (debugForward, every position) are compared with
// llama.cpp's raw logits at every position (its top-K plus Spindle's top-K tokens), and over the whole
// vocabulary at the last position. Units: raw logits throughout (no softmax anywhere).
//
// Two tiers, picked from the machine (see TOLERANCE below):
//  - exact: the CPU runs llama.cpp's prebuilt "haswell" backend (AVX2 + FMA + F16C, no AVX-512, no AVX-VNNI)
//    and Spindle its avx2 kernels, which perform the same IEEE operations in the same order (activation
//    conversion to the weight's vec_dot type, the FMA contractions of the compiled ggml code, tinyBLAS /
//    vec_dot / repacked-gemm reduction orders, ggml's vectorized expf in softmax and SiLU). Every compared
//    logit must then be bit-identical. (Derived from node-llama-cpp 3.22.1's prebuilt binaries: a llama.cpp
//    upgrade that changes an op's arithmetic shows up here first; native/backend/cpu/ops_avx2.cpp and
//    vec_dot_avx2.cpp say which ggml code each kernel follows.)
//  - approximate: any other CPU or kernel level. Results then differ by summation order and expf/FMA rounding
//    (~1e-7 relative per op), which activation rounding amplifies (see TOLERANCE).
// llama.cpp's repacked Q4_K gemm rounds the rows of a batch in groups of 4 and the last n % 4 rows through its
// gemv, which steps its f32 sum per super-block instead of per 64 values (its own result for a token depends
// on the batch size). Spindle matches the gemm; so the teacher batch is padded with filler tokens after the
// last compared one (causal attention: they cannot change earlier positions) to a multiple of 4 tokens, and the
// fillers ask for outputs too (llama.cpp runs the last layer's matmuls on the output rows only).
import t from 'tap';
import { getLlama } from 'node-llama-cpp';
import { compareLogits, conformanceTier, llamaCppReference, type Comparison, type Tier } from './helpers/conformance.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureModel } from './helpers/fixtures.js';

type Arch = 'llama' | 'qwen2' | 'qwen3';
type Tok = 'llama3' | 'llama2' | 'qwen3';
type Weights = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | 'Q4_K_M' | 'Q6_K';

const MODELS: { label: string; arch: Arch; tokenizer: Tok; tied: boolean }[] = [
  { label: 'llama (llama3 tok)', arch: 'llama', tokenizer: 'llama3', tied: false },
  { label: 'llama (llama2 tok)', arch: 'llama', tokenizer: 'llama2', tied: false },
  { label: 'qwen2 (qwen3 tok)', arch: 'qwen2', tokenizer: 'qwen3', tied: false },
  { label: 'qwen3 (qwen3 tok)', arch: 'qwen3', tokenizer: 'qwen3', tied: true },
];
const WEIGHTS: Weights[] = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K_M', 'Q6_K'];

const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const N_GENERATE = 32;
interface Tolerance {
  maxDiff: number; // max |logit difference| over the compared tokens
  minAgreement: number; // argmax agreement rate over the positions that are not near-ties
  why: string;
}
// Stated tolerances and their reasons. Approximate-tier numbers: measured with SPINDLE_CPU_FEATURES=scalar
// (plain C++ kernels: other summation orders, libm expf, no FMA) against llama.cpp's haswell build, plus margin.
const TOLERANCE: Record<Tier, Record<'F32' | 'F16' | 'BF16' | 'quant', Tolerance>> = {
  exact: {
    F32: { maxDiff: 0, minAgreement: 1, why: 'same IEEE operation sequence' },
    F16: { maxDiff: 0, minAgreement: 1, why: 'same IEEE operation sequence' },
    BF16: { maxDiff: 0, minAgreement: 1, why: 'same IEEE operation sequence' },
    quant: { maxDiff: 0, minAgreement: 1, why: 'same IEEE operation sequence' },
  },
  approximate: {
    F32: { maxDiff: 1e-3, minAgreement: 1, why: 'f32 rounding only (~1e-7 per op), nothing amplifies it' },
    F16: {
      maxDiff: 0.02, minAgreement: 1,
      why: 'a 1-ulp input difference can flip the f16 rounding of an activation (2^-11 relative) before each matmul',
    },
    BF16: {
      maxDiff: 0.2, minAgreement: 1,
      why: 'as F16, with bf16 activation rounding of 2^-8 relative',
    },
    quant: {
      maxDiff: 1.5, minAgreement: 0.9,
      why: 'a 1-ulp input difference can flip a q8 activation rounding (amax/127 of a block) before each matmul',
    },
  },
};

function toleranceFor(tier: Tier, w: Weights): Tolerance {
  return TOLERANCE[tier][w === 'F32' || w === 'F16' || w === 'BF16' ? w : 'quant'];
}

type Row = Comparison & { model: string; weights: Weights };

function table(rows: Row[]): string {
  const head = '| model | weights | argmax agree (non-tie) | argmax agree (all) | llama.cpp greedy tokens reproduced | ' +
    'bit-identical positions | max |Δlogit| (top-K, all pos) | max |Δlogit| (full vocab, last pos) |';
  const sep = '|---|---|---|---|---|---|---|---|';
  const lines = rows.map((r) =>
    `| ${r.model} | ${r.weights} | ${r.agree}/${r.compared} | ${r.agreeAll}/${r.positions} | ${r.greedy}/${N_GENERATE} | ` +
    `${r.identical}/${r.positions} | ${r.maxDiff.toExponential(2)} | ${r.maxDiffLast.toExponential(2)} |`);
  return [head, sep, ...lines].join('\n');
}

t.test('forward conformance with llama.cpp', async (t) => {
  const addon = debugAddon();
  const level = addon.debugCpuLevel();
  const tier: Tier = conformanceTier(level);
  t.comment(`tier: ${tier} (Spindle kernel level ${level})`);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
  const rows: Row[] = [];
  const ms = { fixture: 0, llamaGenerate: 0, spindle: 0, llamaTeacher: 0 }; // wall time per phase
  const timed = async <T>(phase: keyof typeof ms, f: () => T | Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await f();
    } finally {
      ms[phase] += performance.now() - t0;
    }
  };
  for (const m of MODELS) {
    for (const weights of WEIGHTS) {
      const kQuant = weights === 'Q4_K_M' || weights === 'Q6_K';
      const path = await timed('fixture', () => fixtureModel({
        arch: m.arch, tokenizer: m.tokenizer, weights, nEmbd: kQuant ? 256 : 64, nLayer: 2, nHead: 4, nHeadKv: 2,
        nFf: kQuant ? 512 : 128, tiedEmbeddings: m.tied, seed: 7,
      }));
      const ref = await timed('llamaGenerate', () => llamaCppReference(llama, path, PROMPT, N_GENERATE));
      try {
        const ours = await timed('spindle', () => addon.debugForward(path, Int32Array.from(ref.tokens), { threads: 2 }));
        const nVocab = ours.length / ref.tokens.length;
        t.ok(Number.isInteger(nVocab) && ours.every(Number.isFinite), `${m.label} ${weights}: finite logits`);
        const teacher = await timed('llamaTeacher', () => ref.teacher(ours, nVocab));
        const r: Row = { model: m.label, weights, ...compareLogits(ref.tokens, ref.nPrompt, ours, nVocab, teacher) };
        rows.push(r);
        const tol = toleranceFor(tier, weights);
        t.ok(r.compared >= ref.tokens.length / 2, `${m.label} ${weights}: most positions are not near-ties`);
        t.ok(r.agree >= Math.ceil(tol.minAgreement * r.compared),
          `${m.label} ${weights}: argmax agreement ${r.agree}/${r.compared} >= ${tol.minAgreement * 100}% (${tier})`);
        t.ok(r.maxDiff <= tol.maxDiff,
          `${m.label} ${weights}: max |logit diff| ${r.maxDiff} <= ${tol.maxDiff} (${tier}: ${tol.why})`);
      } finally {
        await ref.dispose();
      }
    }
  }
  t.comment(`Spindle vs llama.cpp (node-llama-cpp 3.22.1, CPU, flashAttention off, F32 KV cache, raw logits), ` +
    `tier ${tier}, Spindle kernels ${level}\n${table(rows)}`);
  t.comment(`wall time (ms): ${Object.entries(ms).map(([k, v]) => `${k} ${Math.round(v)}`).join(', ')}`);
  await llama.dispose();
});
