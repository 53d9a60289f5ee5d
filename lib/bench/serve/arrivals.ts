// When each request is released: Poisson arrivals at --request-rate, as vLLM's get_request
// (vllm/benchmarks/serve.py) with burstiness 1: inter-arrival gaps are exponential with mean 1/rate,
// accumulated, then rescaled so the last request is released at exactly n / rate seconds (vLLM does this
// "to stabilize the throughput data from different random seeds"). rate = inf releases all at once.
// Invariant: offsets are non-decreasing, in seconds from the benchmark start, and depend only on
// (n, rate, seed).
import { createRng } from './random.js';

export function arrivalOffsets(n: number, rate: number, seed: number): number[] {
  if (!(rate > 0)) throw new RangeError(`request rate must be > 0, got ${rate}`);
  if (rate === Infinity) return new Array<number>(n).fill(0);
  const rng = createRng(seed, 'arrivals');
  const offsets: number[] = [];
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += rng.exponential(rate);
    offsets.push(t);
  }
  if (n > 0 && t > 0) {
    const scale = n / rate / t;
    for (let i = 0; i < n; i++) offsets[i] *= scale;
  }
  return offsets;
}
