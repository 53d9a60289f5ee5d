// Aggregate metrics with the definitions of vLLM's calculate_metrics (vllm/benchmarks/serve.py;
// formerly benchmarks/benchmark_serving.py), over successful requests only:
//   TTFT  = request sent -> first token chunk, per request
//   TPOT  = (e2e latency - TTFT) / (output_tokens - 1), per request with output_tokens > 1
//   ITL   = every gap between successive token chunks of every request, pooled (one entry per chunk)
//   E2EL  = request sent -> last generation event, per request
//   request throughput = completed / duration; output token throughput = sum(output_tokens) / duration;
//   total token throughput = (sum(prompt_tokens) + sum(output_tokens)) / duration
//   mean / median / std (population, numpy's default) / percentiles (numpy's linear interpolation), in ms;
//   an empty list gives 0, as np.mean(x or 0) does.
// output_tokens is the server's usage count; where a server reported none, vLLM without a tokenizer
// counts 1, here the number of token chunks is counted instead (exact for one-token-per-chunk servers),
// and tokenCounts in the result says so. Peak concurrent requests is vLLM's sweep over [start, end).
// Invariant: pure; the same outputs and duration give the same numbers.
import type { RequestOutput } from './types.js';

export interface Stats {
  mean: number; // ms
  median: number; // ms
  std: number; // ms
  percentiles: [number, number][]; // [p, ms]
}

export type CountSource = 'server' | 'client' | 'mixed' | 'none';

export interface BenchmarkMetrics {
  completed: number;
  failed: number;
  totalInput: number; // tokens
  totalOutput: number; // tokens
  requestThroughput: number; // req/s
  outputThroughput: number; // tok/s
  totalTokenThroughput: number; // tok/s
  ttft: Stats;
  tpot: Stats;
  itl: Stats;
  e2el: Stats;
  maxConcurrentRequests: number;
  /** per request, aligned with outputs (as vLLM: a failed request keeps its prompt length, output 0) */
  inputLens: number[];
  outputLens: number[];
  /** where the token counts came from: 'server' usage fields or the 'client' estimate */
  promptTokenSource: CountSource;
  outputTokenSource: CountSource;
  /** the first (up to 10) error messages */
  firstErrors: string[];
}

/** numpy.percentile with the default 'linear' method; p in [0, 100]. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

/** Stats of values in seconds, reported in ms. */
export function stats(valuesS: number[], ps: number[]): Stats {
  if (valuesS.length === 0) return { mean: 0, median: 0, std: 0, percentiles: ps.map((p) => [p, 0]) };
  const ms = valuesS.map((v) => v * 1000);
  const sorted = [...ms].sort((a, b) => a - b);
  const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
  const variance = ms.reduce((a, b) => a + (b - mean) * (b - mean), 0) / ms.length;
  return { mean, median: percentile(sorted, 50), std: Math.sqrt(variance), percentiles: ps.map((p) => [p, percentile(sorted, p)]) };
}

function source(server: number, total: number): CountSource {
  if (total === 0) return 'none';
  return server === total ? 'server' : server === 0 ? 'client' : 'mixed';
}

/** vLLM's sweep-line over half-open [start, end): departures before arrivals at equal times. */
export function peakConcurrency(outputs: RequestOutput[]): number {
  const events: [number, number][] = [];
  for (const o of outputs) {
    if (!o.success) continue;
    events.push([o.startTime, 1], [o.startTime + o.latency, -1]);
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  let peak = 0;
  for (const [, d] of events) peak = Math.max(peak, (cur += d));
  return peak;
}

export function calculateMetrics(outputs: RequestOutput[], durationS: number, ps: number[]): BenchmarkMetrics {
  const ttfts: number[] = [], tpots: number[] = [], itls: number[] = [], e2els: number[] = [];
  const inputLens: number[] = [], outputLens: number[] = [];
  let completed = 0, totalInput = 0, promptFromServer = 0, outputFromServer = 0;
  for (const o of outputs) {
    if (!o.success) {
      inputLens.push(o.promptLen);
      outputLens.push(0);
      continue;
    }
    const outLen = o.outputTokens ?? o.contentChunks;
    if (o.outputTokens !== null) outputFromServer++;
    if (o.promptLenFromServer) promptFromServer++;
    inputLens.push(o.promptLen);
    outputLens.push(outLen);
    totalInput += o.promptLen;
    if (outLen > 1) tpots.push((o.latency - o.ttft) / (outLen - 1));
    itls.push(...o.itl);
    ttfts.push(o.ttft);
    e2els.push(o.latency);
    completed++;
  }
  const totalOutput = outputLens.reduce((a, b) => a + b, 0);
  const dur = durationS > 0 ? durationS : Number.MIN_VALUE;
  return {
    completed,
    failed: outputs.length - completed,
    totalInput,
    totalOutput,
    requestThroughput: completed / dur,
    outputThroughput: totalOutput / dur,
    totalTokenThroughput: (totalInput + totalOutput) / dur,
    ttft: stats(ttfts, ps),
    tpot: stats(tpots, ps),
    itl: stats(itls, ps),
    e2el: stats(e2els, ps),
    maxConcurrentRequests: peakConcurrency(outputs),
    inputLens,
    outputLens,
    promptTokenSource: source(promptFromServer, completed),
    outputTokenSource: source(outputFromServer, completed),
    firstErrors: outputs.filter((o) => !o.success).slice(0, 10).map((o) => o.error),
  };
}
