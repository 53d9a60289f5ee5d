// The human-readable result table (vLLM's layout: 40-column labels, 50-column section rules) and the
// result JSON (vLLM's key names: duration, completed, ..., mean_ttft_ms, p99_ttft_ms, ttfts, itls, ...,
// plus Spindle's token_counts, first_errors and warmup).
// Invariant: per-request arrays are in seconds (as vLLM writes them), aggregate *_ms fields in ms;
// request_rate is the string 'inf' when unlimited (JSON has no Infinity).
import type { BenchServeConfig } from './args.js';
import type { BenchmarkMetrics, CountSource, Stats } from './metrics.js';
import type { RunResult } from './runner.js';

export interface RunMeta {
  model: string;
  url: string; // generation endpoint
  date: Date;
}

const METRICS: [key: 'ttft' | 'tpot' | 'itl' | 'e2el', name: string, header: string][] = [
  ['ttft', 'TTFT', 'Time to First Token'],
  ['tpot', 'TPOT', 'Time per Output Token (excl. 1st token)'],
  ['itl', 'ITL', 'Inter-token Latency'],
  ['e2el', 'E2EL', 'End-to-end Latency'],
];

const COUNT_TEXT: Record<CountSource, [prompt: string, output: string]> = {
  server: ['server usage', 'server usage'],
  client: ['client word estimate', 'streamed chunks'],
  mixed: ['mixed server/estimate', 'mixed server/chunks'],
  none: ['none', 'none'],
};

/** vLLM's percentile key word: 99 -> '99', 99.9 -> '99.9' (JS String() already drops a '.0'). */
export function percentileWord(p: number): string {
  return String(p);
}

function rule(title: string, ch: string): string {
  const pad = Math.max(0, 50 - title.length);
  const left = Math.floor(pad / 2);
  return ch.repeat(left) + title + ch.repeat(pad - left);
}

const row = (label: string, value: string | number) => `${label.padEnd(40)} ${String(value)}`;
const f2 = (v: number) => v.toFixed(2);

/** Multi-turn runs: the mean TTFT (ms) of each turn's successful requests, turn 1 first. */
export function turnTtfts(run: RunResult): number[] {
  if (!run.turns) return [];
  const sum: number[] = [];
  const count: number[] = [];
  run.outputs.forEach((o, i) => {
    if (!o.success) return;
    const t = run.turns![i];
    sum[t] = (sum[t] ?? 0) + o.ttft * 1000;
    count[t] = (count[t] ?? 0) + 1;
  });
  return sum.map((v, t) => v / count[t]);
}

/** Multi-turn runs: the mean TTFT (ms) of every request after its conversation's first turn. */
export function laterTurnsTtft(run: RunResult): number | null {
  if (!run.turns) return null;
  const later = run.outputs.filter((o, i) => o.success && run.turns![i] > 0).map((o) => o.ttft * 1000);
  return later.length > 0 ? later.reduce((a, b) => a + b, 0) / later.length : null;
}

export function formatReport(cfg: BenchServeConfig, meta: RunMeta, m: BenchmarkMetrics, run: RunResult): string {
  const lines = [rule(' Serving Benchmark Result ', '=')];
  lines.push(row('Backend:', cfg.backend), row('Model:', meta.model), row('Endpoint:', meta.url));
  lines.push(row('Successful requests:', m.completed), row('Failed requests:', m.failed));
  if (cfg.maxConcurrency !== null) lines.push(row('Maximum request concurrency:', cfg.maxConcurrency));
  if (cfg.requestRate !== Infinity) lines.push(row('Request rate configured (RPS):', f2(cfg.requestRate)));
  lines.push(row('Benchmark duration (s):', f2(run.duration)));
  lines.push(row('Total input tokens:', m.totalInput), row('Total generated tokens:', m.totalOutput));
  lines.push(row('Request throughput (req/s):', f2(m.requestThroughput)));
  lines.push(row('Output token throughput (tok/s):', f2(m.outputThroughput)));
  lines.push(row('Peak concurrent requests:', m.maxConcurrentRequests));
  lines.push(row('Total token throughput (tok/s):', f2(m.totalTokenThroughput)));
  lines.push(row('Input token counts from:', COUNT_TEXT[m.promptTokenSource][0]));
  lines.push(row('Output token counts from:', COUNT_TEXT[m.outputTokenSource][1]));
  for (const [key, name, header] of METRICS) {
    const s: Stats = m[key];
    lines.push(rule(header, '-'));
    lines.push(row(`Mean ${name} (ms):`, f2(s.mean)), row(`Median ${name} (ms):`, f2(s.median)));
    for (const [p, v] of s.percentiles) lines.push(row(`P${percentileWord(p)} ${name} (ms):`, f2(v)));
  }
  if (run.turns) {
    lines.push(rule('Multi-turn', '-'));
    turnTtfts(run).forEach((v, t) => lines.push(row(`Mean TTFT turn ${t + 1} (ms):`, f2(v))));
    const later = laterTurnsTtft(run);
    if (later !== null) lines.push(row('Mean TTFT of turns 2+ (ms):', f2(later)));
  }
  lines.push('='.repeat(50));
  if (m.firstErrors.length > 0) {
    lines.push(`Failed requests (first ${m.firstErrors.length}):`);
    m.firstErrors.forEach((e, i) => lines.push(`  Error ${i}: ${e}`));
  }
  return lines.join('\n') + '\n';
}

