// LoRA adapter cost: Spindle against llama.cpp (node-llama-cpp, the adapter given to its context) on the same GGUF
// and the same adapter file (llama.cpp's GGUF adapter format: rank R on every attention and FFN projection of every
// layer, F16, as convert_lora_to_gguf.py writes by default), same thread count, repetitions alternating engine by
// engine: pp = prompt tokens/s of one --pp-token prompt, tg = decode tokens/s of one sequence (first to last token).
// Also Spindle without the adapter (what the adapter costs it) and a batch of --seqs sequences where half run
// adapter A and half adapter B in the same engine steps (Spindle only: llama.cpp applies a context's adapters to
// every sequence of the context) against the same batch on the base model.
//   node bench/lora.mjs [--model llama1b-q4_k_m] [--rank 16] [--pp 512] [--tg 64] [--seqs 8] [--threads 2] [--reps 3]
import { createHash } from 'node:crypto';
import { existsSync, renameSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { getLlama } from 'node-llama-cpp';
import { Engine } from '../dist/index.js';
import { generatorFingerprint, resolveSpec, tensorPlan, tokenizerGguf, writeLoraAdapter } from '../dist-tooling/test/tooling/fixtures/index.js';
import { MODELS, modelPath, promptIds } from './common.mjs';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: 'llama1b-q4_k_m' }, rank: { type: 'string', default: '16' },
    pp: { type: 'string', default: '512' }, tg: { type: 'string', default: '64' }, seqs: { type: 'string', default: '8' },
    threads: { type: 'string', default: '2' }, reps: { type: 'string', default: '3' },
  },
});
const rank = Number(args.rank), ppLen = Number(args.pp), tgLen = Number(args.tg), nSeqs = Number(args.seqs);
const threads = Number(args.threads), reps = Number(args.reps);
const path = await modelPath(args.model);
const spec = resolveSpec({ ...MODELS[args.model], name: args.model });
const plan = tensorPlan(spec, tokenizerGguf(spec.tokenizer).nVocab);
const adapterPath = async (seed) => {
  const key = createHash('sha256').update(path).update(String(rank)).update(String(seed)).update(generatorFingerprint()).digest('hex').slice(0, 12);
  const p = path.replace(/\.gguf$/, `-lora-r${rank}-s${seed}-${key}.gguf`);
  if (!existsSync(p)) {
    await writeLoraAdapter(p + '.tmp', spec.arch, plan, { rank, alpha: 2 * rank, seed });
    renameSync(p + '.tmp', p);
  }
  return p;
};
const adapterA = await adapterPath(1), adapterB = await adapterPath(2);

const greedy = { temperature: 0, ignoreEos: true };
const engine = new Engine({ modelPath: path, threads, enablePrefixCaching: false, maxModelLen: 2048,
  loraModules: [{ name: 'a', path: adapterA }, { name: 'b', path: adapterB }] });
await engine.ready();
const decode = async (inputIds, maxNewTokens, lora) => {
  let n = 0, tFirst = 0;
  for await (const chunk of engine.generate({ inputIds, samplingParams: { ...greedy, maxNewTokens }, stream: true, loraPath: lora })) {
    if (n === 0 && chunk.outputIds.length > 0) tFirst = performance.now();
    n += chunk.outputIds.length;
  }
  return { tFirst, tLast: performance.now(), n };
};
const spindle = (lora) => async () => {
  let t0 = performance.now();
  await engine.generate({ inputIds: promptIds(ppLen, 1), samplingParams: { ...greedy, maxNewTokens: 1 }, loraPath: lora });
  const pp = ppLen / ((performance.now() - t0) / 1000);
  const { tFirst, tLast, n } = await decode(promptIds(8, 2), tgLen + 1, lora);
  t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: nSeqs }, (_, i) => decode(promptIds(8, 10 + i), tgLen,
    lora === null ? null : i % 2 === 0 ? 'a' : 'b')));
  const batch = runs.reduce((s, r) => s + r.n, 0) / ((Math.max(...runs.map((r) => r.tLast)) - t0) / 1000);
  return { pp, tg: (n - 1) / ((tLast - tFirst) / 1000), batch };
};

const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath: path });
const ctx = await model.createContext({ contextSize: 2048, batchSize: 512, threads, flashAttention: false,
  lora: { adapters: [{ filePath: adapterA }] } });
const seq = ctx.getSequence();
const llamacpp = async () => {
  await seq.clearHistory();
  let t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(promptIds(ppLen, 1));
  const pp = ppLen / ((performance.now() - t0) / 1000);
  await seq.clearHistory();
  let count = 0, tFirst = 0;
  for await (const _ of seq.evaluate(promptIds(8, 2), { temperature: 0 })) {
    if (++count === 1) tFirst = performance.now();
    if (count === tgLen + 1) break;
  }
  const tg = tgLen / ((performance.now() - tFirst) / 1000);
  return { pp, tg };
};

// Best of each figure over the repetitions (after one warm-up run each), engines alternating.
const runs = { spindleLora: spindle('a'), llamacppLora: llamacpp, spindleBase: spindle(null) };
const best = {};
for (const [name, run] of Object.entries(runs)) { await run(); best[name] = {}; }
for (let r = 0; r < reps; r++) {
  for (const [name, run] of Object.entries(runs)) {
    const x = await run();
    for (const k of ['pp', 'tg', 'batch']) if (x[k] !== undefined) best[name][k] = Math.max(best[name][k] ?? 0, x[k]);
  }
}
const s = best.spindleLora, l = best.llamacppLora, b = best.spindleBase;
console.log(JSON.stringify({
  model: args.model, rank, threads, pp: ppLen, tg: tgLen, seqs: nSeqs,
  spindle_lora: { pp: s.pp, tg: s.tg, batch_mixed_ab: s.batch }, llamacpp_lora: { pp: l.pp, tg: l.tg },
  spindle_base: { pp: b.pp, tg: b.tg, batch: b.batch },
  ratio_pp: s.pp / l.pp, ratio_tg: s.tg / l.tg, adapter_cost_tg: 1 - s.tg / b.tg, adapter_cost_batch: 1 - s.batch / b.batch,
}, null, 1));
await ctx.dispose();
await model.dispose();
await engine.shutdown();
