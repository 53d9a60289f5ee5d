// Conformance of the hybrid architectures lfm2 (gated short convolutions + GQA attention) and lfm2moe (the same
// with mixture-of-experts FFNs: sigmoid router, selection bias, top-k renormalized) with llama.cpp
// (node-llama-cpp 3.22.1, CPU, no flash attention, F32 KV cache), on generated fixtures in F32 and Q4_K_M:
//  - tokenization: identical token ids for a set of strings (special tokens parsed and not);
//  - chat prompt: the token ids `llm.chat()` feeds the model equal those a LlamaChatSession evaluates;
//  - teacher forcing: the prompt plus llama.cpp's 32-token greedy continuation goes through both engines;
//    argmax agreement per position, llama.cpp greedy tokens reproduced, max |logit difference| (raw logits over
//    llama.cpp's top-K plus ours at every position, the whole vocabulary at the last one), and llama.cpp's
//    top-1 minus top-2 gap at every position where the argmaxes differ.
// The fixtures use the Llama 3 tokenizer (no LFM2 tokenizer package is available; LFM2's own pre-tokenizer
// "lfm2" is llama.cpp's LLAMA3 pre-tokenizer type, so the BPE path is the same) and LFM2's layer pattern
// (attention at layers 2 and 5 of 6, conv length 3); a third fixture uses conv length 5 with attention at 1 and
// 3, which exercises the other reduction order of ggml_ssm_conv (a rounded group of 4 taps, then an FMA).
// lfm2moe: 16 experts, top 4, layer 0 dense (leading_dense_block_count 1), the rest MoE.
// Tiers (test/helpers/conformance.ts): exact = every compared logit bit-identical; approximate = stated bounds.
import t from 'tap';
import { getLlama, LlamaLogLevel, type ChatHistoryItem } from 'node-llama-cpp';
import { LLM } from '../lib/index.js';
import type { ModelSpec } from './tooling/fixtures/index.js';
import {
  checkComparison, checkTokenization, compareLogits, conformanceTier, conformanceTable, llamaChatPromptTokens, llamaCppReference,
  type TableRow, type Tier, type Tolerance,
} from './helpers/conformance.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureModel } from './helpers/fixtures.js';

type Weights = 'F32' | 'Q4_K_M';
const LFM2 = { arch: 'lfm2', tokenizer: 'llama3', nLayer: 6, nHead: 4, nHeadKv: 2, tiedEmbeddings: true, seed: 7 } as const;
const LFM2MOE = { ...LFM2, arch: 'lfm2moe', nExpert: 16, nExpertUsed: 4, leadingDenseBlocks: 1, seed: 9 } as const;
/** The fixtures (test/batch-invariance-lfm2.test.ts uses the same first F32 spec). */
const LFM2_SPECS: { label: string; weights: Weights; spec: ModelSpec }[] = [
  { label: 'lfm2 (l_cache 3, attn 2,5)', weights: 'F32', spec: { ...LFM2, weights: 'F32', nEmbd: 64, nFf: 128 } },
  { label: 'lfm2 (l_cache 3, attn 2,5)', weights: 'Q4_K_M', spec: { ...LFM2, weights: 'Q4_K_M', nEmbd: 256, nFf: 512 } },
  {
    label: 'lfm2 (l_cache 5, attn 1,3)', weights: 'F32',
    spec: { ...LFM2, weights: 'F32', nEmbd: 64, nFf: 128, nLayer: 4, shortConvLCache: 5, attentionLayers: [1, 3], seed: 8 },
  },
  { label: 'lfm2moe (16 experts, top 4)', weights: 'F32', spec: { ...LFM2MOE, weights: 'F32', nEmbd: 64, nFf: 128, nFfExp: 64 } },
  { label: 'lfm2moe (16 experts, top 4)', weights: 'Q4_K_M', spec: { ...LFM2MOE, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, nFfExp: 256 } },
];

