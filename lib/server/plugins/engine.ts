// The engine plugin: starts one EngineCore for the app, decorates `fastify.engine` with it, and closes it
// when the app closes (runner mode: decorates `fastify.runner` and `fastify.store` instead, and closes the runner's
// engines). Also the server's request accounting per engine (in-flight requests, sequences for admission).
// With `warmup`, the state stays 'loading' after the load until the warm-up its owner hands to startWarmup
// (startServer: one request to its own socket, warmup.ts) has finished, so /health answers 503 until then; a failed warm-up is a
// failed load.
// Invariants: state goes loading -> ready -> closing (or loading -> failed); ready() throws a 503 ApiError
// unless the model is loaded and the server takes requests; every begin() is paired with exactly one end.
import { getToolCallParser } from '../../tools/index.js';
import { getReasoningParser, type ReasoningParser } from '../../reasoning/index.js';
import type { FastifyInstance } from 'fastify';
import { EngineCore, type CoreReady } from '../../engine-core.js';
import type { EngineOptions } from '../../engine-options.js';
import type { NativeEngineStats } from '../../native.js';
import { ApiError } from '../api-error.js';
import type { ModelStore } from '../../models/store.js';
import { sharedPlugin } from '../plugin.js';
import type { ModelRunner } from '../runner.js';

export type EngineState = 'loading' | 'ready' | 'closing' | 'failed';

export interface ServerEngineOptions {
  engine: EngineOptions;
  /** The model's names; the first is the one responses and /v1/models use. */
  servedModelNames: string[];
  /** Refuse (404) a request whose `model` is not a served name, as vLLM does (--strict-model-name); default: any name. */
  strictModelName?: boolean;
  /**
   * vLLM's runtime LoRA updating (VLLM_ALLOW_RUNTIME_LORA_UPDATING): /v1/load_lora_adapter and /v1/unload_lora_adapter
   * change the adapters while the server runs (default false: those routes answer 404 saying how to turn them on).
   */
  allowRuntimeLoraUpdating?: boolean;
  /** The weights are random (the built-in demo model): said in /v1/models and the log. */
  randomWeights?: boolean;
  /** Sequences allowed to wait beyond the running ones before 429 (--max-queued-requests). */
  maxQueuedRequests?: number;
  /** --tool-call-parser (a vLLM / SGLang name); absent: detected from the chat template. */
  toolCallParser?: string;
  /** --reasoning-parser (a vLLM / SGLang name; 'none': off); absent: detected from the chat template. */
  reasoningParser?: string;
  /**
   * Wait after the load for the warm-up given to startWarmup() before the state turns ready (default false;
   * `spindle serve`: true unless --skip-server-warmup). The owner must then call startWarmup() once; startServer
   * does, once it listens (buildApp alone does not).
   */
  warmup?: boolean;
}

/** How long the model took to become ready (ms): the load, and the warm-up generation (0 when skipped). */
export interface ReadyTimings {
  loadMs: number;
  warmupMs: number;
}

/** A model name without Ollama's ':latest' tag (clients add it to names that have none). */
function withoutLatestTag(name: string): string {
  return name.endsWith(':latest') ? name.slice(0, -':latest'.length) : name;
}

export class ServerEngine {
  readonly core: EngineCore;
  readonly servedModelNames: string[];
  readonly strictModelName: boolean;
  readonly allowRuntimeLoraUpdating: boolean;
  readonly randomWeights: boolean;
  readonly created = Math.floor(Date.now() / 1000); // unix seconds
  readonly maxNumSeqs: number;
  readonly maxQueuedRequests: number;
  readonly toolCallParser: string | null; // canonical parser name given on the command line
  readonly reasoningParser: ReasoningParser | null | undefined; // given on the command line (null: none); undefined: detect
  #state: EngineState = 'loading';
  #loadError: Error | undefined;
  #inflight = 0; // HTTP requests holding engine sequences
  #sequences = 0; // engine sequences submitted by those requests and not yet finished
  #idleWaiters: Array<() => void> = [];
  #failedSteps = 0; // the largest failedSteps seen (the native count)
  #settled: Promise<void>; // resolves once the state has left 'loading'
  #timings: ReadyTimings | undefined;
  #giveWarmup!: (run: (() => Promise<number>) | null) => void;

