// Forward-pass conformance against llama.cpp (node-llama-cpp, CPU, no flash attention, F32 KV cache) for the
// weight types added after the first five: Q4_1, Q5_0, Q5_1, IQ4_NL (32-value blocks) and Q2_K, Q3_K, Q5_K, IQ4_XS
// (256-value super-blocks), all through AVX2 kernels with llama.cpp's arithmetic (Q5_0: its tinyBLAS; IQ4_NL: its
// repacked gemv / gemm; Q4_1, Q5_1, Q3_K, Q5_K, IQ4_XS: its vec_dot; Q2_K: its vec_dot, and on AVX-512 CPUs its
// repacked gemv / gemm, as llama.cpp picks). Each fixture is written pure (every 2-D tensor in the type,
// token embeddings and output included, so the embedding lookup of the type is exercised too), for a llama
// shape (SentencePiece tokenizer, untied output), a qwen3 shape (q/k norms, tied embeddings) and an lfm2 shape
// (short-convolution layers beside attention ones, tied embeddings). Method as
// test/forward-conformance.test.ts: llama.cpp's greedy continuation of a prompt is teacher-forced through both
// engines and the raw logits are compared at every position (llama.cpp's top-K and ours; the whole vocabulary at
// the last position).
// Tolerance (one tier): where an output's float order is not llama.cpp's (kernels of other shapes, f32 rounding
// elsewhere in the layer; same integer block sums, same activation formats), logits differ by f32 rounding that a
// flipped q8 activation rounding (amax/127 of a block) in a later layer can amplify, as for the approximate tier of the
// other quantized types.
import t from 'tap';
import { getLlama } from 'node-llama-cpp';
import { compareLogits, llamaCppReference, type Comparison } from './helpers/conformance.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureModel } from './helpers/fixtures.js';
import { LATER_QUANT_WEIGHTS, type FixtureWeights, type LaterQuantWeights } from './tooling/fixtures/spec.js';

const MODELS = [
  { label: 'llama (llama2 tok)', arch: 'llama', tokenizer: 'llama2', tiedEmbeddings: false, nLayer: 2 },
  { label: 'qwen3 (qwen3 tok)', arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true, nLayer: 2 },
  // short-conv layers 0, 1, 3, 4 and attention layers 2, 5
  { label: 'lfm2 (llama3 tok)', arch: 'lfm2', tokenizer: 'llama3', tiedEmbeddings: true, nLayer: 6 },
] as const;
const SUPER_BLOCK: readonly LaterQuantWeights[] = ['Q2_K', 'Q3_K', 'Q5_K', 'IQ4_XS'];

const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const N_GENERATE = 24;
const TOLERANCE = {
  maxDiff: 1.5, minAgreement: 0.9,
  why: 'other f32 summation orders; a 1-ulp input difference can flip a q8 activation rounding before each matmul',
};

type Row = Comparison & { model: string; weights: string };

// llama-quantize's mixes (Q5_K_M, Q3_K_M, Q2_K: their attn_v / attn_output / ffn_down / output types differ from
// the base type, arch.ts) and the width fallbacks (rows of 160 and 288 values: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K ->
// Q8_0), on the llama and lfm2 shapes.
const MIXES: ReadonlyArray<{ weights: FixtureWeights; narrow: boolean }> = [
  { weights: 'Q5_K_M', narrow: false }, { weights: 'Q3_K_M', narrow: false }, { weights: 'Q2_K', narrow: false },
  { weights: 'Q4_K_M', narrow: true }, { weights: 'Q5_K_M', narrow: true },
];

function table(rows: Row[]): string {
  const head = '| model | weights | argmax agree (non-tie) | argmax agree (all) | llama.cpp greedy tokens reproduced | ' +
    'max |Δlogit| (top-K, all pos) | max |Δlogit| (full vocab, last pos) |';
  const lines = rows.map((r) =>
    `| ${r.model} | ${r.weights} | ${r.agree}/${r.compared} | ${r.agreeAll}/${r.positions} | ${r.greedy}/${N_GENERATE} | ` +
    `${r.maxDiff.toExponential(2)} | ${r.maxDiffLast.toExponential(2)} |`);
  return [head, '|---|---|---|---|---|---|---|', ...lines].join('\n');
}

t.test('forward conformance with llama.cpp for the reference-kernel weight types', async (t) => {
  const addon = debugAddon();
  t.comment(`Spindle kernel level ${addon.debugCpuLevel()} (these types use the reference kernels at every level)`);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
  const rows: Row[] = [];
  const cases = MODELS.flatMap((m) => [
    // every 2-D tensor in the type (pure), so each type's kernels and embedding lookup run
    ...LATER_QUANT_WEIGHTS.map((weights) => {
      const wide = SUPER_BLOCK.includes(weights);
      return { m, weights: weights as FixtureWeights, label: weights, pure: true, nEmbd: wide ? 256 : 64, nFf: wide ? 512 : 128 };
    }),
    ...(m.arch === 'qwen3' ? [] : MIXES.map(({ weights, narrow }) => ({
      m, weights, label: `${weights} mix${narrow ? ', 160/288-wide rows' : ''}`, pure: false,
      nEmbd: narrow ? 160 : 256, nFf: narrow ? 288 : 512,
    }))),
  ]);
  for (const { m, weights, label, pure, nEmbd, nFf } of cases) {
    {
      const name = `${m.label} ${label}`;
      const path = await fixtureModel({
        arch: m.arch, tokenizer: m.tokenizer, weights, nEmbd, nLayer: m.nLayer, nHead: 4, nHeadKv: 2,
        nFf, tiedEmbeddings: m.tiedEmbeddings, seed: 7, pure,
      });
      const ref = await llamaCppReference(llama, path, PROMPT, N_GENERATE);
      try {
        const ours = addon.debugForward(path, Int32Array.from(ref.tokens), { threads: 2 });
        const nVocab = ours.length / ref.tokens.length;
        t.ok(Number.isInteger(nVocab) && ours.every(Number.isFinite), `${name}: finite logits`);
        const r: Row = { model: m.label, weights: label, ...compareLogits(ref.tokens, ref.nPrompt, ours, nVocab, await ref.teacher(ours, nVocab)) };
        rows.push(r);
        t.ok(new Set(ref.tokens.slice(ref.nPrompt)).size > 1, `${name}: llama.cpp's continuation is not one repeated token`);
        t.ok(r.compared >= ref.tokens.length / 2, `${name}: most positions are not near-ties`);
        t.ok(r.agree >= Math.ceil(TOLERANCE.minAgreement * r.compared),
          `${name}: argmax agreement ${r.agree}/${r.compared} >= ${TOLERANCE.minAgreement * 100}%`);
        t.ok(r.maxDiff <= TOLERANCE.maxDiff, `${name}: max |logit diff| ${r.maxDiff} <= ${TOLERANCE.maxDiff} (${TOLERANCE.why})`);
      } finally {
        await ref.dispose();
      }
    }
  }
  t.comment(`Spindle vs llama.cpp (node-llama-cpp, CPU, flashAttention off, F32 KV cache, raw logits)\n${table(rows)}`);
  await llama.dispose();
});
