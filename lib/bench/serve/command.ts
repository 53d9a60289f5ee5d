// `spindle bench serve`: parse flags, resolve the model, build the random dataset, run, report.
// Invariant: main() returns an exit code and never throws: 0 after a run (failed requests are results,
// shown in the report), 1 when the run could not happen (bad server, bad model list, all warmups failed),
// 2 for bad flags.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { CommandIo } from '../../cli/io.js';
import { ArgsError, endpointUrl, HELP, parseBenchServeArgs, type BenchServeConfig } from './args.js';
import { BACKENDS, type Backend } from './backends.js';
import { editDataset, multiTurnDataset, randomDataset } from './dataset.js';
import { createAgents, destroyAgents, getJson, type Agents } from './http.js';
import { calculateMetrics, type BenchmarkMetrics } from './metrics.js';
import { createProgress } from './progress.js';
import { errorText } from './record.js';
import { buildResult, formatReport, resultFileName, type RunMeta } from './report.js';
import { runBenchmark, runMultiTurn, type RunResult } from './runner.js';

export type Io = CommandIo;

export interface BenchServeOutcome {
  result: Record<string, unknown>;
  metrics: BenchmarkMetrics;
  run: RunResult;
  report: string;
}

function authHeaders(cfg: BenchServeConfig): Record<string, string> {
  return cfg.apiKey ? { Authorization: `Bearer ${cfg.apiKey}` } : {};
}

async function resolveModel(cfg: BenchServeConfig, backend: Backend, agents: Agents): Promise<string> {
  if (cfg.model) return cfg.model;
  const url = cfg.baseUrl + backend.modelsPath;
  const doc = await getJson(url, authHeaders(cfg), agents).catch((e: unknown) => {
    throw new Error(`no --model given and the model list could not be read from ${url}: ${errorText(e)}`);
  });
  const model = backend.firstModel(doc);
  if (!model) throw new Error(`no --model given and ${url} lists no model`);
  return model;
}

function writeJson(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(value, null, 2) + '\n');
}

/** Runs one benchmark; throws only when it could not run. */
export async function runBenchServe(cfg: BenchServeConfig, io: Io): Promise<BenchServeOutcome> {
  const backend = BACKENDS[cfg.backend];
  const agents = createAgents();
  try {
    const model = await resolveModel(cfg, backend, agents);
    const meta: RunMeta = { model, url: endpointUrl(cfg, backend.defaultEndpoint), date: new Date() };
    const progress = createProgress(cfg.numPrompts, 'bench', io.stderr, !cfg.disableProgress);
    const common = {
      backend, agents, url: meta.url, model, headers: authHeaders(cfg), ignoreEos: cfg.ignoreEos,
      temperature: cfg.temperature, maxConcurrency: cfg.maxConcurrency, onProgress: (d: number, f: number) => progress.update(d, f),
    };
    let run: RunResult;
    if (cfg.dataset === 'multi-turn') {
      const mt = cfg.multiTurn;
      io.stderr.write(`bench serve: ${mt.conversations} conversations x ${mt.turns} turns to ${meta.url} (model ${model}), ` +
        `a shared ${mt.systemLen}-token system prompt, max concurrency ${cfg.maxConcurrency ?? 'unlimited'}\n`);
      run = await runMultiTurn(common, multiTurnDataset({ ...mt, outputLen: cfg.randomOutputLen, seed: cfg.seed }));
    } else {
      const requests = cfg.dataset === 'edit'
        ? editDataset({ numPrompts: cfg.numPrompts, textLen: cfg.editLen, seed: cfg.seed })
        : randomDataset({
          numPrompts: cfg.numPrompts, inputLen: cfg.randomInputLen, outputLen: cfg.randomOutputLen,
          rangeRatio: cfg.randomRangeRatio, seed: cfg.seed, prefixLen: cfg.randomPrefixLen, tokenIds: cfg.randomTokenIds,
        });
      const rate = cfg.requestRate === Infinity ? 'inf' : `${cfg.requestRate} req/s (Poisson)`;
      io.stderr.write(`bench serve: ${cfg.numPrompts} requests to ${meta.url} (model ${model}), rate ${rate}, ` +
        `max concurrency ${cfg.maxConcurrency ?? 'unlimited'}\n`);
      const warmProgress = createProgress(cfg.warmupRequests, 'warmup', io.stderr, !cfg.disableProgress);
      run = await runBenchmark({
        ...common, requests, requestRate: cfg.requestRate, warmupRequests: cfg.warmupRequests, seed: cfg.seed,
        onWarmupProgress: (d, f) => { warmProgress.update(d, f); if (d === cfg.warmupRequests) warmProgress.finish(); },
      });
    }
    progress.finish();
    const metrics = calculateMetrics(run.outputs, run.duration, cfg.metricPercentiles);
    const report = formatReport(cfg, meta, metrics, run);
    const result = buildResult(cfg, meta, metrics, run);
    io.stdout.write(report);
    if (cfg.outputJson) writeJson(cfg.outputJson, result);
    if (cfg.saveResult) writeJson(join(cfg.resultDir ?? '.', resultFileName(cfg, meta)), result);
    return { result, metrics, run, report };
  } finally {
    destroyAgents(agents);
  }
}

export async function main(argv: string[], io: Io = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  let cfg: BenchServeConfig | null;
  try {
    cfg = parseBenchServeArgs(argv);
  } catch (e) {
    if (!(e instanceof ArgsError)) throw e;
    io.stderr.write(`spindle bench serve: ${e.message}\n(see spindle bench serve --help)\n`);
    return 2;
  }
  if (cfg === null) {
    io.stdout.write(HELP);
    return 0;
  }
  try {
    await runBenchServe(cfg, io);
    return 0;
  } catch (e) {
    io.stderr.write(`spindle bench serve: ${errorText(e)}\n`);
    return 1;
  }
}
