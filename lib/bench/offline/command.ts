// `spindle bench`: parse flags, read every model's GGUF header, run the tests, print the report to stdout.
// Invariant: main() never throws and never prints a stack trace; it returns 0 after a complete run, 2 for bad
// flags or an unusable model file (missing, not GGUF, too short a context, fails to load), 1 when a
// measurement fails (the tests finished before are still printed as a complete document).
import { spindleVersion } from '../../version.js';
import type { CommandIo } from '../../cli/io.js';
import { ArgsError, HELP, parseBenchArgs, type BenchConfig } from './args.js';
import { ModelFileError, readModelFileInfo, type ModelFileInfo } from '../../gguf/file-info.js';
import type { TestRecord } from './record.js';
import { createPrinter } from './report.js';
import { contextNeeded, ModelLoadError, runThreads } from './runner.js';

export type Io = CommandIo;

/** A problem with the model given to -m: exit code 2. */
class ModelArgError extends Error {}


/** Reads and checks every model before anything runs, so a typo in the last -m fails at once. */
export function inspectModels(cfg: BenchConfig): ModelFileInfo[] {
  const need = contextNeeded(cfg);
  return cfg.models.map((path) => {
    let info: ModelFileInfo;
    try {
      info = readModelFileInfo(path);
    } catch (e) {
      if (e instanceof ModelFileError) throw new ModelArgError(`-m ${path}: ${e.message}`);
      throw e;
    }
    if (info.ctxTrain !== null && info.ctxTrain > 0 && need > info.ctxTrain) {
      throw new ModelArgError(`-p/-n: the longest test needs ${need} tokens of context, but ${path} was trained for ` +
        `${info.ctxTrain}`);
    }
    return info;
  });
}

/** Runs the whole benchmark, printing as it goes; returns the records. Throws on failure. */
export async function runBench(cfg: BenchConfig, io: Io): Promise<TestRecord[]> {
  const models = inspectModels(cfg);
  const v = spindleVersion();
  const printer = createPrinter(cfg.output, { version: v, bandwidth: cfg.bandwidthGBps !== null });
  const records: TestRecord[] = [];
  const onRecord = (r: TestRecord) => {
    if (records.length === 0) io.stdout.write(printer.header());
    records.push(r);
    io.stdout.write(printer.test(r));
  };
  try {
    for (const model of models) {
      for (const threads of cfg.threads) {
        try {
          await runThreads({ cfg, model, version: v, progress: io.stderr, onRecord }, threads);
        } catch (e) {
          if (e instanceof ModelLoadError) throw new ModelArgError(`-m ${model.path}: the model failed to load: ${e.message}`);
          throw e;
        }
      }
    }
  } finally {
    if (records.length > 0) io.stdout.write(printer.footer()); // stdout stays empty when no test finished
  }
  return records;
}

export async function main(argv: string[], io: Io = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  let cfg: BenchConfig | null;
  try {
    cfg = parseBenchArgs(argv);
  } catch (e) {
    const message = e instanceof ArgsError ? e.message : String((e as Error)?.message ?? e);
    io.stderr.write(`spindle bench: ${message}\n(see spindle bench --help)\n`);
    return 2;
  }
  if (cfg === null) {
    io.stdout.write(HELP);
    return 0;
  }
  try {
    await runBench(cfg, io);
    return 0;
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    io.stderr.write(`spindle bench: ${message}\n`);
    return e instanceof ModelArgError ? 2 : 1;
  }
}
