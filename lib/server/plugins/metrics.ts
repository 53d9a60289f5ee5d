// The metrics plugin: a prom-client Registry of the app's own (never the global one, so two apps in one
// process never share or clash), vLLM's metric names under the `spindle:` prefix, labelled with model_name.
// Engine-level numbers (running / waiting requests, KV usage, prompt and generated tokens, preemptions, failed
// forward passes) are read from the engine's stats when /metrics is scraped; request-level timings (time to
// first token, inter-token latency, end to end, and the engine's queue / prefill / decode / inference phases)
// arrive through the GenerationObserver that every Job reports to; rejections count the 429 answers.
// In runner mode the numbers are the sums over the loaded engines (counters keep what unloaded ones counted),
// labelled model_name="runner".
// Invariants: counters only ever grow (engine counters are followed by their increments since the last
// scrape); histograms are in seconds; `fastify.metrics` exists before any route is registered.
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { FinishReason } from '../../native.js';
import type { RequestPhases } from '../../engine-core.js';
import type { GenerationObserver } from '../generation.js';
import { sharedPlugin } from '../plugin.js';
import type { NativeEngineStats } from '../../native.js';

/** What the metrics read: the one engine (ServerEngine), or the runner's sums over its engines (ModelRunner). */
export interface MetricsSource {
  modelName: string; // the model_name label ('runner' in runner mode)
  statsOrNull(): Partial<NativeEngineStats> | null;
  failedSteps: number;
}

// vLLM's buckets (vllm/v1/metrics/loggers.py), seconds
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
  20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0];
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
  480.0, 960.0, 1920.0, 7680.0];

/** A counter that follows a monotonic engine total: each scrape adds what grew since the last one. */
function followingCounter(registry: Registry, name: string, help: string, labels: Record<string, string>,
  read: () => number): Counter<string> {
  let seen = 0;
  const counter = new Counter({
    name, help, labelNames: Object.keys(labels), registers: [registry],
    collect() {
      const now = read();
      if (now > seen) this.inc(labels, now - seen);
      seen = Math.max(seen, now);
    },
  });
  counter.inc(labels, 0); // the series exists (at 0) from the first scrape
  return counter;
}

export class ServerMetrics implements GenerationObserver {
  readonly registry = new Registry();
  readonly #labels: Record<string, string>;
  readonly #ttft: Histogram<string>;
  readonly #itl: Histogram<string>;
  readonly #e2e: Histogram<string>;
  readonly #phases: Record<keyof RequestPhases, Histogram<string>>;
  readonly #success: Counter<string>;
  readonly #rejected: Counter<string>;

