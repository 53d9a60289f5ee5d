// Forward-pass conformance against llama.cpp (node-llama-cpp, CPU, no flash attention, F32 KV cache).
// For each architecture / tokenizer and weight type: a prompt plus llama.cpp's greedy continuation is
// teacher-forced through both engines; Spindle's logits (debugForward, every position) are compared with
// llama.cpp's raw logits at every position (its top-K plus Spindle's top-K tokens), and over the whole
// vocabulary at the last position. Near-ties (llama.cpp top-1 minus top-2 logit < NEAR_TIE) are exempt from
// the argmax check. Units: raw logits throughout (no softmax anywhere).
import t from 'tap';
import { getLlama, type Llama, type Token } from 'node-llama-cpp';
import { loadNative } from '../lib/native.js';
import { fixtureModel } from './helpers/fixtures.js';

type Arch = 'llama' | 'qwen2' | 'qwen3';
type Tok = 'llama3' | 'llama2' | 'qwen3';
type Weights = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | 'Q4_K_M' | 'Q6_K';

interface DebugAddon {
  debugForward(path: string, tokens: Int32Array, options?: { threads?: number }): Float32Array;
}

const MODELS: { label: string; arch: Arch; tokenizer: Tok; tied: boolean }[] = [
  { label: 'llama (llama3 tok)', arch: 'llama', tokenizer: 'llama3', tied: false },
  { label: 'llama (llama2 tok)', arch: 'llama', tokenizer: 'llama2', tied: false },
  { label: 'qwen2 (qwen3 tok)', arch: 'qwen2', tokenizer: 'qwen3', tied: false },
  { label: 'qwen3 (qwen3 tok)', arch: 'qwen3', tokenizer: 'qwen3', tied: true },
];
const WEIGHTS: Weights[] = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K_M', 'Q6_K'];
const FLOAT_TYPES = new Set<Weights>(['F32', 'F16', 'BF16']);

const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const N_GENERATE = 32;
const TOP_K = 8; // tokens per position whose logits are compared (llama.cpp's top-K and ours)
const NEAR_TIE = 0.05; // logits
// Stated tolerances: max |logit difference| over the compared tokens, and the argmax agreement rate over
// positions that are not near-ties (float weights must agree everywhere).
const MAX_DIFF = { float: 1e-3, quant: 1e-2 };
const MIN_AGREEMENT = { float: 1.0, quant: 0.95 };

interface Row {
  model: string;
  weights: Weights;
  positions: number;
  agree: number; // argmax agreements among non-near-tie positions
  compared: number; // non-near-tie positions
  greedy: number; // generated tokens whose preceding position's argmax (ours) equals llama.cpp's pick
  maxDiff: number; // over llama.cpp top-K ∪ ours top-K at every position
  maxDiffFullVocab: number; // every vocabulary entry at the last position
}

/** Indices of the k largest values of row (descending). */
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

type TeacherOut = Map<Token, number>[]; // llama.cpp's logits per position (a token subset, or all at the end)

interface Reference {
  tokens: number[]; // prompt (BOS included when the model adds one) + llama.cpp's greedy continuation
  nPrompt: number;
  /** Teacher-forces `all` in one batch; at each position asks for llama.cpp's top-K plus our top-K. */
  teacher: (all: number[], ours: Float32Array, nVocab: number) => Promise<TeacherOut>;
  dispose: () => Promise<void>;
}

/** Loads the model in llama.cpp and generates its greedy continuation (step-by-step decoding). */
async function llamaCppReference(llama: Llama, path: string): Promise<Reference> {
  const model = await llama.loadModel({ modelPath: path });
  const ctx = await model.createContext({
    contextSize: 128,
    batchSize: 128,
    threads: 1, // llama.cpp's spinning workers crawl on a shared 2-core machine; one thread is fastest there
    flashAttention: false,
    experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32',
  });
  const seq = ctx.getSequence();
  const prompt = model.tokenize(PROMPT, false);
  const tokens: number[] = model.tokens.shouldPrependBosToken && model.tokens.bos != null
    ? [model.tokens.bos, ...prompt] : [...prompt];
  const nPrompt = tokens.length;
  let res = await seq.controlledEvaluate(
    tokens.map((tok, i) => (i === nPrompt - 1 ? [tok as Token, { generateNext: { token: true } }] : (tok as Token))),
  );
  for (let i = 0; i < N_GENERATE; i++) {
    const next = res[res.length - 1]?.next.token;
    if (next == null) throw new Error(`llama.cpp generated no token at step ${i}`);
    tokens.push(next);
    if (i === N_GENERATE - 1) break;
    res = await seq.controlledEvaluate([[next, { generateNext: { token: true } }]]);
  }
  const teacher = async (all: number[], ours: Float32Array, nVocab: number): Promise<TeacherOut> => {
    await seq.clearHistory();
    const last = all.length - 1;
    const out = await seq.controlledEvaluate(all.map((tok, p) => {
      const ourTop = topK(ours.subarray(p * nVocab, (p + 1) * nVocab), TOP_K) as Token[];
      const logits = p === last ? true : { filter: { tokens: ourTop, includeTop: TOP_K } };
      return [tok as Token, { generateNext: { logits } }];
    }));
    return out.map((o) => {
      if (!o?.next.logits) throw new Error('llama.cpp returned no logits');
      return o.next.logits;
    });
  };
  return { tokens, nPrompt, teacher, dispose: async () => { await ctx.dispose(); await model.dispose(); } };
}

