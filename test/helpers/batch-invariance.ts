// The batch-invariance check shared by the dense, hybrid and MoE engine tests: 32 prompts of mixed lengths
// (3..300 tokens), half greedy and half seeded sampling, generated one at a time and then batched under several
// scheduler settings (prompts never split, chunked prefill, any extra settings the caller adds, and a memory
// budget so small that requests queue and are preempted); every batched run must give exactly the token ids of
// the one-at-a-time run.
import type { Test } from 'tap';
import { LLM } from '../../lib/index.js';
import type { NativeEngineStats } from '../../lib/native.js';

export const MAX_LEN = 320; // maxModelLen of every engine here
const OUT = 12; // tokens generated per prompt

/** 32 prompts of 3..300 token ids in [3, nVocab), deterministic. */
export function mixedPrompts(nVocab: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < 32; i++) {
    const len = 3 + ((i * 97) % 298);
    out.push(Array.from({ length: len }, (_, j) => 3 + ((i * 131 + j * 17) % (nVocab - 3))));
  }
  return out;
}

/** Even prompts greedy, odd prompts seeded top-k sampling; OUT tokens each, EOS ignored. */
function mixedParams(n: number): object[] {
  return Array.from({ length: n }, (_, i) => (i % 2 === 0
    ? { temperature: 0, maxTokens: OUT, ignoreEos: true }
    : { temperature: 0.9, topK: 20, seed: 1000 + i, maxTokens: OUT, ignoreEos: true }));
}

/** Token ids of every prompt (one generate call per prompt, or one call for all), and the engine's final stats. */
async function generateIds(model: string, opts: Record<string, unknown>, ps: number[][], params: object[], oneAtATime: boolean) {
  const llm = new LLM({ model, maxModelLen: MAX_LEN, threads: 2, ...opts });
  try {
    await llm.ready();
    const inputs = ps.map((p) => ({ promptTokenIds: p }));
    let ids: number[][];
    if (oneAtATime) {
      ids = [];
      for (let i = 0; i < inputs.length; i++) ids.push((await llm.generate(inputs[i], params[i]))[0].outputs[0].tokenIds);
    } else {
      ids = (await llm.generate(inputs, params)).map((o) => o.outputs[0].tokenIds);
    }
    return { ids, stats: llm.stats() };
  } finally {
    await llm.close();
  }
}

export interface InvarianceOptions {
  arch?: string; // expected modelInfo.arch
  minDistinct?: number; // the one-at-a-time outputs hold more distinct ids than this (they are not degenerate)
  extra?: { label: string; opts: Record<string, unknown> }[]; // more batched settings to compare
  tight: Record<string, unknown>; // engine options whose memory budget forces queueing and preemption
}

/** Runs the comparison as tap assertions; returns the stats of the tight-budget engine after its run. */
export async function checkBatchInvariance(t: Test, model: string, o: InvarianceOptions): Promise<NativeEngineStats> {
  const probe = new LLM({ model, maxModelLen: MAX_LEN, threads: 2 });
  await probe.ready();
  if (o.arch) t.equal(probe.modelInfo.arch, o.arch);
  const ps = mixedPrompts(probe.modelInfo.nVocab);
  await probe.close();
  const params = mixedParams(ps.length);
  const alone = await generateIds(model, {}, ps, params, true);
  if (o.minDistinct !== undefined) t.ok(new Set(alone.ids.flat()).size > o.minDistinct, 'the outputs are varied');
  const settings = [
    { label: 'prompts never split', opts: { chunkedPrefillSize: -1 } },
    { label: 'chunked prefill', opts: { chunkedPrefillSize: 64, maxNumBatchedTokens: 256 } },
    ...(o.extra ?? []),
  ];
  for (const { label, opts } of settings) t.same((await generateIds(model, opts, ps, params, false)).ids, alone.ids, `batched, ${label}`);
  const tight = await generateIds(model, o.tight, ps, params, false);
  t.same(tight.ids, alone.ids, 'batched with a tight memory budget');
  t.ok(tight.stats.preemptions > 0, `preemptions happened (${tight.stats.preemptions})`);
  t.equal(tight.stats.kvBlocksUsed, 0, 'every KV block free afterwards');
  t.equal(tight.stats.kvBlocksFree, tight.stats.kvBlocksTotal);
  return tight.stats;
}
