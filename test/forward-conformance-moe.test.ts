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
import { readFileSync } from 'node:fs';
import t from 'tap';
import { getLlama, LlamaChatSession, type ChatHistoryItem, type Llama, type Token } from 'node-llama-cpp';
import { LLM } from '../lib/index.js';
import { loadNative } from '../lib/native.js';
import type { ModelSpec } from '../lib/fixtures/index.js';
import { fixtureModel } from './helpers/fixtures.js';

interface MoeScores { scores: Float32Array; nLayer: number; nExpert: number; nExpertUsed: number }
interface DebugAddon {
  debugForward(path: string, tokens: Int32Array, options?: { threads?: number }): Float32Array;
  debugMoeScores(path: string, tokens: Int32Array, options?: { threads?: number }): MoeScores;
  debugCpuLevel(): string;
  Tokenizer: { fromFile(path: string): { encode(text: string, addSpecial: boolean, parseSpecial: boolean): Int32Array } };
}

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
const TOP_K = 8;
const NEAR_TIE = 0.05; // llama.cpp top-1 minus top-2 below this: exempt from the argmax checks
const BATCH_MULTIPLE = 4;

type Tier = 'exact' | 'approximate';
// Stated tolerances. Approximate: measured with SPINDLE_CPU_FEATURES=scalar against the haswell build plus
// margin; a flipped expert changes a token's FFN output outright, so the quantized rate is lower than dense.
const TOLERANCE: Record<Tier, Record<Weights, { maxDiff: number; minAgreement: number; why: string }>> = {
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

function runsLlamaCppHaswellBuild(): boolean {
  if (process.platform !== 'linux' || process.arch !== 'x64') return false;
  const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('flags'));
  const flags = new Set(line?.split(':')[1]?.trim().split(/\s+/) ?? []);
  return ['avx2', 'fma', 'f16c', 'bmi2'].every((f) => flags.has(f)) && !flags.has('avx512f') && !flags.has('avx_vnni');
}

