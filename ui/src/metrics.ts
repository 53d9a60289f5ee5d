// The engine's status from GET /metrics (Prometheus text): running and waiting requests, KV-cache use, and
// generated tokens per second from two successive samples of the generation counter.

export interface MetricsSample {
  at: number; // ms (performance.now())
  running: number;
  waiting: number;
  kvUsage: number; // 0..1
  generatedTokens: number; // the counter's value
}

/** The sum over label sets of each `spindle:` metric named in the text. */
export function parseMetrics(text: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line.startsWith('spindle:')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3]);
    if (Number.isFinite(v)) sums.set(m[1], (sums.get(m[1]) ?? 0) + v);
  }
  return sums;
}

export function sampleOf(text: string, at: number): MetricsSample {
  const m = parseMetrics(text);
  return {
    at,
    running: m.get('spindle:num_requests_running') ?? 0,
    waiting: m.get('spindle:num_requests_waiting') ?? 0,
    kvUsage: m.get('spindle:kv_cache_usage_perc') ?? 0,
    generatedTokens: m.get('spindle:generation_tokens_total') ?? 0,
  };
}

export function tokensPerSecond(prev: MetricsSample, next: MetricsSample): number {
  const dt = (next.at - prev.at) / 1000;
  return dt > 0 ? Math.max(0, next.generatedTokens - prev.generatedTokens) / dt : 0;
}