  constructor(engine: MetricsSource) {
    const labels = { model_name: engine.modelName };
    this.#labels = labels;
    const reg = this.registry;
    const labelNames = Object.keys(labels);
    const stat = (key: 'running' | 'waiting' | 'kvBlocksTotal' | 'kvBlocksUsed' | 'promptTokens' | 'generatedTokens' | 'preemptions'
      | 'steps' | 'stepSeconds' | 'forwardSeconds' | 'prefixCacheQueries' | 'prefixCacheHits' | 'specDrafts' | 'specDraftTokens' | 'specAcceptedTokens', fallback: number): number => engine.statsOrNull()?.[key] ?? fallback;
    const gauge = (name: string, help: string, read: () => number): void => {
      new Gauge({ name, help, labelNames, registers: [reg], collect() { this.set(labels, read()); } });
    };
    gauge('spindle:num_requests_running', 'Number of requests in model execution batches.', () => stat('running', 0));
    gauge('spindle:num_requests_waiting', 'Number of requests waiting to be processed.', () => stat('waiting', 0));
    gauge('spindle:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', () => {
      const total = stat('kvBlocksTotal', 0);
      return total > 0 ? stat('kvBlocksUsed', 0) / total : 0;
    });
    followingCounter(reg, 'spindle:prompt_tokens_total', 'Number of prefill tokens processed.', labels, () => stat('promptTokens', 0));
    followingCounter(reg, 'spindle:generation_tokens_total', 'Number of generation tokens processed.', labels, () => stat('generatedTokens', 0));
    followingCounter(reg, 'spindle:num_preemptions_total', 'Cumulative number of preemptions from the engine.', labels, () => stat('preemptions', 0));
    followingCounter(reg, 'spindle:prefix_cache_queries_total',
      'Prefix cache queries, in terms of number of queried tokens.', labels, () => stat('prefixCacheQueries', 0));
    followingCounter(reg, 'spindle:prefix_cache_hits_total',
      'Prefix cache hits, in terms of number of cached tokens.', labels, () => stat('prefixCacheHits', 0));
    followingCounter(reg, 'spindle:spec_decode_num_drafts_total', 'Number of spec decoding drafts.', labels,
      () => stat('specDrafts', 0));
    followingCounter(reg, 'spindle:spec_decode_num_draft_tokens_total', 'Number of draft tokens.', labels,
      () => stat('specDraftTokens', 0));
    followingCounter(reg, 'spindle:spec_decode_num_accepted_tokens_total', 'Number of accepted tokens.', labels,
      () => stat('specAcceptedTokens', 0));
    followingCounter(reg, 'spindle:engine_steps_total', 'Engine steps run (each one forward pass over the batch).', labels,
      () => stat('steps', 0));
    followingCounter(reg, 'spindle:engine_step_seconds_total',
      'Wall time of the engine steps: scheduling, forward pass, sampling and bookkeeping.', labels, () => stat('stepSeconds', 0));
    followingCounter(reg, 'spindle:engine_forward_seconds_total',
      'Of the steps\' wall time, the forward passes (host work and device).', labels, () => stat('forwardSeconds', 0));
    followingCounter(reg, 'spindle:engine_failed_steps_total', 'Engine steps whose forward pass failed (their requests failed).',
      labels, () => engine.failedSteps);
    this.#ttft = new Histogram({ name: 'spindle:time_to_first_token_seconds', help: 'Histogram of time to first token in seconds.',
      labelNames, buckets: TTFT_BUCKETS, registers: [reg] });
    this.#itl = new Histogram({ name: 'spindle:inter_token_latency_seconds', help: 'Histogram of inter-token latency in seconds.',
      labelNames, buckets: ITL_BUCKETS, registers: [reg] });
    this.#e2e = new Histogram({ name: 'spindle:e2e_request_latency_seconds', help: 'Histogram of e2e request latency in seconds.',
      labelNames, buckets: E2E_BUCKETS, registers: [reg] });
    const phase = (name: string, help: string): Histogram<string> => new Histogram({ name, help, labelNames, buckets: E2E_BUCKETS,
      registers: [reg] });
    this.#phases = {
      queueSeconds: phase('spindle:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.'),
      prefillSeconds: phase('spindle:request_prefill_time_seconds', 'Histogram of time spent in PREFILL phase for request.'),
      decodeSeconds: phase('spindle:request_decode_time_seconds', 'Histogram of time spent in DECODE phase for request.'),
      inferenceSeconds: phase('spindle:request_inference_time_seconds', 'Histogram of time spent in RUNNING phase for request.'),
    };
    this.#success = new Counter({ name: 'spindle:request_success_total', help: 'Count of finished requests by finish reason.',
      labelNames: [...labelNames, 'finished_reason'], registers: [reg] });
    this.#rejected = new Counter({ name: 'spindle:num_requests_rejected_total',
      help: 'Requests refused with 429 because the queue was full (--max-queued-requests).', labelNames, registers: [reg] });
    this.#rejected.inc(labels, 0);
    for (const h of [this.#ttft, this.#itl, this.#e2e, ...Object.values(this.#phases)]) h.zero(labels);
    for (const reason of ['stop', 'length', 'abort', 'error']) this.#success.inc({ ...labels, finished_reason: reason }, 0);
  }

  firstToken(seconds: number): void { this.#ttft.observe(this.#labels, seconds); }

  interToken(seconds: number, tokens: number): void {
    const per = seconds / Math.max(1, tokens);
    for (let i = 0; i < tokens; i++) this.#itl.observe(this.#labels, per);
  }

  finished(reason: FinishReason | 'error', e2eSeconds: number): void {
    this.#e2e.observe(this.#labels, e2eSeconds);
    this.#success.inc({ ...this.#labels, finished_reason: reason });
  }

  phases(p: RequestPhases): void {
    for (const key of Object.keys(this.#phases) as (keyof RequestPhases)[]) {
      const v = p[key];
      if (v !== undefined) this.#phases[key].observe(this.#labels, v);
    }
  }

  rejected(): void { this.#rejected.inc(this.#labels); }
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: ServerMetrics;
  }
}

/** Needs the engine plugin registered first (it reads `fastify.engine` or `fastify.runner`). */
export const metricsPlugin = sharedPlugin(async (app: FastifyInstance) => {
  const metrics = new ServerMetrics(app.runner ?? app.engine);
  app.decorate('metrics', metrics);
  app.addHook('onResponse', async (_request, reply) => {
    if (reply.statusCode === 429) metrics.rejected();
  });
}, 'spindle-metrics');