/** Indices of the k largest values of row (descending; the lower index first on ties). */
function topK(row: Float32Array, k: number): number[] {
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

/** llama.cpp's greedy continuation of PROMPT, then its logits for `all` teacher-forced in one batch. */
async function llamaCpp(llama: Llama, path: string) {
  const model = await llama.loadModel({ modelPath: path });
  const ctx = await model.createContext({
    contextSize: 128, batchSize: 128, threads: 1, flashAttention: false,
    experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
  });
  const seq = ctx.getSequence();
  const prompt = model.tokenize(PROMPT, false);
  const tokens: number[] = model.tokens.shouldPrependBosToken && model.tokens.bos != null ? [model.tokens.bos, ...prompt] : [...prompt];
  const nPrompt = tokens.length;
  let res = await seq.controlledEvaluate(tokens.map((tok, i) => (i === nPrompt - 1 ? [tok as Token, { generateNext: { token: true } }] : (tok as Token))));
  for (let i = 0; i < N_GENERATE; i++) {
    const next = res[res.length - 1]?.next.token;
    if (next == null) throw new Error(`llama.cpp generated no token at step ${i}`);
    tokens.push(next);
    if (i < N_GENERATE - 1) res = await seq.controlledEvaluate([[next, { generateNext: { token: true } }]]);
  }
  const teacher = async (ours: Float32Array, nVocab: number): Promise<Map<Token, number>[]> => {
    await seq.clearHistory();
    const last = tokens.length - 1;
    const items: Parameters<typeof seq.controlledEvaluate>[0] = tokens.map((tok, p) => {
      const ourTop = topK(ours.subarray(p * nVocab, (p + 1) * nVocab), TOP_K) as Token[];
      return [tok as Token, { generateNext: { logits: p === last ? true : { filter: { tokens: ourTop, includeTop: TOP_K } } } }];
    });
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

function compare(r: Row, all: number[], nPrompt: number, ours: Float32Array, nVocab: number, ref: Map<Token, number>[],
  scores: MoeScores): void {
  for (let p = 0; p < all.length; p++) {
    const ourRow = ours.subarray(p * nVocab, (p + 1) * nVocab);
    const entries = [...ref[p].entries()].sort((a, b) => b[1] - a[1]);
    let d = 0;
    for (const [tok, logit] of entries) d = Math.max(d, Math.abs(logit - ourRow[tok]));
    if (d === 0) r.identical++;
    r.maxDiff = Math.max(r.maxDiff, d);
    r.minRouterMargin = Math.min(r.minRouterMargin, routerMargin(scores, all.length, p));
    const ourArgmax = topK(ourRow, 1)[0];
    if (p >= nPrompt - 1 && p < all.length - 1 && ourArgmax === all[p + 1]) r.greedy++;
    const gap = entries.length >= 2 ? entries[0][1] - entries[1][1] : Infinity;
    if (ourArgmax !== entries[0][0]) {
      r.divergences.push(`pos ${p}: llama.cpp gap ${gap.toFixed(4)}, router margin ${routerMargin(scores, all.length, p).toExponential(2)}`);
    }
    if (gap < NEAR_TIE) continue;
    r.compared++;
    if (ourArgmax === entries[0][0]) r.agree++;
  }
}

const HISTORY: ChatHistoryItem[] = [
  { type: 'system', text: 'You are terse.' }, { type: 'user', text: 'Hi there' }, { type: 'model', response: ['Hello!'] },
];

t.test('qwen3moe conformance with llama.cpp: tokenization, chat prompt, teacher-forced logits', async (t) => {
  const addon = loadNative() as unknown as DebugAddon;
  const level = addon.debugCpuLevel();
  const tier: Tier = level === 'avx2' && runsLlamaCppHaswellBuild() ? 'exact' : 'approximate';
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
    const ref = await timed('llamaGenerate', () => llamaCpp(llama, path));
    const row: Row = { weights, tokenization: '', chatPrompt: '', positions: ref.tokens.length, agree: 0, compared: 0, greedy: 0,
      identical: 0, maxDiff: 0, divergences: [], minRouterMargin: Infinity };
    try {
      const tok = addon.Tokenizer.fromFile(path);
      let same = 0;
      for (const s of STRINGS) {
        for (const special of [false, true]) {
          const ok = JSON.stringify(Array.from(tok.encode(s, false, special))) === JSON.stringify(Array.from(ref.model.tokenize(s, special)));
          t.ok(ok, `${weights}: tokenization of ${JSON.stringify(s)} (special ${special})`);
          same += ok ? 1 : 0;
        }
      }
      row.tokenization = `${same}/${STRINGS.length * 2}`;

      const ours = await timed('spindle', () => addon.debugForward(path, Int32Array.from(ref.tokens), { threads: 2 }));
      const nVocab = ours.length / ref.tokens.length;
      t.ok(Number.isInteger(nVocab) && ours.every(Number.isFinite), `${weights}: finite logits`);
      const scores = await timed('spindle', () => addon.debugMoeScores(path, Int32Array.from(ref.tokens), { threads: 2 }));
      t.equal(scores.nLayer, MOE_SPECS[weights].nLayer, `${weights}: every layer is a MoE layer`);
      compare(row, ref.tokens, ref.nPrompt, ours, nVocab, await timed('llamaTeacher', () => ref.teacher(ours, nVocab)), scores);

      const tol = TOLERANCE[tier][weights];
      t.ok(row.compared >= ref.tokens.length / 2, `${weights}: most positions are not near-ties (${row.compared}/${row.positions})`);
      t.ok(row.agree >= Math.ceil(tol.minAgreement * row.compared),
        `${weights}: argmax agreement ${row.agree}/${row.compared} >= ${tol.minAgreement * 100}% (${tier})`);
      t.ok(row.maxDiff <= tol.maxDiff, `${weights}: max |logit diff| ${row.maxDiff} <= ${tol.maxDiff} (${tier}: ${tol.why})`);
      t.ok(new Set(ref.tokens.slice(ref.nPrompt)).size >= 8, `${weights}: llama.cpp's greedy output is varied`);

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
