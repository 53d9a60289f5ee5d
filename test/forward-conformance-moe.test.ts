// Conformance of the mixture-of-experts architecture qwen3moe with llama.cpp (node-llama-cpp 3.22.1, CPU,
// no flash attention, F32 KV cache), on generated fixtures (16 experts, top 4) in F32 and Q4_K_M:
//  - tokenization: identical token ids for a set of strings (special tokens parsed and not);
//  - chat prompt: the token ids `llm.chat()` feeds the model equal those a LlamaChatSession evaluates;
//  - teacher forcing: the prompt plus llama.cpp's 32-token greedy continuation goes through both engines;
//    argmax agreement per position, llama.cpp greedy tokens reproduced, max |logit difference| (raw logits over
//    llama.cpp's top-K plus ours at every position, the whole vocabulary at the last one), and at every
//    position where the argmaxes differ: llama.cpp's top-1 minus top-2 logit gap and Spindle's smallest router
//    margin over the layers (k-th minus (k+1)-th selection score, debugMoeScores).
// Tiers as in forward-conformance.test.ts: on llama.cpp's haswell build with Spindle's avx2 kernels the
// experts run llama.cpp's ggml_mul_mat_id arithmetic (F32 vec_dot order, repacked Q4_K gemv), so every logit
// must be bit-identical; elsewhere summation order differs, and an expert choice can flip where two router
// scores are within rounding of each other, so agreement is a stated rate.
// As in the dense test, the teacher batch is padded to a multiple of 4 tokens (llama.cpp's repacked gemm for
// the attention / output matrices rounds rows in groups of 4).
import t from 'tap';
import { getLlama, LlamaChatSession, type ChatHistoryItem } from 'node-llama-cpp';
import { LLM } from '../lib/index.js';
import type { ModelSpec } from './tooling/fixtures/index.js';
import {
  checkComparison, checkTokenization, compareLogits, conformanceTier, llamaCppReference, type Tier, type Tolerance,
} from './helpers/conformance.js';
import { debugAddon, type MoeScores } from './helpers/debug-addon.js';
import { fixtureModel } from './helpers/fixtures.js';

type Weights = 'F32' | 'Q4_K_M';
const MOE = { arch: 'qwen3moe', tokenizer: 'qwen3', nLayer: 2, nHead: 4, nHeadKv: 2, nExpert: 16, nExpertUsed: 4, seed: 7 } as const;
/** The fixture of each weight type (test/batch-invariance-moe.test.ts uses the same F32 one). */
const MOE_SPECS: Record<Weights, ModelSpec> = {
  F32: { ...MOE, weights: 'F32', nEmbd: 64, nFf: 128, nFfExp: 64 },
  Q4_K_M: { ...MOE, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, nFfExp: 256 },
};

