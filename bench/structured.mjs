#!/usr/bin/env node
// Grammar-constrained decoding: what a JSON Schema constraint costs, in Spindle and in llama.cpp (node-llama-cpp's
// prebuilt CPU binary), in one run.
//  1. mask: build/spindle_grammar_bench on a Qwen3 vocabulary (151936 tokens, a vocabulary-only GGUF) with a
//     realistic schema (12 properties, a nested object, an array, enums, strings with maxLength), and with the
//     same schema without maxLength / maxItems: mask time per token, the cache-filling first walk and the later
//     walks (steady state) separately, and the plain trie walk (no cache) on the same states.
//  2. Spindle decode tokens/s on the 1B-shaped Q4_K_M model (bench/cpu-compare.mjs's llama1b-q4_k_m, Llama 3
//     tokenizer), greedy, ignoreEos, timed from each sequence's first token to its last inside one streamed run
//     (as cpu-compare times tg): unconstrained vs `jsonSchema` for two schemas that keep the whole run inside the
//     grammar (the random model closes any string it may close at once, so the lengths are forced by minLength /
//     minItems; llama.cpp's GBNF parser refuses repetition counts above 2000):
//       long-string  {"text": string, minLength 1024, maxLength 2000}
//       string-list  {"items": array of strings (minLength 4, maxLength 32), minItems 64, maxItems 1024}
//     Each constrained workload runs "cold" (a grammar text the engine has not seen: every repetition renames the
//     property, so the engine's per-grammar mask cache starts empty) and "warm" (the identical request again: every
//     state it reaches is cached). One sequence, and --seqs sequences together.
//  3. llama.cpp through node-llama-cpp: the same GBNF text (Spindle's compileJsonSchema output, given to
//     llama.createGrammar) on the same GGUF, one sequence, unconstrained vs constrained. Its sampler draws first
//     and runs the grammar over the whole vocabulary only when the drawn token is refused.
// The random model's outputs differ between engines, so compare each engine's constrained/unconstrained ratio
// (and tokens/s), not the texts. Engines alternate order repetition by repetition, as in cpu-compare.
// Usage: node bench/structured.mjs [--threads 2] [--tokens 128] [--seqs 8] [--batch-tokens 64] [--reps 3]
//        [--walks 8] [--free-walks 3] [--skip-mask] [--skip-decode] [--skip-llamacpp] [--skip-batch] [--json out.json]
// Needs `npm run build` (the addon, build/spindle_grammar_bench, dist/ and dist-tooling/); models are generated into
// bench/.models on first use (the 1B file takes about 4 minutes; shared with bench/cpu-compare.mjs).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { getLlama, LlamaGrammarEvaluationState } from 'node-llama-cpp';
import { Engine } from '../dist/index.js';
import { compileJsonSchema } from '../dist/structured/index.js';
import { generateModel, generatorFingerprint } from '../dist-tooling/test/tooling/fixtures/index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    threads: { type: 'string', default: '2' },
    tokens: { type: 'string', default: '128' },
    seqs: { type: 'string', default: '8' },
    'batch-tokens': { type: 'string', default: '64' },
    reps: { type: 'string', default: '3' },
    walks: { type: 'string', default: '8' },
    'free-walks': { type: 'string', default: '3' },
    seed: { type: 'string', default: '1' },
    json: { type: 'string' },
    'skip-mask': { type: 'boolean', default: false },
    'skip-decode': { type: 'boolean', default: false },
    'skip-llamacpp': { type: 'boolean', default: false },
    'skip-batch': { type: 'boolean', default: false },
  },
});
const threads = Number(args.threads), nTokens = Number(args.tokens), nSeqs = Number(args.seqs);
const batchTokens = Number(args['batch-tokens']), reps = Number(args.reps);
const tStart = performance.now();
const log = (...xs) => console.error(`[${((performance.now() - tStart) / 1000).toFixed(0).padStart(4)} s]`, ...xs);

