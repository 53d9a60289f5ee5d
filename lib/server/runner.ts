// ModelRunner: the engines of runner mode (`spindle serve --ollama`), loaded from the store on a request's first
// use and unloaded as Ollama's scheduler does: at most maxLoaded engines loaded or loading (a new one first unloads
// the least recently used, idle ones first, once its requests have finished), and each engine unloaded keep-alive
// after its last request ends (0: at once; Infinity: never; each request sets it, the server's default otherwise).
// Engines are keyed by what is loaded (model file, projector, context length), so names sharing a file (cp, a
// Modelfile over the same weights) share one; a name's template, system and parameters are applied per request.
// Invariants: an engine is closed only when no lease holds it and its in-flight requests have settled; a lease is
// released exactly once; a failed load is forgotten (the next request tries again) and answers 503 naming the
// error; loads and evictions happen one at a time, in arrival order.
import type { EngineOptions } from '../engine-options.js';
import type { NativeEngineStats } from '../native.js';
import { MODELFILE_ADAPTER } from '../engine-core.js';
import { ApiError } from './api-error.js';
import { DEFAULT_KEEP_ALIVE_MS } from './keep-alive.js';
import { fileFacts } from './model-facts.js';
import { getReasoningParser, type ReasoningParser } from '../reasoning/index.js';
import { ServerEngine } from './plugins/engine.js';
import type { StoreModel } from './store-catalog.js';

export interface RunnerOptions {
  /** Engine options from the flags; model, maxModelLen and mmproj are set per model. */
  engine: EngineOptions;
  maxLoaded?: number; // default 1
  keepAliveMs?: number; // default 5 minutes; Infinity: forever
  maxQueuedRequests?: number;
  toolCallParser?: string;
  reasoningParser?: string;
}

export interface Lease {
  engine: ServerEngine;
  release(): void;
}

/** One loaded (or loading) engine. */
export interface RunnerEntry {
  readonly key: string;
  readonly model: StoreModel; // the name that loaded it
  readonly ctx: number; // context length
  engine: ServerEngine | null; // null until its turn to load
  loaded: boolean; // the model finished loading
  retired: boolean; // its counters moved to the runner's totals (it is closing)
  leases: number;
  lastUsed: number; // ms (Date.now())
  keepAliveMs: number; // of the latest request
  expiresAt: number | null; // ms (Date.now()) once idle; null while in use or kept forever
  unloadingSince: number | null;
  timer: NodeJS.Timeout | null;
  unloading: Promise<void> | null;
  waiters: Array<() => void>; // resolved when leases reach 0
  ready: Promise<void>;
}

const DEFAULT_CONTEXT = 4096; // tokens, Ollama's default num_ctx
const MAX_TIMER_MS = 2 ** 31 - 1; // setTimeout's longest delay
const SETTLE_MS = 5_000; // after the last lease: time aborted requests get to settle before close() aborts them

const shuttingDown = (): ApiError => new ApiError(503, 'the server is shutting down', { code: 'server_shutting_down' });

export class ModelRunner {
  readonly maxLoaded: number;
  readonly keepAliveMs: number;
  readonly #options: RunnerOptions;
  readonly #entries = new Map<string, RunnerEntry>();
  #lock: Promise<void> = Promise.resolve();
  #closing = false;
  #retired = { promptTokens: 0, generatedTokens: 0, preemptions: 0, failedSteps: 0, steps: 0, stepSeconds: 0, forwardSeconds: 0 }; // of unloaded engines

  constructor(options: RunnerOptions) {
    this.#options = options;
    this.maxLoaded = options.maxLoaded ?? 1;
    this.keepAliveMs = options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS;
  }

