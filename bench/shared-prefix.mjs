// In-batch prefix sharing: prompts that arrive together and share a long prefix, scheduled so the prefix is computed
// once (native/engine/scheduler.cpp, waits_for_shared_prefix). Two workloads, each at the CPU's step budget (256
// tokens) and a GPU-sized one (2048):
//   n-samples:   one --prefix-token prompt with n = --seqs samples of --tg tokens;
//   system:      --seqs requests at once, each the same --prefix-token prefix plus 32 tokens of its own.
// Each batch is submitted while the engine is busy decoding another request (as on a loaded server), so its requests
// reach the scheduler together; on an idle CPU engine the first one's long prefill would otherwise run before the
// others even arrive, and they would find its blocks cached anyway.
// Reported per run: prompt tokens the engine computed (deterministic: stats().computedTokens minus the decode
// tokens), the ideal (the prefix once, plus each request's own tail), and the wall time of the whole batch. Run it
// once with the addon to measure and once with SPINDLE_NATIVE_PATH pointing at an addon built without the change to
// compare (the TypeScript layer is the same).
//   node bench/shared-prefix.mjs [--model llama1b-q4_k_m] [--prefix 1024] [--seqs 8] [--tg 8] [--threads 2]
import { parseArgs } from 'node:util';
import { LLM } from '../dist/index.js';
import { modelPath, promptIds } from './common.mjs';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: 'llama1b-q4_k_m' }, prefix: { type: 'string', default: '1024' },
    seqs: { type: 'string', default: '8' }, tg: { type: 'string', default: '8' }, threads: { type: 'string', default: '2' },
  },
});
const prefixLen = Number(args.prefix), seqs = Number(args.seqs), tg = Number(args.tg), threads = Number(args.threads);
const path = await modelPath(args.model);
const prefix = promptIds(prefixLen, 1);
const params = { temperature: 0, ignoreEos: true, maxTokens: tg };
const addon = process.env.SPINDLE_NATIVE_PATH ?? 'the build in build/Release';

for (const budget of [256, 2048]) {
  const llm = new LLM({ model: path, threads, maxModelLen: 4096, maxNumBatchedTokens: budget });
  await llm.ready();
  const workloads = {
    'n-samples': async () => llm.generate({ promptTokenIds: prefix }, { ...params, n: seqs, seed: 1, temperature: 1 }),
    system: async () => llm.generate(Array.from({ length: seqs }, (_, i) => ({ promptTokenIds: [...prefix, ...promptIds(32, 100 + i)] })), params),
  };
  const ideal = { 'n-samples': prefixLen, system: prefixLen + seqs * 32 };
  for (const [name, run] of Object.entries(workloads)) {
    await llm.resetPrefixCache();
    const before = llm.stats();
    // a request already decoding: the batch arrives while the engine is busy (its 4 prompt and 63 decode tokens are
    // subtracted below)
    const busy = llm.generate({ promptTokenIds: promptIds(4, 999) }, { ...params, maxTokens: 64 });
    while (llm.stats().running === 0) await new Promise((r) => setTimeout(r, 1));
    const t0 = performance.now();
    await run();
    const ms = performance.now() - t0;
    await busy;
    const computed = llm.stats().computedTokens - before.computedTokens - seqs * (tg - 1) - (4 + 63); // minus the decode steps' tokens
    console.log(`${args.model} budget ${budget} ${name}: prompt tokens computed ${computed} (ideal ${ideal[name]}, all ${seqs * (ideal[name] === prefixLen ? prefixLen : prefixLen + 32)}), ${(ms / 1000).toFixed(2)} s  [${addon}]`);
  }
  await llm.close();
}