const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const STRINGS = [PROMPT, 'Hello, world!', '  leading spaces and\ttabs\n', '你好，世界！', "don't 1234567 3.14",
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', '<think>\nx</think>'];
const N_GENERATE = 32;

// Stated tolerances. Approximate: measured with SPINDLE_CPU_FEATURES=scalar against the haswell build plus
// margin; a flipped expert changes a token's FFN output outright, so the quantized rate is lower than dense.
const TOLERANCE: Record<Tier, Record<Weights, Tolerance>> = {
  exact: {
    F32: { maxDiff: 0, minAgreement: 1, why: 'same IEEE operation sequence, experts included' },
    Q4_K_M: { maxDiff: 0, minAgreement: 1, why: 'same IEEE operation sequence, experts included' },
  },
  approximate: {
    F32: { maxDiff: 1e-3, minAgreement: 1, why: 'f32 rounding only; router scores are far apart at that scale' },
    // measured (scalar kernels): F32 9.5e-5, Q4_K_M 0.24, 100% agreement, no expert flips (min router margin 1e-4)
    Q4_K_M: { maxDiff: 1.5, minAgreement: 0.85, why: 'q8 activation rounding flips, and expert flips at close router scores' },
  },
};

/** Spindle's smallest router margin at position p over the MoE layers (k-th minus (k+1)-th score). */
function routerMargin(s: MoeScores, nTokens: number, p: number): number {
  let m = Infinity;
  for (let l = 0; l < s.nLayer; l++) {
    const row = Array.from(s.scores.subarray((l * nTokens + p) * s.nExpert, (l * nTokens + p + 1) * s.nExpert)).sort((a, b) => b - a);
    m = Math.min(m, row[s.nExpertUsed - 1] - row[s.nExpertUsed]);
  }
  return m;
}

interface Row {
  weights: Weights;
  tokenization: string;
  chatPrompt: string;
  positions: number;
  agree: number;
  compared: number;
  greedy: number;
  identical: number;
  maxDiff: number;
  divergences: string[]; // "pos p: llama.cpp gap g, router margin m"
  minRouterMargin: number;
}

const HISTORY: ChatHistoryItem[] = [
  { type: 'system', text: 'You are terse.' }, { type: 'user', text: 'Hi there' }, { type: 'model', response: ['Hello!'] },
];

t.test('qwen3moe conformance with llama.cpp: tokenization, chat prompt, teacher-forced logits', async (t) => {
  const addon = debugAddon();
  const level = addon.debugCpuLevel();
  const tier: Tier = conformanceTier(level);
  t.comment(`tier: ${tier} (Spindle kernel level ${level})`);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
  const rows: Row[] = [];
  const ms: Record<string, number> = { fixture: 0, llamaGenerate: 0, spindle: 0, llamaTeacher: 0, chat: 0 };
  const timed = async <T>(phase: string, f: () => T | Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await f();
    } finally {
      ms[phase] += performance.now() - t0;
    }
  };
  for (const weights of ['F32', 'Q4_K_M'] as const) {
    const path = await timed('fixture', () => fixtureModel(MOE_SPECS[weights]));
    const ref = await timed('llamaGenerate', () => llamaCppReference(llama, path, PROMPT, N_GENERATE));
    const row: Row = { weights, tokenization: '', chatPrompt: '', positions: ref.tokens.length, agree: 0, compared: 0, greedy: 0,
      identical: 0, maxDiff: 0, divergences: [], minRouterMargin: Infinity };
    try {
      const tok = addon.Tokenizer.fromFile(path);
      row.tokenization = checkTokenization(t, weights, (s, a, sp) => tok.encode(s, a, sp), ref.model, STRINGS);

      const ours = await timed('spindle', () => addon.debugForward(path, Int32Array.from(ref.tokens), { threads: 2 }));
      const nVocab = ours.length / ref.tokens.length;
      t.ok(Number.isInteger(nVocab) && ours.every(Number.isFinite), `${weights}: finite logits`);
      const scores = await timed('spindle', () => addon.debugMoeScores(path, Int32Array.from(ref.tokens), { threads: 2 }));
      t.equal(scores.nLayer, MOE_SPECS[weights].nLayer, `${weights}: every layer is a MoE layer`);
      const c = compareLogits(ref.tokens, ref.nPrompt, ours, nVocab, await timed('llamaTeacher', () => ref.teacher(ours, nVocab)));
      Object.assign(row, { agree: c.agree, compared: c.compared, greedy: c.greedy, identical: c.identical, maxDiff: c.maxDiff });
      for (let p = 0; p < ref.tokens.length; p++) row.minRouterMargin = Math.min(row.minRouterMargin, routerMargin(scores, ref.tokens.length, p));
      row.divergences = c.divergences.map((d) =>
        `pos ${d.pos}: llama.cpp gap ${d.llamaGap.toFixed(4)}, router margin ${routerMargin(scores, ref.tokens.length, d.pos).toExponential(2)}`);

      checkComparison(t, weights, c, ref.tokens, ref.nPrompt, TOLERANCE[tier][weights], tier);

      // chat prompt: what llm.chat feeds the model == what a LlamaChatSession evaluates
      const t0 = performance.now();
      const llm = new LLM({ model: path, maxModelLen: 512, threads: 1 });
      const [chat] = await llm.chat([{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hi there' },
        { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'Bye' }], { temperature: 0, maxTokens: 1 });
      await llm.close();
      const context = await ref.model.createContext({ contextSize: 512, flashAttention: false, threads: 1 });
      const sequence = context.getSequence();
      const session = new LlamaChatSession({ contextSequence: sequence });
      session.setChatHistory(HISTORY);
      await session.prompt('Bye', { maxTokens: 1 });
      const evaluated = [...sequence.contextTokens] as number[];
      t.same(chat.promptTokenIds, evaluated, `${weights}: identical chat prompt tokens (${session.chatWrapper.wrapperName} wrapper)`);
      row.chatPrompt = JSON.stringify(chat.promptTokenIds) === JSON.stringify(evaluated) ? `identical (${evaluated.length} tokens)` : 'DIFFERENT';
      await context.dispose();
      ms.chat += performance.now() - t0;
    } finally {
      await ref.dispose();
    }
    rows.push(row);
  }
  const head = '| model | weights | tokenization | chat prompt | argmax agree (non-tie) | greedy tokens reproduced | ' +
    'bit-identical positions | max |Δlogit| | min router margin | divergences (llama.cpp top1-top2 gap, router margin) |';
  const lines = rows.map((r) => `| qwen3moe (16 experts, top 4) | ${r.weights} | ${r.tokenization} | ${r.chatPrompt} | ` +
    `${r.agree}/${r.compared} | ${r.greedy}/${N_GENERATE} | ${r.identical}/${r.positions} | ${r.maxDiff.toExponential(2)} | ` +
    `${r.minRouterMargin.toExponential(2)} | ${r.divergences.length ? r.divergences.join('; ') : 'none'} |`);
  t.comment(`Spindle vs llama.cpp, tier ${tier}, Spindle kernels ${level}\n${[head, '|---|---|---|---|---|---|---|---|---|---|', ...lines].join('\n')}`);
  t.comment(`wall time (ms): ${Object.entries(ms).map(([k, v]) => `${k} ${Math.round(v)}`).join(', ')}`);
  await llama.dispose();
});
