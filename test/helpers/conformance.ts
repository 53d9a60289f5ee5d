// Shared pieces of the forward-conformance tests against llama.cpp (node-llama-cpp, CPU, no flash attention,
// F32 KV cache): the comparison tier of this machine, llama.cpp's greedy continuation plus its teacher-forced
// logits, and the per-position comparison with Spindle's logits. Same method as test/forward-conformance.test.ts
// (see its header for the tiers and for why the teacher batch is padded to a multiple of 4 tokens).
// Units: raw logits throughout (no softmax anywhere).
import { readFileSync } from 'node:fs';
import { JinjaTemplateChatWrapper, LlamaChatSession, type ChatHistoryItem, type Llama, type LlamaModel, type Token } from 'node-llama-cpp';
import type { Test } from 'tap';

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

/** Asserts our tokenizer gives llama.cpp's ids for every string, special tokens parsed and not; returns "same/total".
 *  encode: Spindle's (text, addSpecial, parseSpecial) -> ids. */
export function checkTokenization(t: Test, name: string, encode: (s: string, addSpecial: boolean, special: boolean) => ArrayLike<number>,
  model: LlamaModel, strings: string[]): string {
  let same = 0;
  for (const s of strings) {
    for (const special of [false, true]) {
      const ok = JSON.stringify(Array.from(encode(s, false, special))) === JSON.stringify(Array.from(model.tokenize(s, special)));
      t.ok(ok, `${name}: tokenization of ${JSON.stringify(s)} (special ${special})`);
      same += ok ? 1 : 0;
    }
  }
  return `${same}/${strings.length * 2}`;
}

export interface Tolerance { maxDiff: number; minAgreement: number; why: string }

/** The comparison's assertions: most positions are not near-ties, argmax agreement and max |logit diff| within the
 *  tolerance, and llama.cpp's greedy continuation (after nPrompt of tokens) varied enough to mean something. */
export function checkComparison(t: Test, name: string, c: Comparison, tokens: number[], nPrompt: number, tol: Tolerance,
  tier?: Tier): void {
  const on = tier ? ` (${tier})` : '';
  t.ok(c.compared >= tokens.length / 2, `${name}: most positions are not near-ties (${c.compared}/${c.positions})`);
  t.ok(c.agree >= Math.ceil(tol.minAgreement * c.compared),
    `${name}: argmax agreement ${c.agree}/${c.compared} >= ${tol.minAgreement * 100}%${on}`);
  t.ok(c.maxDiff <= tol.maxDiff, `${name}: max |logit diff| ${c.maxDiff} <= ${tol.maxDiff} (${tier ? `${tier}: ` : ''}${tol.why})`);
  t.ok(new Set(tokens.slice(nPrompt)).size >= 8, `${name}: llama.cpp's greedy output is varied`);
}

/** The tokens a LlamaChatSession evaluates for `history` then the user's `prompt` (one token generated), with
 *  node-llama-cpp's own chat wrapper for the model, or the file's Jinja chat template when `jinja`. */
export async function llamaChatPromptTokens(llama: Llama, path: string, history: ChatHistoryItem[], prompt: string,
  jinja = false): Promise<{ tokens: number[]; wrapper: string }> {
  const model = await llama.loadModel({ modelPath: path });
  try {
    const context = await model.createContext({ contextSize: 512, flashAttention: false, threads: 1 });
    const sequence = context.getSequence();
    const template = model.fileInfo.metadata.tokenizer.chat_template;
    if (jinja && typeof template !== 'string') throw new Error(`${path}: the file has no chat template`);
    const session = new LlamaChatSession(jinja
      ? { contextSequence: sequence, chatWrapper: new JinjaTemplateChatWrapper({ template: template as string }) }
      : { contextSequence: sequence });
    session.setChatHistory(history);
    await session.prompt(prompt, { maxTokens: 1 });
    const result = { tokens: [...sequence.contextTokens] as number[], wrapper: session.chatWrapper.wrapperName };
    await context.dispose();
    return result;
  } finally {
    await model.dispose();
  }
}

/** One row of a conformance table: a model's comparison and what its tokenization and chat prompt gave. */
export interface TableRow extends Comparison { label: string; weights: string; tokenization: string; chatPrompt: string }

/** The Markdown table of the rows (nGenerate: llama.cpp's greedy tokens per row). */
export function conformanceTable(rows: TableRow[], nGenerate: number): string {
  const head = '| model | weights | tokenization | chat prompt | argmax agree (non-tie) | greedy tokens reproduced | ' +
    'bit-identical positions | max |Δlogit| | divergences (llama.cpp top1-top2 gap) |';
  const lines = rows.map((r) => `| ${r.label} | ${r.weights} | ${r.tokenization} | ${r.chatPrompt} | ${r.agree}/${r.compared} | ` +
    `${r.greedy}/${nGenerate} | ${r.identical}/${r.positions} | ${r.maxDiff.toExponential(2)} | ` +
    `${r.divergences.length ? r.divergences.map((d) => `pos ${d.pos}: ${d.llamaGap.toFixed(4)}`).join('; ') : 'none'} |`);
  return [head, '|---|---|---|---|---|---|---|---|---|', ...lines].join('\n');
}
