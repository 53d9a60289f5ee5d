// The benchmark loop: for each thread count one Engine, then every test: one uncounted warm-up run and
// -r measured runs, each finished test handed to onRecord at once (so output streams like llama-bench's).
// Invariants: the engine is shut down however the loop ends; a failure to load is a ModelLoadError (the
// model is unusable), a failure while measuring propagates as is; progress lines go only to `progress`.
import type { Writable } from 'node:stream';
import { Engine } from '../../engine.js';
import type { BenchConfig } from './args.js';
import { measureDecode, measurePrompt, type Sample } from './measure.js';
import type { ModelFileInfo } from '../../gguf/file-info.js';
import { createPromptSource, type PromptSource } from './prompt-tokens.js';
import { buildRecord, testName, type TestRecord, type TestSpec } from './record.js';

export class ModelLoadError extends Error {
  override name = 'ModelLoadError';
}

/** pp tests (one per -p value), then tg tests (each -n value with each -b value), as llama-bench orders them. */
export function planTests(cfg: Pick<BenchConfig, 'nPrompt' | 'nGen' | 'batch'>): TestSpec[] {
  const tests: TestSpec[] = cfg.nPrompt.map((p) => ({ kind: 'pp' as const, nPrompt: p, nGen: 0, nSeqs: 1 }));
  for (const n of cfg.nGen) for (const b of cfg.batch) tests.push({ kind: 'tg', nPrompt: 0, nGen: n, nSeqs: b });
  return tests;
}

/** Tokens of context the longest test needs: a pp prompt plus its one output, or 1 prompt token + n + 1. */
export function contextNeeded(cfg: Pick<BenchConfig, 'nPrompt' | 'nGen'>): number {
  return Math.max(2, ...cfg.nPrompt.map((p) => p + 1), ...cfg.nGen.map((n) => n + 2));
}

function runOnce(engine: Engine, spec: TestSpec, prompts: PromptSource): Promise<Sample> {
  if (spec.kind === 'pp') return measurePrompt(engine, prompts.next(spec.nPrompt));
  const ids = Array.from({ length: spec.nSeqs }, () => prompts.next(1));
  return measureDecode(engine, ids, spec.nGen);
}

async function openEngine(cfg: BenchConfig, model: ModelFileInfo, threads: number): Promise<Engine> {
  let engine: Engine;
  try {
    engine = new Engine({
      modelPath: model.path, threads, device: cfg.device, contextLength: contextNeeded(cfg),
      maxRunningRequests: Math.max(...cfg.batch),
    });
  } catch (e) {
    throw new ModelLoadError((e as Error).message);
  }
  try {
    await engine.ready();
  } catch (e) {
    await engine.shutdown().catch(() => {});
    throw new ModelLoadError((e as Error).message);
  }
  return engine;
}

export interface RunContext {
  cfg: BenchConfig;
  model: ModelFileInfo;
  version: string;
  progress: Writable;
  onRecord: (r: TestRecord) => void;
}

/** Runs every test of one model at one thread count. */
export async function runThreads(ctx: RunContext, threads: number): Promise<void> {
  const { cfg, model, progress } = ctx;
  const say = (line: string) => progress.write(`spindle bench: ${line}\n`);
  say(`loading ${model.path} (threads ${threads}, device ${cfg.device})`);
  const engine = await openEngine(cfg, model, threads);
  try {
    const tok = engine.tokenizer;
    const prompts = createPromptSource({
      vocabSize: tok.vocabSize, bosTokenId: tok.bosTokenId, eosTokenId: tok.eosTokenId,
      eogTokenIds: tok.eogTokenIds, addBos: engine.modelInfo.addBos,
    }, model.tokenTypes, cfg.seed);
    const tests = planTests(cfg);
    for (const [i, spec] of tests.entries()) {
      const label = `[${i + 1}/${tests.length}] ${testName(spec)} threads ${threads}`;
      if (cfg.warmup) {
        say(`${label}: warm-up`);
        await runOnce(engine, spec, prompts);
      }
      const samples: Sample[] = [];
      for (let r = 0; r < cfg.repetitions; r++) {
        const s = await runOnce(engine, spec, prompts);
        samples.push(s);
        say(`${label}: run ${r + 1}/${cfg.repetitions}: ${((s.tokens * 1e9) / s.ns).toFixed(2)} t/s`);
      }
      ctx.onRecord(buildRecord({ version: ctx.version, model, threads, seed: cfg.seed, bandwidthGBps: cfg.bandwidthGBps,
        device: engine.modelInfo.device }, spec, samples, new Date()));
    }
  } finally {
    await engine.shutdown();
  }
}