  get state(): 'ready' | 'closing' { return this.#closing ? 'closing' : 'ready'; }
  get loadError(): Error | undefined { return undefined; }
  get modelName(): string { return 'runner'; }
  /** --reasoning-parser as the engines get it (undefined: detected from each model's template; null: none). */
  get reasoningParser(): ReasoningParser | null | undefined {
    return this.#options.reasoningParser === undefined ? undefined : getReasoningParser(this.#options.reasoningParser);
  }

  /** Loaded engines (not those still loading), in load order. */
  get entries(): RunnerEntry[] { return [...this.#entries.values()].filter((e) => e.loaded); }

  /**
   * The context length a request gets: its num_ctx, else the Modelfile's, else --max-model-len (OLLAMA_CONTEXT_LENGTH),
   * else 4096; never more than the model's trained context (as Ollama caps num_ctx there).
   */
  contextFor(model: StoreModel, requested?: number | null): number {
    let trained: number | null = null;
    try {
      trained = fileFacts(model.file).info.ctxTrain;
    } catch {
      // an unreadable file: its load fails with the reason
    }
    const fromModelfile = model.manifest.parameters?.num_ctx;
    const wanted = typeof requested === 'number' ? requested : typeof fromModelfile === 'number' ? fromModelfile
      : this.#options.engine.maxModelLen ?? DEFAULT_CONTEXT;
    return trained !== null && trained > 0 ? Math.min(wanted, trained) : wanted;
  }

  /** A lease on the engine of `model` at context `ctx`, loading it (and unloading others) first when needed. */
  async acquire(model: StoreModel, ctx: number, keepAliveMs?: number): Promise<Lease> {
    const key = `${model.file}\0${model.mmproj ?? ''}\0${model.adapter ?? ''}\0${ctx}`;
    for (;;) {
      if (this.#closing) throw shuttingDown();
      let e = this.#entries.get(key);
      if (e?.unloading) {
        await e.unloading;
        continue;
      }
      e ??= this.#create(key, model, ctx);
      const entry = e;
      entry.leases++;
      entry.lastUsed = Date.now();
      entry.keepAliveMs = keepAliveMs ?? this.keepAliveMs;
      entry.expiresAt = null;
      this.#clearTimer(entry);
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        this.#release(entry);
      };
      try {
        await entry.ready;
      } catch (err) {
        release();
        if (err instanceof ApiError) throw err;
        throw new ApiError(503, `the model ${model.name} failed to load: ${(err as Error).message}`, { code: 'model_unavailable' });
      }
      return { engine: entry.engine!, release };
    }
  }

  /** keep_alive 0 with no prompt: unloads every engine of `model`'s file (and adapter) now, or once its requests finish. */
  async expire(model: StoreModel): Promise<void> {
    const mine = [...this.#entries.values()].filter((e) => e.model.file === model.file && e.model.adapter === model.adapter && !e.unloading);
    await Promise.all(mine.map((e) => {
      e.keepAliveMs = 0;
      return e.leases === 0 ? this.#unload(e) : Promise.resolve();
    }));
  }

  /** Unloads (once idle) the engines whose model or adapter file is gone (after /api/delete). */
  async forgetMissing(exists: (path: string) => boolean): Promise<void> {
    const gone = [...this.#entries.values()].filter((e) => !exists(e.model.file) || (e.model.adapter !== null && !exists(e.model.adapter)));
    await Promise.all(gone.map((e) => this.#unload(e)));
  }

  #create(key: string, model: StoreModel, ctx: number): RunnerEntry {
    const e: RunnerEntry = {
      key, model, ctx, engine: null, loaded: false, retired: false, leases: 0, lastUsed: Date.now(), keepAliveMs: this.keepAliveMs,
      expiresAt: null, unloadingSince: null, timer: null, unloading: null, waiters: [], ready: Promise.resolve(),
    };
    const turn = this.#serialized(async () => {
      await this.#makeRoom(e);
      if (this.#closing) throw shuttingDown();
      e.engine = new ServerEngine({
        engine: { ...this.#options.engine, model: model.file, maxModelLen: ctx, mmproj: model.mmproj ?? false,
          loraModules: model.adapter ? [{ name: MODELFILE_ADAPTER, path: model.adapter, scale: 1 }] : [] },
        servedModelNames: [model.name],
        maxQueuedRequests: this.#options.maxQueuedRequests,
        toolCallParser: this.#options.toolCallParser,
        reasoningParser: this.#options.reasoningParser,
      });
    });
    e.ready = turn.then(async () => {
      await e.engine!.core.ready();
      e.loaded = true;
      if (e.leases === 0) this.#idle(e); // its requests went away while it loaded
    });
    e.ready.catch(() => {
      if (this.#entries.get(key) === e) this.#entries.delete(key);
      void e.engine?.close().catch(() => {});
    });
    this.#entries.set(key, e);
    return e;
  }

  /** Runs `fn` after every earlier call has finished (loads and evictions in arrival order). */
  #serialized(fn: () => Promise<void>): Promise<void> {
    const run = this.#lock.then(fn);
    this.#lock = run.catch(() => {});
    return run;
  }

  /** Unloads least recently used engines until `e` fits; only engines whose load has begun count (those queued later wait behind `e`). */
  async #makeRoom(e: RunnerEntry): Promise<void> {
    for (;;) {
      const others = [...this.#entries.values()].filter((x) => x !== e && x.engine !== null && !x.unloading);
      if (others.length < this.maxLoaded) return;
      others.sort((a, b) => Number(a.leases > 0) - Number(b.leases > 0) || a.lastUsed - b.lastUsed);
      await this.#unload(others[0]);
    }
  }

  #release(e: RunnerEntry): void {
    e.leases--;
    e.lastUsed = Date.now();
    if (e.leases > 0) return;
    e.waiters.splice(0).forEach((w) => w());
    if (e.loaded) this.#idle(e);
  }

  /** No request holds `e`: unload it now (keep-alive 0) or arm its expiry. */
  #idle(e: RunnerEntry): void {
    if (e.unloading || this.#entries.get(e.key) !== e) return;
    if (e.keepAliveMs === 0) {
      void this.#unload(e);
      return;
    }
    if (e.keepAliveMs === Infinity) return;
    e.expiresAt = Date.now() + e.keepAliveMs;
    this.#arm(e);
  }

  /** The expiry timer (re-armed in steps for delays beyond setTimeout's limit). */
  #arm(e: RunnerEntry): void {
    const left = (e.expiresAt ?? 0) - Date.now();
    e.timer = setTimeout(() => {
      e.timer = null;
      if (e.leases > 0 || e.expiresAt === null) return;
      if (e.expiresAt > Date.now()) this.#arm(e);
      else void this.#unload(e);
    }, Math.max(0, Math.min(left, MAX_TIMER_MS)));
    e.timer.unref();
  }

  #clearTimer(e: RunnerEntry): void {
    if (e.timer) clearTimeout(e.timer);
    e.timer = null;
  }

  /** Stops taking leases on `e`, waits for its requests, closes its engine and forgets it. */
  #unload(e: RunnerEntry): Promise<void> {
    e.unloading ??= (async () => {
      e.unloadingSince = Date.now();
      this.#clearTimer(e);
      while (e.leases > 0) await new Promise<void>((resolve) => e.waiters.push(resolve));
      await e.ready.catch(() => {});
      if (e.engine) {
        await e.engine.waitIdle(SETTLE_MS);
        this.#retire(e);
        await e.engine.close().catch(() => {});
      }
      if (this.#entries.get(e.key) === e) this.#entries.delete(e.key);
    })();
    return e.unloading;
  }

  /** Keeps the counters of an engine about to close, so the runner's totals never go down (nor count it twice). */
  #retire(e: RunnerEntry): void {
    const engine = e.engine!;
    e.retired = true;
    const s = engine.statsOrNull();
    if (s) {
      this.#retired.promptTokens += s.promptTokens;
      this.#retired.generatedTokens += s.generatedTokens;
      this.#retired.preemptions += s.preemptions;
      this.#retired.steps += s.steps;
      this.#retired.stepSeconds += s.stepSeconds;
      this.#retired.forwardSeconds += s.forwardSeconds;
    }
    this.#retired.failedSteps += engine.failedSteps;
  }

  /** Stats summed over the engines, counters including unloaded ones (for /metrics). */
  statsOrNull(): Partial<NativeEngineStats> {
    const sum = { running: 0, waiting: 0, kvBlocksTotal: 0, kvBlocksUsed: 0, ...this.#retired };
    for (const e of this.#entries.values()) {
      const s = e.retired ? null : e.engine?.statsOrNull();
      if (!s) continue;
      sum.running += s.running;
      sum.waiting += s.waiting;
      sum.kvBlocksTotal += s.kvBlocksTotal;
      sum.kvBlocksUsed += s.kvBlocksUsed;
      sum.promptTokens += s.promptTokens;
      sum.generatedTokens += s.generatedTokens;
      sum.preemptions += s.preemptions;
      sum.steps += s.steps;
      sum.stepSeconds += s.stepSeconds;
      sum.forwardSeconds += s.forwardSeconds;
    }
    return sum;
  }

  /** Failed forward passes over every engine, unloaded ones included (once non-zero, /health answers 503). */
  get failedSteps(): number {
    let n = this.#retired.failedSteps;
    for (const e of this.#entries.values()) n += e.retired ? 0 : e.engine?.failedSteps ?? 0;
    return n;
  }

  /** Stops taking requests (503); in-flight ones continue. */
  startClosing(): void {
    this.#closing = true;
    for (const e of this.#entries.values()) e.engine?.startClosing();
  }

  /** Resolves true once no request holds an engine, false after `timeoutMs`. */
  async waitIdle(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const busy = (): boolean => [...this.#entries.values()].some((e) => e.leases > 0 || (e.engine?.inflight ?? 0) > 0);
    while (busy()) {
      if (Date.now() >= deadline) return false;
      await new Promise((r) => setTimeout(r, 20));
    }
    return true;
  }

  /** Aborts what still runs and closes every engine. */
  async close(): Promise<void> {
    this.#closing = true;
    const all = [...this.#entries.values()];
    all.forEach((e) => this.#clearTimer(e));
    // Engines not started yet never will be (their turn sees #closing); the started ones are closed now.
    await Promise.all(all.map((e) => e.engine?.close().catch(() => {})));
    this.#entries.clear();
  }
}