function compare(label: string, weights: Weights, all: number[], nPrompt: number, ours: Float32Array,
  nVocab: number, ref: TeacherOut): Row {
  const row: Row = { model: label, weights, positions: all.length, agree: 0, compared: 0, greedy: 0, maxDiff: 0,
    maxDiffFullVocab: 0 };
  for (let p = 0; p < all.length; p++) {
    const ourRow = ours.subarray(p * nVocab, (p + 1) * nVocab);
    const entries = [...ref[p].entries()].sort((a, b) => b[1] - a[1]); // llama.cpp's, highest first
    let d = 0;
    for (const [tok, logit] of entries) d = Math.max(d, Math.abs(logit - ourRow[tok]));
    if (p === all.length - 1) row.maxDiffFullVocab = d;
    else row.maxDiff = Math.max(row.maxDiff, d);
    const ourArgmax = topK(ourRow, 1)[0];
    if (p >= nPrompt - 1 && p < all.length - 1 && ourArgmax === all[p + 1]) row.greedy++;
    if (entries.length >= 2 && entries[0][1] - entries[1][1] < NEAR_TIE) continue;
    row.compared++;
    if (ourArgmax === entries[0][0]) row.agree++;
  }
  row.maxDiff = Math.max(row.maxDiff, row.maxDiffFullVocab);
  return row;
}

function table(rows: Row[]): string {
  const head = '| model | weights | argmax agree (non-tie) | greedy tokens matched | max |Δlogit| (top-K, all pos) | max |Δlogit| (full vocab, last pos) |';
  const sep = '|---|---|---|---|---|---|';
  const lines = rows.map((r) =>
    `| ${r.model} | ${r.weights} | ${r.agree}/${r.compared} | ${r.greedy}/${N_GENERATE} | ${r.maxDiff.toExponential(2)} | ${r.maxDiffFullVocab.toExponential(2)} |`);
  return [head, sep, ...lines].join('\n');
}

t.test('forward conformance with llama.cpp', async (t) => {
  const addon = loadNative() as unknown as DebugAddon;
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
  const rows: Row[] = [];
  for (const m of MODELS) {
    for (const weights of WEIGHTS) {
      const kQuant = weights === 'Q4_K_M' || weights === 'Q6_K';
      const path = await fixtureModel({
        arch: m.arch, tokenizer: m.tokenizer, weights, nEmbd: kQuant ? 256 : 64, nLayer: 2, nHead: 4, nHeadKv: 2,
        nFf: kQuant ? 512 : 128, tiedEmbeddings: m.tied, seed: 7,
      });
      const ref = await llamaCppReference(llama, path);
      try {
        const ours = addon.debugForward(path, Int32Array.from(ref.tokens), { threads: 2 });
        const nVocab = ours.length / ref.tokens.length;
        t.ok(Number.isInteger(nVocab) && ours.every(Number.isFinite), `${m.label} ${weights}: finite logits`);
        const teacher = await ref.teacher(ref.tokens, ours, nVocab);
        const r = compare(m.label, weights, ref.tokens, ref.nPrompt, ours, nVocab, teacher);
        rows.push(r);
        const kind = FLOAT_TYPES.has(weights) ? 'float' : 'quant';
        t.ok(r.compared >= ref.tokens.length / 2, `${m.label} ${weights}: most positions are not near-ties`);
        t.ok(r.agree >= Math.ceil(MIN_AGREEMENT[kind] * r.compared),
          `${m.label} ${weights}: argmax agreement ${r.agree}/${r.compared} >= ${MIN_AGREEMENT[kind] * 100}%`);
        t.ok(r.maxDiff <= MAX_DIFF[kind], `${m.label} ${weights}: max |logit diff| ${r.maxDiff} <= ${MAX_DIFF[kind]}`);
      } finally {
        await ref.dispose();
      }
    }
  }
  t.comment('Spindle vs llama.cpp (node-llama-cpp 3.22.1, CPU, flashAttention off, F32 KV cache, raw logits)\n' +
    table(rows));
  await llama.dispose();
});
