// Reranking throughput: Spindle (the scores llm.score computes: each pair's prompt batched into engine steps, the
// classifier head over its last hidden state) against llama.cpp's ranking context (node-llama-cpp's
// LlamaRankingContext, one pair at a time as its API evaluates them) on the same reranker GGUF (a Qwen3-Reranker-
// 0.6B-shaped file as llama.cpp converts it: rank pooling, a [1024, 2] head; random weights, Q8_0), the same thread
// count and the same token sequences (node-llama-cpp's own prompt for each pair), repetitions alternating engine by
// engine. Prompt tokens/s for one query against N documents, best of the repetitions; the largest score
// difference as a check.
//   node bench/rerank.mjs [--docs 16] [--doc-len 96] [--threads 2] [--reps 3]
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { getLlama } from 'node-llama-cpp';
import { LLM } from '../dist/index.js';
import { headScore } from '../dist/scoring.js';
import { generatorFingerprint, writeRerankerModel } from '../dist-tooling/test/tooling/fixtures/index.js';
import { bestOfAlternating, root } from './common.mjs';

const { values: args } = parseArgs({
  options: {
    docs: { type: 'string', default: '16' }, 'doc-len': { type: 'string', default: '96' },
    threads: { type: 'string', default: '2' }, reps: { type: 'string', default: '3' },
  },
});
const nDocs = Number(args.docs), docLen = Number(args['doc-len']), threads = Number(args.threads), reps = Number(args.reps);
const spec = { weights: 'Q8_0', nEmbd: 1024, nLayer: 28, nHead: 16, nHeadKv: 8, headDim: 128, nFf: 3072, tiedEmbeddings: true, seed: 12 };
const key = createHash('sha256').update(JSON.stringify(spec)).update(generatorFingerprint()).digest('hex').slice(0, 12);
const path = join(root, 'bench', '.models', `qwen3-reranker-0.6b-q8_0-${key}.gguf`);
if (!existsSync(path)) {
  mkdirSync(dirname(path), { recursive: true });
  const t0 = performance.now();
  await writeRerankerModel(path + '.tmp', spec);
  renameSync(path + '.tmp', path);
  console.error(`generated ${path} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath: path });
const ctx = await model.createRankingContext({ contextSize: 1024, batchSize: 1024, threads });
const words = 'the of and to in is was for on that with as by at from his her an which or were are this be had'.split(' ');
const text = (n, salt) => Array.from({ length: n }, (_, i) => words[(i * 7 + salt * 13) % words.length]).join(' ');
const query = text(12, 1);
const inputs = Array.from({ length: nDocs }, (_, i) => ctx._getEvaluationInput(
  model.tokenize(query, false, 'trimLeadingSpace'), model.tokenize(text(docLen, i + 2), false, 'trimLeadingSpace')));
const llm = new LLM({ model: path, threads, maxModelLen: 1024, enablePrefixCaching: false });
await llm.ready();
const head = llm.modelInfo.classifier;

const spindle = async () => {
  const t0 = performance.now();
  const out = await llm.embed(inputs.map((ids) => ({ promptTokenIds: [...ids] })), { pooling: 'last', normalize: false });
  return { seconds: (performance.now() - t0) / 1000, scores: out.map((o) => headScore(head, o.outputs.embedding)) };
};
const llamacpp = async () => {
  const t0 = performance.now();
  const scores = [];
  for (const ids of inputs) scores.push(await ctx._evaluateRankingForInput(ids));
  return { seconds: (performance.now() - t0) / 1000, scores };
};

const { best, last: runs } = await bestOfAlternating({ spindle, llamacpp }, reps);
const last = { spindle: runs.spindle.scores, llamacpp: runs.llamacpp.scores };
const tokens = inputs.reduce((a, x) => a + x.length, 0);
console.log(JSON.stringify({
  model: 'qwen3-reranker-0.6b-q8_0', docs: nDocs, tokens_per_pair: Math.round(tokens / nDocs), threads,
  spindle_tok_s: tokens / best.spindle, llamacpp_tok_s: tokens / best.llamacpp, ratio: best.llamacpp / best.spindle,
  max_score_diff: Math.max(...last.spindle.map((s, i) => Math.abs(s - last.llamacpp[i]))),
}));
await ctx.dispose();
await model.dispose();
await llm.close();
