// One result row of `spindle bench`: the test, the model, the settings, the raw samples and their statistics.
// Field names follow llama-bench's JSON (model_size, n_threads, avg_ts, stddev_ts, samples_ns, samples_ts)
// where the meaning is the same. Invariant: avg and stddev are computed from the samples as llama-bench does
// (mean; sample standard deviation, n - 1, 0 for a single sample); every number is finite.
import { cpus } from 'node:os';
import { decodeBytesPerToken, type ModelFileInfo } from '../../gguf/file-info.js';
import type { Sample } from './measure.js';

export interface TestSpec {
  kind: 'pp' | 'tg';
  nPrompt: number; // pp: prompt tokens; tg: 0 (the 1-token prompt is not counted)
  nGen: number; // tg: tokens per sequence; pp: 0
  nSeqs: number; // sequences at once (pp: 1)
}

export interface TestRecord {
  spindle_version: string;
  cpu_info: string;
  backends: string; // the backend the model ran on, as llama-bench spells it: CPU, CUDA
  model_filename: string;
  model_type: string; // "<arch> <size label> <file type>", as llama.cpp's llama_model_desc
  model_size: number; // bytes of tensor data
  model_file_size: number; // bytes
  model_n_params: number;
  model_file_type: number | null; // general.file_type
  n_threads: number;
  n_prompt: number;
  n_gen: number;
  n_seqs: number;
  seed: number;
  test: string; // pp512, tg128, tg128@b16
  test_time: string; // RFC 3339
  avg_ns: number;
  stddev_ns: number;
  avg_ts: number; // tokens/s
  stddev_ts: number;
  bandwidth_gbps: number | null; // --bandwidth
  bw_bound_ts: number | null; // tg: n_seqs * bandwidth / bytes a decoded token reads (decodeBytesPerToken); pp: null
  bw_pct: number | null; // 100 * avg_ts / bw_bound_ts
  samples_ns: number[];
  samples_ts: number[];
  samples_tokens: number[]; // tokens counted in each sample
  samples_stagger_ns: number[]; // tg@bB: spread of the sequences' first tokens in each sample
}

export function testName(t: TestSpec): string {
  if (t.kind === 'pp') return `pp${t.nPrompt}`;
  return t.nSeqs > 1 ? `tg${t.nGen}@b${t.nSeqs}` : `tg${t.nGen}`;
}

export function mean(v: readonly number[]): number {
  return v.length === 0 ? 0 : v.reduce((a, b) => a + b, 0) / v.length;
}

/** Sample standard deviation (n - 1); 0 for fewer than two values. */
export function stddev(v: readonly number[]): number {
  if (v.length <= 1) return 0;
  const m = mean(v);
  return Math.sqrt(v.reduce((a, x) => a + (x - m) * (x - m), 0) / (v.length - 1));
}

function paramsLabel(n: number): string {
  return n < 1e9 ? `${Math.round(n / 1e6)}M` : `${(n / 1e9).toFixed(1)}B`;
}

export function modelType(info: ModelFileInfo): string {
  return `${info.arch} ${info.sizeLabel ?? paramsLabel(info.nParams)} ${info.fileTypeName ?? '?'}`;
}

export interface RecordContext {
  version: string;
  model: ModelFileInfo;
  threads: number;
  seed: number;
  bandwidthGBps: number | null;
  device: string | null; // modelInfo.device of the engine that ran the test
}

export function buildRecord(ctx: RecordContext, spec: TestSpec, samples: readonly Sample[], when: Date): TestRecord {
  const ns = samples.map((s) => s.ns);
  const ts = samples.map((s) => (s.tokens * 1e9) / s.ns);
  const avgTs = mean(ts);
  const decodeBytes = decodeBytesPerToken(ctx.model);
  const bound = spec.kind === 'tg' && ctx.bandwidthGBps !== null && decodeBytes > 0
    ? (spec.nSeqs * ctx.bandwidthGBps * 1e9) / decodeBytes : null;
  return {
    spindle_version: ctx.version,
    cpu_info: cpus()[0]?.model.trim() ?? 'unknown',
    backends: (ctx.device ?? 'cpu').toUpperCase(),
    model_filename: ctx.model.path,
    model_type: modelType(ctx.model),
    model_size: ctx.model.weightBytes,
    model_file_size: ctx.model.fileBytes,
    model_n_params: ctx.model.nParams,
    model_file_type: ctx.model.fileType,
    n_threads: ctx.threads,
    n_prompt: spec.nPrompt,
    n_gen: spec.nGen,
    n_seqs: spec.nSeqs,
    seed: ctx.seed,
    test: testName(spec),
    test_time: when.toISOString().replace(/\.\d+Z$/, 'Z'),
    avg_ns: Math.round(mean(ns)),
    stddev_ns: Math.round(stddev(ns)),
    avg_ts: avgTs,
    stddev_ts: stddev(ts),
    bandwidth_gbps: ctx.bandwidthGBps,
    bw_bound_ts: bound,
    bw_pct: bound === null ? null : (100 * avgTs) / bound,
    samples_ns: ns,
    samples_ts: ts,
    samples_tokens: samples.map((s) => s.tokens),
    samples_stagger_ns: samples.map((s) => s.staggerNs),
  };
}