export function buildResult(cfg: BenchServeConfig, meta: RunMeta, m: BenchmarkMetrics, run: RunResult): Record<string, unknown> {
  const r: Record<string, unknown> = {
    date: dateStamp(meta.date),
    backend: cfg.backend, model_id: meta.model, base_url: cfg.baseUrl, endpoint: meta.url, dataset_name: cfg.dataset,
    num_prompts: cfg.numPrompts, request_rate: cfg.requestRate === Infinity ? 'inf' : cfg.requestRate, burstiness: 1.0,
    max_concurrency: cfg.maxConcurrency, random_input_len: cfg.randomInputLen, random_output_len: cfg.randomOutputLen,
    random_range_ratio: cfg.randomRangeRatio, random_prefix_len: cfg.randomPrefixLen, seed: cfg.seed, ignore_eos: cfg.ignoreEos, temperature: cfg.temperature,
    warmup: run.warmup,
    duration: run.duration, completed: m.completed, failed: m.failed,
    total_input_tokens: m.totalInput, total_output_tokens: m.totalOutput,
    request_throughput: m.requestThroughput, output_throughput: m.outputThroughput,
    total_token_throughput: m.totalTokenThroughput, max_concurrent_requests: m.maxConcurrentRequests,
    token_counts: { prompt: m.promptTokenSource, output: m.outputTokenSource },
  };
  for (const [key] of METRICS) {
    const s = m[key];
    r[`mean_${key}_ms`] = s.mean;
    r[`median_${key}_ms`] = s.median;
    r[`std_${key}_ms`] = s.std;
    for (const [p, v] of s.percentiles) r[`p${percentileWord(p)}_${key}_ms`] = v;
  }
  const outs = run.outputs;
  Object.assign(r, {
    input_lens: m.inputLens, output_lens: m.outputLens,
    ttfts: outs.map((o) => o.ttft), itls: outs.map((o) => o.itl), latencies: outs.map((o) => o.latency),
    start_times: outs.map((o) => o.startTime - run.startTime), queue_times: outs.map((o) => o.queueTime),
    errors: outs.map((o) => o.error), first_errors: m.firstErrors, generated_texts: outs.map((o) => o.generatedText),
  });
  if (run.turns) {
    Object.assign(r, {
      multi_turn: { ...cfg.multiTurn, output_len: cfg.randomOutputLen },
      turns: run.turns, mean_ttft_ms_by_turn: turnTtfts(run), mean_ttft_ms_later_turns: laterTurnsTtft(run),
    });
  }
  return r;
}

function dateStamp(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/** vLLM's --save-result name: {backend}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json */
export function resultFileName(cfg: BenchServeConfig, meta: RunMeta): string {
  if (cfg.resultFilename) return cfg.resultFilename;
  const rate = cfg.requestRate === Infinity ? 'inf' : Number.isInteger(cfg.requestRate) ? `${cfg.requestRate}.0` : String(cfg.requestRate);
  const conc = cfg.maxConcurrency !== null ? `-concurrency${cfg.maxConcurrency}` : '';
  const model = meta.model.split('/').pop()!.replace(/[^A-Za-z0-9._:-]/g, '_');
  return `${cfg.backend}-${rate}qps${conc}-${model}-${dateStamp(meta.date)}.json`;
}
