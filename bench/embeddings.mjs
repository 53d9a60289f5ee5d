// Embedding throughput: Spindle's LLM.embed against llama.cpp's embedding context (node-llama-cpp) on the same
// GGUF, same thread count, repetitions alternating engine by engine. One figure per engine: input tokens/s for
// a batch of N inputs of L tokens (Spindle batches them into engine steps; node-llama-cpp's embedding context
// takes one input at a time, as its API does), best of the repetitions; and the cosine similarity of the two
// engines' vectors (both unnormalized, last-token pooling for a file without a pooling type) as a check.
//   node bench/embeddings.mjs [--model llama1b-q4_k_m] [--inputs 16] [--len 128] [--threads 2] [--reps 3]
import { parseArgs } from 'node:util';
import { getLlama } from 'node-llama-cpp';
import { LLM } from '../dist/index.js';
import { bestOfAlternating, modelPath, promptIds } from './common.mjs';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: 'llama1b-q4_k_m' }, inputs: { type: 'string', default: '16' },
    len: { type: 'string', default: '128' }, threads: { type: 'string', default: '2' }, reps: { type: 'string', default: '3' },
  },
});
const nInputs = Number(args.inputs), len = Number(args.len), threads = Number(args.threads), reps = Number(args.reps);
const path = await modelPath(args.model);
const llm = new LLM({ model: path, threads, maxModelLen: Math.max(512, len + 16), enablePrefixCaching: false });
await llm.ready();
// BOS first, as text tokenized with the model's special tokens starts (node-llama-cpp prepends it otherwise)
const inputs = Array.from({ length: nInputs }, (_, i) => [llm.tokenizer.bosTokenId, ...promptIds(len - 1, 100 + i)]);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath: path });
const ctx = await model.createEmbeddingContext({ contextSize: Math.max(512, len + 16), batchSize: Math.max(512, len), threads });

const spindle = async () => {
  const t0 = performance.now();
  const out = await llm.embed(inputs.map((ids) => ({ promptTokenIds: ids })), { normalize: false });
  return { seconds: (performance.now() - t0) / 1000, vectors: out.map((o) => o.outputs.embedding) };
};
const llamacpp = async () => {
  const t0 = performance.now();
  const vectors = [];
  for (const ids of inputs) vectors.push([...(await ctx.getEmbeddingFor(ids)).vector]);
  return { seconds: (performance.now() - t0) / 1000, vectors };
};

const { best, last: runs } = await bestOfAlternating({ spindle, llamacpp }, reps);
const last = { spindle: runs.spindle.vectors, llamacpp: runs.llamacpp.vectors };
const cos = (a, b) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
};
const minCos = Math.min(...last.spindle.map((v, i) => cos(v, last.llamacpp[i])));
const tokens = nInputs * len;
const result = {
  model: args.model, inputs: nInputs, len, threads,
  spindle_tok_s: tokens / best.spindle, llamacpp_tok_s: tokens / best.llamacpp, ratio: best.llamacpp / best.spindle,
  min_cosine: minCos,
};
console.log(JSON.stringify(result));
await ctx.dispose();
await model.dispose();
await llm.close();
