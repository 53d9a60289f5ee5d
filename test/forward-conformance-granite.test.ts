// Conformance of granite (IBM Granite 3.x dense: the llama graph with an embedding scale, an attention scale in
// place of 1 / sqrt(head_dim), a residual scale on each attention and FFN output, and logits divided by a logit
// scale; granite-3.3-2b-instruct's values, test/tooling lib/random-model/dense.ts GRANITE) with llama.cpp
// (node-llama-cpp, CPU, no flash attention, F32 KV cache), on generated fixtures with the Llama 3 tokenizer: the
// prompt plus llama.cpp's 32-token greedy continuation teacher-forced through both engines; argmax agreement per
// position, llama.cpp's greedy tokens reproduced, max |logit difference|. The tolerances are the llama fixtures'
// (forward-conformance.test.ts, approximate tier): the four scalars are single float multiplies in both engines.
import t from 'tap';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import type { ModelSpec } from './tooling/fixtures/index.js';
import {
  checkComparison, compareLogits, conformanceTier, conformanceTable, llamaCppReference, type TableRow, type Tolerance,
} from './helpers/conformance.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureModel } from './helpers/fixtures.js';

type Weights = 'F32' | 'Q8_0' | 'Q4_K_M';
const GRANITE = { arch: 'granite', tokenizer: 'llama3', nEmbd: 256, nLayer: 4, nHead: 4, nHeadKv: 2, nFf: 512, seed: 21 } as const;
const SPECS: { weights: Weights; spec: ModelSpec }[] = [
  { weights: 'F32', spec: { ...GRANITE, weights: 'F32' } },
  { weights: 'Q8_0', spec: { ...GRANITE, weights: 'Q8_0' } },
  { weights: 'Q4_K_M', spec: { ...GRANITE, weights: 'Q4_K_M' } },
];
const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const N_GENERATE = 32;
const TOLERANCE: Record<Weights, Tolerance> = {
  F32: { maxDiff: 1e-3, minAgreement: 1, why: 'summation order (the approximate tier)' },
  Q8_0: { maxDiff: 1.5, minAgreement: 0.9, why: 'a 1-ulp input difference can flip a q8 activation rounding before each matmul' },
  Q4_K_M: { maxDiff: 1.5, minAgreement: 0.9, why: 'a 1-ulp input difference can flip a q8 activation rounding before each matmul' },
};

t.test('granite conformance with llama.cpp: teacher-forced logits', async (t) => {
  const addon = debugAddon();
  const level = addon.debugCpuLevel();
  t.comment(`tier: ${conformanceTier(level)} (Spindle kernel level ${level})`);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const rows: TableRow[] = [];
  for (const { weights, spec } of SPECS) {
    const name = `granite ${weights}`;
    const path = await fixtureModel(spec);
    const ref = await llamaCppReference(llama, path, PROMPT, N_GENERATE);
    try {
      const ours = addon.debugForward(path, Int32Array.from(ref.tokens), { threads: 2 });
      const nVocab = ours.length / ref.tokens.length;
      t.ok(Number.isInteger(nVocab) && ours.every(Number.isFinite), `${name}: finite logits`);
      const c = compareLogits(ref.tokens, ref.nPrompt, ours, nVocab, await ref.teacher(ours, nVocab));
      rows.push({ ...c, label: 'granite', weights, tokenization: '', chatPrompt: '' });
      checkComparison(t, name, c, ref.tokens, ref.nPrompt, TOLERANCE[weights]);
    } finally {
      await ref.dispose();
    }
  }
  t.comment(`Spindle vs llama.cpp (granite), Spindle kernels ${level}\n${conformanceTable(rows, N_GENERATE)}`);
  await llama.dispose();
});