const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const STRINGS = [PROMPT, 'Hello, world!', '  leading spaces and\ttabs\n', '你好，世界！', "don't 1234567 3.14",
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>', 'x<|eot_id|>y'];
const N_GENERATE = 32;

// Stated tolerances. Approximate: measured with SPINDLE_CPU_FEATURES=scalar against the haswell build (lfm2 F32
// 8.6e-5, Q4_K_M 0.096, all argmaxes equal), plus margin; MoE as test/forward-conformance-moe.test.ts (an expert
// choice can flip where two router scores are within rounding of each other).
type Kind = 'lfm2' | 'lfm2moe';
const EXACT = { maxDiff: 0, minAgreement: 1, why: 'same IEEE operation sequence, short convolution and experts included' };
const TOLERANCE: Record<Tier, Record<Kind, Record<Weights, Tolerance>>> = {
  exact: { lfm2: { F32: EXACT, Q4_K_M: EXACT }, lfm2moe: { F32: EXACT, Q4_K_M: EXACT } },
  approximate: {
    lfm2: {
      F32: { maxDiff: 1e-3, minAgreement: 1, why: 'f32 rounding only (~1e-7 per op), nothing amplifies it' },
      Q4_K_M: { maxDiff: 1.5, minAgreement: 0.9, why: 'a 1-ulp input difference can flip a q8 activation rounding before each matmul' },
    },
    lfm2moe: {
      F32: { maxDiff: 1e-3, minAgreement: 1, why: 'f32 rounding only; router scores are far apart at that scale' },
      Q4_K_M: { maxDiff: 3, minAgreement: 0.85, why: 'q8 activation rounding flips, and expert flips at close router scores' },
    },
  },
};

const HISTORY: ChatHistoryItem[] = [
  { type: 'system', text: 'You are terse.' }, { type: 'user', text: 'Hi there' }, { type: 'model', response: ['Hello!'] },
];



t.test('lfm2 conformance with llama.cpp: tokenization, chat prompt, teacher-forced logits', async (t) => {
  const addon = debugAddon();
  const level = addon.debugCpuLevel();
  const tier = conformanceTier(level);
  t.comment(`tier: ${tier} (Spindle kernel level ${level})`);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const rows: TableRow[] = [];
  for (const { label, weights, spec } of LFM2_SPECS) {
    const name = `${label} ${weights}`;
    const path = await fixtureModel(spec);
    const ref = await llamaCppReference(llama, path, PROMPT, N_GENERATE);
    let row: TableRow;
    try {
      const tok = addon.Tokenizer.fromFile(path);
      const tokenization = checkTokenization(t, name, (s, a, sp) => tok.encode(s, a, sp), ref.model, STRINGS);
      const ours = addon.debugForward(path, Int32Array.from(ref.tokens), { threads: 2 });
      const nVocab = ours.length / ref.tokens.length;
      t.ok(Number.isInteger(nVocab) && ours.every(Number.isFinite), `${name}: finite logits`);
      const c = compareLogits(ref.tokens, ref.nPrompt, ours, nVocab, await ref.teacher(ours, nVocab));
      row = { ...c, label, weights, tokenization, chatPrompt: '' };
      checkComparison(t, name, c, ref.tokens, ref.nPrompt, TOLERANCE[tier][spec.arch as Kind][weights], tier);
    } finally {
      await ref.dispose();
    }

    // chat prompt: what llm.chat feeds the model == what a LlamaChatSession evaluates
    const llm = new LLM({ model: path, maxModelLen: 512, threads: 1 });
    const [chat] = await llm.chat([{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hi there' },
      { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'Bye' }], { temperature: 0, maxTokens: 1 });
    await llm.close();
    const evaluated = await llamaChatPromptTokens(llama, path, HISTORY, 'Bye');
    t.same(chat.promptTokenIds, evaluated.tokens, `${name}: identical chat prompt tokens (${evaluated.wrapper} wrapper)`);
    row.chatPrompt = JSON.stringify(chat.promptTokenIds) === JSON.stringify(evaluated.tokens)
      ? `identical (${evaluated.tokens.length} tokens)` : 'DIFFERENT';
    rows.push(row);
  }
  t.comment(`Spindle vs llama.cpp, tier ${tier}, Spindle kernels ${level}\n${conformanceTable(rows, N_GENERATE)}`);
  await llama.dispose();
});