  constructor(options: ServerEngineOptions) {
    this.servedModelNames = options.servedModelNames;
    this.strictModelName = options.strictModelName ?? false;
    this.allowRuntimeLoraUpdating = options.allowRuntimeLoraUpdating ?? false;
    this.randomWeights = options.randomWeights ?? false;
    this.maxNumSeqs = options.engine.maxNumSeqs;
    this.maxQueuedRequests = options.maxQueuedRequests ?? 256;
    this.toolCallParser = options.toolCallParser === undefined ? null : getToolCallParser(options.toolCallParser).name;
    this.reasoningParser = options.reasoningParser === undefined ? undefined : getReasoningParser(options.reasoningParser);
    const start = performance.now();
    const warmup = new Promise<(() => Promise<number>) | null>((resolve) => { this.#giveWarmup = resolve; });
    if (!options.warmup) this.#giveWarmup(null);
    const clash = options.engine.loraModules.find((m) => options.servedModelNames.includes(m.name));
    if (clash) throw new Error(`the LoRA adapter name '${clash.name}' is also a served model name; give the adapter another name`);
    this.core = new EngineCore(options.engine);
    this.#settled = this.core.ready().then(async () => {
      const loadMs = performance.now() - start;
      let warmupMs = 0;
      const run = await warmup;
      if (run) {
        try {
          warmupMs = await run();
        } catch (e) {
          this.#loadError = new Error(`the warm-up generation failed: ${(e as Error).message}`);
          if (this.#state === 'loading') this.#state = 'failed';
          return;
        }
      }
      this.#timings = { loadMs, warmupMs };
      if (this.#state === 'loading') this.#state = 'ready';
    }, (e: Error) => { this.#loadError = e; if (this.#state === 'loading') this.#state = 'failed'; });
  }

  /** The warm-up to run once the model is loaded (with the `warmup` option); resolves ms, rejects on failure. */
  startWarmup(run: () => Promise<number>): void { this.#giveWarmup(run); }

  /** Resolves once the model is loaded and warmed up (state ready) or failed; never rejects. */
  settled(): Promise<void> { return this.#settled; }

  /** Load and warm-up times, once ready. */
  get readyTimings(): ReadyTimings | undefined { return this.#timings; }

  get state(): EngineState { return this.#state; }
  get loadError(): Error | undefined { return this.#loadError; }
  get modelName(): string { return this.servedModelNames[0]; }
  get inflight(): number { return this.#inflight; }

  /**
   * Whether a request may name its model `name`: while one model is served any name is (LM Studio clients send
   * 'local-model', vLLM clients the hub id); with strictModelName, or with LoRA adapters or runtime LoRA updating
   * (where a mistyped adapter name must not quietly run the base model), only a served name, with or without
   * ':latest' (adapters: loraFor).
   */
  acceptsModel(name: string): boolean {
    if (!this.strictModelName && this.core.options.loraModules.length === 0 && !this.allowRuntimeLoraUpdating) return true;
    return this.servedModelNames.includes(name) || this.servedModelNames.includes(withoutLatestTag(name));
  }

  /** The LoRA adapter (--lora-modules) a request's model name selects (with or without ':latest'), or null. */
  loraFor(name: string): string | null {
    const bare = withoutLatestTag(name);
    return this.core.loraModules.find((m) => m.name === name || m.name === bare)?.name ?? null;
  }

  /** Every name a request may give: the served names, then the adapters'. */
  get modelNames(): string[] {
    return [...this.servedModelNames, ...this.core.loraModules.map((m) => m.name)];
  }

  /** The loaded model, or a 503 ApiError when loading failed or the server is shutting down. */
  async ready(): Promise<CoreReady> {
    if (this.#state === 'closing') throw new ApiError(503, 'the server is shutting down', { code: 'server_shutting_down' });
    try {
      return await this.core.ready();
    } catch (e) {
      throw new ApiError(503, `the model is not available: ${(e as Error).message}`, { code: 'model_unavailable' });
    }
  }

  stats(): NativeEngineStats { return this.core.stats(); }

  /** The engine's stats, or null when the addon cannot give them (never throws; for /metrics and /health). */
  statsOrNull(): NativeEngineStats | null {
    try {
      return this.core.stats();
    } catch {
      return null;
    }
  }

  /** Engine steps whose forward pass failed (their requests failed); once non-zero, /health answers 503. */
  get failedSteps(): number {
    const v = this.statsOrNull()?.failedSteps;
    if (typeof v === 'number' && v > this.#failedSteps) this.#failedSteps = v;
    return this.#failedSteps;
  }

  /** Admission: reserves `sequences` engine slots, or throws 429 when the queue is full. Returns the release. */
  begin(sequences: number): () => void {
    if (this.#state === 'closing') throw new ApiError(503, 'the server is shutting down', { code: 'server_shutting_down' });
    const limit = this.maxNumSeqs + this.maxQueuedRequests;
    if (this.#sequences > 0 && this.#sequences + sequences > limit) {
      throw new ApiError(429, `the server is busy: ${this.#sequences} sequences are running or queued (limit ${limit}); retry later`,
        { code: 'too_many_requests', headers: { 'retry-after': '1' } });
    }
    this.#inflight++;
    this.#sequences += sequences;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inflight--;
      this.#sequences -= sequences;
      if (this.#inflight === 0) this.#idleWaiters.splice(0).forEach((w) => w());
    };
  }

  /** Stops taking requests (they get 503); in-flight ones continue. */
  startClosing(): void {
    this.#state = 'closing';
  }

  /** Resolves when no request is in flight, or after `timeoutMs`; true when drained. */
  waitIdle(timeoutMs: number): Promise<boolean> {
    if (this.#inflight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#idleWaiters = this.#idleWaiters.filter((w) => w !== done);
        resolve(false);
      }, timeoutMs);
      const done = (): void => { clearTimeout(timer); resolve(true); };
      this.#idleWaiters.push(done);
    });
  }

  /** Aborts what is still running and joins the engine thread. */
  close(): Promise<void> {
    this.#state = 'closing';
    return this.core.close(false);
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The one engine of single-model mode (in runner mode reading it throws: use useModel / app.runner). */
    engine: ServerEngine;
    /** Runner mode (`spindle serve --ollama`): the engines of the store's models, loaded on demand; else null. */
    runner: ModelRunner | null;
    /** Runner mode: the model store the requests name models of; else null. */
    store: ModelStore | null;
    /** Where /api/pull reads HF_ENDPOINT, HF_TOKEN and the Hugging Face cache settings. */
    hubEnv: NodeJS.ProcessEnv;
  }
}

export type EnginePluginOptions = {
  engine: ServerEngine | null; // single-model mode
  runner: ModelRunner | null; // runner mode
  store: ModelStore | null;
  hubEnv: NodeJS.ProcessEnv;
};

export const enginePlugin = sharedPlugin<EnginePluginOptions>(async (app: FastifyInstance, opts) => {
  const { engine, runner } = opts;
  if (engine) app.decorate('engine', engine);
  else {
    app.decorate('engine', {
      getter(): ServerEngine {
        throw new Error('app.engine: this server runs in runner mode (one engine per loaded model; see app.runner)');
      },
    });
  }
  app.decorate('runner', runner);
  app.decorate('store', opts.store);
  app.decorate('hubEnv', opts.hubEnv);
  app.addHook('onClose', async () => { await (runner ?? engine)?.close(); });
}, 'spindle-engine');
