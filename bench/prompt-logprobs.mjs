// Scoring throughput (lm-evaluation-harness's loglikelihood requests: each prompt token's logprob given the ones
// before it): Spindle's prompt logprobs (LLM.generate with promptLogprobs, one token generated, as lm-eval's
// echo + logprobs + max_tokens 1) against llama.cpp (node-llama-cpp's controlledEvaluate asking the logits row of
// every position) on the same GGUF, same thread count, repetitions alternating engine by engine. llama.cpp computes
// every position's full logits row as Spindle does, but hands back only the next prompt token's raw logit (no
// normalization, no top alternatives): its figure is a lower bound of a scorer's cost. Input tokens/s for N
// prompts of L tokens (Spindle batches them; node-llama-cpp evaluates one sequence at a time), best of the
// repetitions; and the largest difference of the two engines' next-token logit gaps as a check.
//   node bench/prompt-logprobs.mjs [--model llama1b-q4_k_m] [--prompts 8] [--len 256] [--threads 2] [--reps 3]
import { parseArgs } from 'node:util';
import { getLlama } from 'node-llama-cpp';
import { LLM } from '../dist/index.js';
import { bestOfAlternating, modelPath, promptIds } from './common.mjs';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: 'llama1b-q4_k_m' }, prompts: { type: 'string', default: '8' },
    len: { type: 'string', default: '256' }, threads: { type: 'string', default: '2' }, reps: { type: 'string', default: '3' },
  },
});
const nPrompts = Number(args.prompts), len = Number(args.len), threads = Number(args.threads), reps = Number(args.reps);
const path = await modelPath(args.model);
const llm = new LLM({ model: path, threads, maxModelLen: Math.max(512, len + 16), enablePrefixCaching: false });
await llm.ready();
const prompts = Array.from({ length: nPrompts }, (_, i) => [llm.tokenizer.bosTokenId, ...promptIds(len - 1, 300 + i)]);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath: path });
const ctx = await model.createContext({ contextSize: Math.max(512, len + 16), batchSize: Math.max(512, len), threads, sequences: 1 });
const seq = ctx.getSequence();

const spindle = async () => {
  const t0 = performance.now();
  const out = await llm.generate(prompts.map((ids) => ({ promptTokenIds: ids })), { promptLogprobs: 0, maxTokens: 1, temperature: 0 });
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, scores: out.map((o, i) => prompts[i].slice(1).map((id, p) => o.promptLogprobs[p + 1][id].logprob)) };
};
const llamacpp = async () => {
  const t0 = performance.now();
  const scores = [];
  for (const ids of prompts) {
    await seq.clearHistory();
    const res = await seq.controlledEvaluate(ids.map((tok, p) => (p + 1 < ids.length
      ? [tok, { generateNext: { logits: { filter: { tokens: [ids[p + 1]], includeTop: 1 } } } }] : tok)));
    // raw logit of the next prompt token minus the row's largest logit (a scorer would normalize over the row)
    scores.push(ids.slice(1).map((id, p) => { const l = res[p].next.logits; return l.get(id) - Math.max(...l.values()); }));
  }
  return { seconds: (performance.now() - t0) / 1000, scores };
};

const { best, last: runs } = await bestOfAlternating({ spindle, llamacpp }, reps);
const last = { spindle: runs.spindle.scores, llamacpp: runs.llamacpp.scores };
// a check that both scored the same thing: Spindle's logprob gap to its top logprob equals llama.cpp's logit gap
const [ours] = await llm.generate({ promptTokenIds: prompts[0] }, { promptLogprobs: 1, maxTokens: 1, temperature: 0 });
let maxGapDiff = 0;
prompts[0].slice(1).forEach((id, p) => {
  const entry = ours.promptLogprobs[p + 1];
  const top = Math.max(...Object.values(entry).map((e) => e.logprob));
  maxGapDiff = Math.max(maxGapDiff, Math.abs((entry[id].logprob - top) - last.llamacpp[0][p]));
});
const tokens = nPrompts * len;
console.log(JSON.stringify({
  model: args.model, prompts: nPrompts, len, threads,
  spindle_tok_s: tokens / best.spindle, llamacpp_tok_s: tokens / best.llamacpp, ratio: best.llamacpp / best.spindle,
  max_gap_diff: maxGapDiff,
}));
await ctx.dispose();
await model.dispose();
await llm.close();