// ---- models (same specs and file names as bench/cpu-compare.mjs, so the 1B file is shared) ----
const MODELS = {
  'llama1b-q4_k_m': { arch: 'llama', tokenizer: 'llama3', nEmbd: 2048, nLayer: 16, nHead: 32, nHeadKv: 8, nFf: 8192, tiedEmbeddings: true, seed: 11, weights: 'Q4_K_M' },
  // Qwen3 tokenizer and vocabulary (151936 ids), no tensors: all the mask bench reads (test/helpers' qwen3Vocab)
  'qwen3-vocab': { arch: 'qwen3', tokenizer: 'qwen3', weights: 'F16', nEmbd: 256, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 768, headDim: 128, tiedEmbeddings: true, seed: 2, vocabOnly: true },
};
async function modelPath(name) {
  const spec = MODELS[name];
  const key = createHash('sha256').update(JSON.stringify(spec)).update(generatorFingerprint()).digest('hex').slice(0, 12);
  const path = join(root, 'bench', '.models', `${name}-${key}.gguf`);
  if (existsSync(path)) return path;
  mkdirSync(dirname(path), { recursive: true });
  const t0 = performance.now();
  log(`generating ${path} ...`);
  await generateModel({ ...spec, name }, path + '.tmp');
  renameSync(path + '.tmp', path);
  log(`generated ${path} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return path;
}

// ---- schemas ----
// A realistic response schema: 12 required properties, a nested object, an array, enums, bounded strings,
// a date, a nullable string.
const REALISTIC = {
  type: 'object',
  properties: {
    id: { type: 'integer', minimum: 1 },
    name: { type: 'string', minLength: 1, maxLength: 64 },
    email: { type: 'string', maxLength: 80 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    active: { type: 'boolean' },
    role: { enum: ['admin', 'editor', 'viewer', 'guest'] },
    score: { type: 'number' },
    tags: { type: 'array', items: { type: 'string', maxLength: 24 }, maxItems: 8 },
    address: {
      type: 'object',
      properties: {
        street: { type: 'string', maxLength: 100 },
        city: { type: 'string', maxLength: 50 },
        zip: { type: 'string', pattern: '^[0-9]{5}$' },
        country: { enum: ['US', 'DE', 'FR', 'JP', 'BR'] },
      },
      required: ['street', 'city', 'zip', 'country'],
    },
    created: { type: 'string', format: 'date' },
    bio: { type: 'string', maxLength: 280 },
    manager: { type: ['string', 'null'], maxLength: 64 },
  },
  required: ['id', 'name', 'email', 'age', 'active', 'role', 'score', 'tags', 'address', 'created', 'bio', 'manager'],
};
// The same schema with every maxLength / maxItems removed (strings and arrays unbounded).
function withoutBounds(schema) {
  if (Array.isArray(schema)) return schema.map(withoutBounds);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) if (k !== 'maxLength' && k !== 'maxItems') out[k] = withoutBounds(v);
  return out;
}
// Decode workloads: the property name carries a tag so that each cold run is a grammar text the engine has not seen.
const DECODE_SCHEMAS = {
  'long-string': (tag) => ({
    type: 'object', required: [`text${tag}`],
    properties: { [`text${tag}`]: { type: 'string', minLength: 1024, maxLength: 2000 } },
  }),
  'string-list': (tag) => ({
    type: 'object', required: [`items${tag}`],
    properties: { [`items${tag}`]: { type: 'array', minItems: 64, maxItems: 1024, items: { type: 'string', minLength: 4, maxLength: 32 } } },
  }),
};

const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b), h = Math.floor(v.length / 2);
  return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
};
const promptIds = (n, salt) => Array.from({ length: n }, (_, i) => 1000 + ((i * 7919 + salt * 104729) % 20000));

// ---- 1. mask micro-benchmark ----
function maskBench(vocabPath, name, schema, walks) {
  const gbnfPath = join(root, 'bench', '.models', `structured-${name}.gbnf`);
  writeFileSync(gbnfPath, compileJsonSchema(schema));
  const bin = join(root, 'build', 'spindle_grammar_bench');
  const t0 = performance.now();
  const text = execFileSync(bin, [vocabPath, gbnfPath, String(walks), args.seed], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const seconds = (performance.now() - t0) / 1000;
  const row = { grammar: name, walks, seconds };
  const m = text.match(/(\d+) walks, (\d+) tokens, (\d+) cache entries/);
  if (m) Object.assign(row, { tokens: Number(m[2]), cache_entries: Number(m[3]) });
  const v = text.match(/vocabulary (\d+) tokens/);
  if (v) row.vocab = Number(v[1]);
  for (const [label, key] of [['cached mask, first walk', 'first'], ['cached mask, later walks', 'steady'], ['plain trie walk', 'plain']]) {
    const r = text.match(new RegExp(label.replace(/[(),]/g, '\\$&') + '[^\\n]*n=(\\d+)\\s+p50 ([\\d.]+) ms\\s+p99 ([\\d.]+) ms\\s+max ([\\d.]+) ms'));
    if (r) Object.assign(row, { [`${key}_n`]: Number(r[1]), [`${key}_p50`]: Number(r[2]), [`${key}_p99`]: Number(r[3]), [`${key}_max`]: Number(r[4]) });
  }
  log(`mask ${name}: ${text.trim().split('\n').join(' | ')}`);
  return row;
}

// ---- 2. Spindle ----
async function spindleRun(path) {
  const engine = new Engine({ modelPath: path, threads });
  await engine.ready();
  const greedy = { temperature: 0, ignoreEos: true };
  // One streamed request: { t0, tFirst, tLast, n, text, finish }.
  const decode = async (inputIds, maxNewTokens, extra) => {
    let n = 0, tFirst = 0, text = '', finish = null;
    const t0 = performance.now();
    for await (const chunk of engine.generate({ inputIds, samplingParams: { ...greedy, maxNewTokens, ...extra }, stream: true })) {
      if (n === 0 && chunk.outputIds.length > 0) tFirst = performance.now();
      n += chunk.outputIds.length;
      text += chunk.text ?? "";
      finish = chunk.metaInfo.finishReason ?? finish;
    }
    return { t0, tFirst, tLast: performance.now(), n, text, finish: finish?.type };
  };
  return {
    // (n - 1) tokens over first -> last token; ttft in ms
    async one(extra, salt = 2) {
      const r = await decode(promptIds(8, salt), nTokens + 1, extra);
      return { tps: (r.n - 1) / ((r.tLast - r.tFirst) / 1000), n: r.n, ttft: r.tFirst - r.t0, text: r.text, finish: r.finish };
    },
    // total decode tokens/s of nSeqs sequences after each one's first token (as cpu-compare's "batch decode")
    async batch(extra) {
      const rs = await Promise.all(Array.from({ length: nSeqs }, (_, i) => decode(promptIds(8, 10 + i), batchTokens + 1, extra)));
      const n = rs.reduce((s, r) => s + r.n, 0);
      const tFirst = Math.max(...rs.map((r) => r.tFirst)), tLast = Math.max(...rs.map((r) => r.tLast));
      return { tps: (n - rs.length) / ((tLast - tFirst) / 1000), n, ttft: tFirst - Math.min(...rs.map((r) => r.t0)), text: rs[0].text, finish: rs.map((r) => r.finish).join(',') };
    },
    close: () => engine.shutdown(),
  };
}

// ---- 3. llama.cpp through node-llama-cpp ----
async function llamaCppRun(path) {
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const model = await llama.loadModel({ modelPath: path });
  const ctx = await model.createContext({ contextSize: 1024, batchSize: 512, threads, flashAttention: false });
  const seq = ctx.getSequence();
  const grammars = new Map();
  return {
    async one(gbnf) {
      let grammarEvaluationState;
      if (gbnf) {
        if (!grammars.has(gbnf)) grammars.set(gbnf, await llama.createGrammar({ grammar: gbnf }));
        grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar: grammars.get(gbnf) });
      }
      await seq.clearHistory();
      const t0 = performance.now();
      let n = 0, tFirst = 0;
      const ids = [];
      for await (const token of seq.evaluate(promptIds(8, 2), { temperature: 0, grammarEvaluationState })) {
        if (++n === 1) tFirst = performance.now();
        ids.push(token);
        if (n === nTokens + 1) break;
      }
      const tLast = performance.now();
      return { tps: (n - 1) / ((tLast - tFirst) / 1000), n, ttft: tFirst - t0, text: model.detokenize(ids), finish: n === nTokens + 1 ? 'length' : 'stop' };
    },
    close: async () => { await ctx.dispose(); await model.dispose(); },
  };
}

// ---- run ----
const info = {
  date: new Date().toISOString().slice(0, 10), cpu: cpus()[0]?.model ?? 'unknown', threads, tokens: nTokens, seqs: nSeqs,
  batch_tokens: batchTokens, reps, node_llama_cpp: llamaCppVersion(),
};
const maskRows = [];
if (!args['skip-mask']) {
  const vocab = await modelPath('qwen3-vocab');
  maskRows.push(maskBench(vocab, 'realistic', REALISTIC, Number(args.walks)));
  maskRows.push(maskBench(vocab, 'realistic-unbounded', withoutBounds(REALISTIC), Number(args['free-walks'])));
}

const decodeRows = [];
if (!args['skip-decode']) {
  const path = await modelPath('llama1b-q4_k_m');
  const sp = await spindleRun(path);
  const lc = args['skip-llamacpp'] ? null : await llamaCppRun(path);
  const figures = {}; // key -> [{tps, n, ...}]
  const add = (key, r) => {
    (figures[key] ??= []).push(r);
    log(`${key}: ${r.tps.toFixed(2)} tok/s, ${r.n} tokens, ttft ${r.ttft.toFixed(0)} ms, finish ${r.finish}, ${JSON.stringify(r.text.slice(0, 60))}`);
  };
  await sp.one({});  // warm-up: first-use costs (weights repacking, page faults) out of the measured runs
  if (lc) await lc.one(null);
  for (let r = 0; r < reps; ++r) {
    const tag = `_${r}_${process.pid}`;
    const spindleSingle = async () => {
      add('spindle 1-seq unconstrained', await sp.one({}));
      for (const [name, make] of Object.entries(DECODE_SCHEMAS)) {
        const schema = make(tag);
        add(`spindle 1-seq ${name} cold`, await sp.one({ jsonSchema: schema }));
        add(`spindle 1-seq ${name} warm`, await sp.one({ jsonSchema: schema }));
      }
    };
    const llamaSingle = async () => {
      add('llama.cpp 1-seq unconstrained', await lc.one(null));
      for (const [name, make] of Object.entries(DECODE_SCHEMAS)) add(`llama.cpp 1-seq ${name}`, await lc.one(compileJsonSchema(make(tag))));
    };
    const order = lc ? (r % 2 === 0 ? [spindleSingle, llamaSingle] : [llamaSingle, spindleSingle]) : [spindleSingle];
    for (const f of order) await f();
    if (!args['skip-batch']) {
      add(`spindle ${nSeqs}-seq unconstrained`, await sp.batch({}));
      for (const [name, make] of Object.entries(DECODE_SCHEMAS)) {
        const schema = make(`${tag}_b`);
        add(`spindle ${nSeqs}-seq ${name} cold`, await sp.batch({ jsonSchema: schema }));
        add(`spindle ${nSeqs}-seq ${name} warm`, await sp.batch({ jsonSchema: schema }));
      }
    }
  }
  await sp.close();
  if (lc) await lc.close();
  for (const [key, rs] of Object.entries(figures)) {
    const [engine, seqs, ...rest] = key.split(' ');
    const workload = rest.join(' ');
    const base = figures[`${engine} ${seqs} unconstrained`];
    const tps = median(rs.map((x) => x.tps));
    // ratio of the medians, and the median of the ratios paired within a repetition (both runs minutes apart at most)
    decodeRows.push({
      engine, seqs, workload, tps, tps_all: rs.map((x) => x.tps), tokens: median(rs.map((x) => x.n)),
      ttft_ms: median(rs.map((x) => x.ttft)), ratio: tps / median(base.map((x) => x.tps)),
      paired_ratio: median(rs.map((x, i) => x.tps / base[i].tps)),
    });
    // what the constraint adds per decode step, from the medians (per sequence-step for batches: 1 / total tok/s)
    decodeRows.at(-1).extra_ms_per_token = 1000 / tps - 1000 / median(base.map((x) => x.tps));
  }
}

// ---- report ----
const f2 = (x) => (x === undefined ? '-' : x < 0.1 ? x.toFixed(4) : x < 10 ? x.toFixed(3) : x.toFixed(1));
const out = [];
out.push(`${info.date}, ${info.cpu}, ${threads} threads, node-llama-cpp ${info.node_llama_cpp}, ${reps} repetitions (median)`);
if (maskRows.length) {
  out.push('', `Token mask per decode step (build/spindle_grammar_bench, Qwen3 vocabulary, random walks, seed ${args.seed}), ms:`, '');
  out.push('| grammar | vocab | walks | tokens | cache entries | first walk p50 | p99 | later walks p50 | p99 | max | plain trie walk p50 | p99 |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of maskRows) {
    out.push(`| ${r.grammar} | ${r.vocab} | ${r.walks} | ${r.tokens} | ${r.cache_entries} | ${f2(r.first_p50)} | ${f2(r.first_p99)} | ` +
      `${f2(r.steady_p50)} | ${f2(r.steady_p99)} | ${f2(r.steady_max)} | ${f2(r.plain_p50)} | ${f2(r.plain_p99)} |`);
  }
}
if (decodeRows.length) {
  out.push('', `Decode, llama1b-q4_k_m, greedy, ${nTokens} tokens (1-seq) / ${nSeqs} x ${batchTokens} tokens (${nSeqs}-seq), tokens/s after the first token:`, '');
  out.push('| engine | seqs | workload | tok/s (median) | runs | tokens | TTFT ms | vs unconstrained (medians) | paired per rep (median) | + ms/token |');
  out.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of decodeRows) {
    out.push(`| ${r.engine} | ${r.seqs} | ${r.workload} | ${r.tps.toFixed(2)} | ${r.tps_all.map((x) => x.toFixed(1)).join(' / ')} | ${r.tokens} | ` +
      `${r.ttft_ms.toFixed(0)} | ${r.ratio.toFixed(3)} | ${r.paired_ratio.toFixed(3)} | ${r.extra_ms_per_token.toFixed(1)} |`);
  }
}
out.push('', `total ${((performance.now() - tStart) / 1000).toFixed(0)} s`);
console.log(out.join('\n'));
if (args.json) writeFileSync(args.json, JSON.stringify({ info, mask: maskRows, decode: decodeRows }, null, 2) + '\n');

function llamaCppVersion() {
  try {
    return JSON.parse(readFileSync(join(root, 'node_modules', 'node-llama-cpp', 'package.json'), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}
