// Drives the load: optional warmup, then the measured run with Poisson (or all-at-once) arrivals and a
// --max-concurrency semaphore, as vLLM's benchmark() (vllm/benchmarks/serve.py): a request is released
// at its arrival time, waits for the semaphore (client queue time), then is sent; the benchmark duration
// runs from the first release to the last response.
// Invariant: outputs[i] belongs to requests[i]; no more than maxConcurrency requests are ever in flight
// (warmup included); failures are results, never exceptions (only an all-failed warmup throws).
import { arrivalOffsets } from './arrivals.js';
import type { Backend } from './backends.js';
import type { Agents } from './http.js';
import { multiTurnRequest, type MultiTurnDataset } from './dataset.js';
import { nowS, type RequestInput, type RequestOutput, type SampleRequest } from './types.js';

export class Semaphore {
  private waiters: (() => void)[] = [];
  private inFlight = 0;

  constructor(private readonly limit: number) {}

  async acquire(): Promise<void> {
    if (this.inFlight < this.limit) {
      this.inFlight++;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next(); // the slot passes straight to the next waiter
    else this.inFlight--;
  }
}

/** What sending one request needs, and the shared concurrency cap and progress callback. */
export interface SendOptions {
  backend: Backend;
  agents: Agents;
  url: string;
  model: string;
  headers: Record<string, string>;
  ignoreEos: boolean;
  temperature: number | null;
  maxConcurrency: number | null;
  /** called after each measured request with (done, failed) */
  onProgress?: (done: number, failed: number) => void;
}

export interface RunOptions extends SendOptions {
  requests: SampleRequest[];
  requestRate: number; // requests/s, Infinity = all at once
  warmupRequests: number;
  seed: number;
  onWarmupProgress?: (done: number, failed: number) => void;
}

export interface WarmupSummary {
  requests: number;
  failed: number;
  firstError: string;
}

export interface RunResult {
  outputs: RequestOutput[];
  /** s, first release -> last response */
  duration: number;
  /** clock time of the first release, s */
  startTime: number;
  warmup: WarmupSummary | null;
  /** multi-turn workload: the turn (0-based) of each output */
  turns?: number[];
}

const sleep = (s: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, s * 1000)));

function inputFor(o: SendOptions, request: SampleRequest): RequestInput {
  return { url: o.url, model: o.model, request, headers: o.headers, ignoreEos: o.ignoreEos, temperature: o.temperature };
}

async function limited(o: SendOptions, sem: Semaphore, request: SampleRequest, arrival: number): Promise<RequestOutput> {
  await sem.acquire();
  try {
    const out = await o.backend.send(inputFor(o, request), o.agents);
    out.queueTime = out.startTime - arrival;
    return out;
  } finally {
    sem.release();
  }
}

/** vLLM warms up with copies of the first request, under the same concurrency limit. */
async function warmup(o: RunOptions, sem: Semaphore): Promise<WarmupSummary | null> {
  if (o.warmupRequests <= 0 || o.requests.length === 0) return null;
  let done = 0;
  let failed = 0;
  o.onWarmupProgress?.(0, 0);
  const outs = await Promise.all(Array.from({ length: o.warmupRequests }, async () => {
    const out = await limited(o, sem, o.requests[0], nowS());
    done++;
    if (!out.success) failed++;
    o.onWarmupProgress?.(done, failed);
    return out;
  }));
  const firstError = outs.find((x) => !x.success)?.error ?? '';
  if (failed === outs.length) throw new Error(`all ${failed} warmup requests failed; first error: ${firstError}`);
  return { requests: outs.length, failed, firstError };
}

export async function runBenchmark(o: RunOptions): Promise<RunResult> {
  const sem = new Semaphore(o.maxConcurrency ?? Infinity);
  const warm = await warmup(o, sem);
  const offsets = arrivalOffsets(o.requests.length, o.requestRate, o.seed);
  let done = 0;
  let failed = 0;
  const startTime = nowS();
  o.onProgress?.(0, 0);
  const tasks: Promise<RequestOutput>[] = [];
  for (let i = 0; i < o.requests.length; i++) {
    const wait = startTime + offsets[i] - nowS();
    if (offsets[i] > 0 && wait > 0) await sleep(wait);
    tasks.push(limited(o, sem, o.requests[i], nowS()).then((out) => {
      done++;
      if (!out.success) failed++;
      o.onProgress?.(done, failed);
      return out;
    }));
  }
  const outputs = await Promise.all(tasks);
  return { outputs, duration: nowS() - startTime, startTime, warmup: warm };
}

/**
 * The multi-turn workload: every conversation runs its turns one after another (a turn is sent when the
 * previous answer is complete, with the whole history), conversations at once under --max-concurrency.
 * Outputs come in (conversation, turn) order.
 */
export async function runMultiTurn(o: SendOptions, d: MultiTurnDataset): Promise<RunResult> {
  const sem = new Semaphore(o.maxConcurrency ?? Infinity);
  const { conversations, turns } = d.opts;
  const outputs: RequestOutput[] = new Array(conversations * turns);
  let done = 0;
  let failed = 0;
  const startTime = nowS();
  o.onProgress?.(0, 0);
  await Promise.all(Array.from({ length: conversations }, async (_, c) => {
    const answers: string[] = [];
    for (let turn = 0; turn < turns; turn++) {
      const request = multiTurnRequest(d, c, turn, answers);
      const out = await limited(o, sem, request, nowS());
      outputs[c * turns + turn] = out;
      done++;
      if (!out.success) failed++;
      o.onProgress?.(done, failed);
      answers.push(out.success ? out.generatedText : '');
    }
  }));
  const turnOf = outputs.map((_, i) => i % turns);
  return { outputs, duration: nowS() - startTime, startTime, warmup: null, turns: turnOf };
}
