// The JS side of one native engine: starts it, turns its event stream into per-request promises and streams,
// and closes it. Shared by LLM, Engine and the HTTP server, which all submit through submitMany (n samples per
// prompt, all queued or none, following an AbortSignal).
// Invariants: the native event callback never throws (a failure there fails the pending requests instead);
// every submitted request settles exactly once (finish, error, or abort at close); ready() is rejected
// (never unhandled) when the model fails to load.
import { AsyncQueue } from './async-queue.js';
import { existsSync } from 'node:fs';
import { kvCacheType, type EngineOptions, type LoraModule } from './engine-options.js';
import { readModelFileInfo, type GgufSampling } from './gguf/file-info.js';
import {
  loadNative,
  type FinishReason,
  type NativeEngine,
  type NativeEvent,
  type NativeLogprob,
  type NativeModelInfo,
  type NativeStepOutput,
  type NativeSubmitSpec,
  type NativeEngineStats,
} from './native.js';
import { normalizeSamplingParams, toNativeSpec, type SamplingParams } from './sampling-params.js';
import { Tokenizer } from './tokenizer.js';
import { parseModelRef, type ModelRef } from './models/ref.js';
import { resolveModel } from './models/resolve.js';
import { findMmproj } from './vision/find-mmproj.js';
import { loadImages, type ImageInputOptions, type ImageSource } from './vision/image-input.js';
import { placeImages, spliceImages, type MultimodalPrompt } from './vision/multimodal-prompt.js';

/** A prompt as the engine takes it: token ids, or token ids with images (multimodal-prompt.ts). */
export type CorePrompt = readonly number[] | MultimodalPrompt;

/** A runtime LoRA change that failed: the message, and the HTTP status a server answers it with. */
export class LoraUpdateError extends Error {
  constructor(message: string, readonly status: 400 | 404 | 503) {
    super(message);
  }
}

/** The engine's name for a store model's Modelfile ADAPTER, which every request of that model runs with ('@' keeps
 * it apart from store names and --lora-modules names). */
export const MODELFILE_ADAPTER = 'modelfile@adapter';

/** What a prefix-cache flush did: flushed, and how many cached blocks it dropped; or why it did nothing. */
export interface CacheFlushResult {
  flushed: boolean;
  blocks: number;
  reason: string | null; // not flushed: requests were running or waiting
}

/** Where a submission runs: a LoRA adapter by name (null / absent: the base model) and vLLM's cache_salt. */
export interface SubmitTarget {
  lora?: string | readonly string[] | null; // several: the first loaded one (a LoRARequest's name, then its path)
  promptLoras?: readonly (string | null)[]; // one adapter per prompt (SGLang's lora_path list); wins over lora
  cacheSalt?: string | null;
}

function specOf(prompt: CorePrompt, params: SamplingParams, j: number, prediction: Int32Array | undefined,
  lora: number, cacheSalt: string | null | undefined): NativeSubmitSpec {
  const spec = toNativeSpec('tokenIds' in prompt ? prompt.tokenIds : prompt as readonly number[], params, j);
  if ('tokenIds' in prompt && prompt.images.length > 0) spec.images = prompt.images;
  if (prediction) spec.predictionTokenIds = prediction;
  if (lora >= 0) spec.lora = lora;
  if (cacheSalt) spec.cacheSalt = cacheSalt;
  return spec;
}

/** A request's prediction as token ids: given as ids, or its text in the model's tokens (no special tokens added). */
function predictionIds(core: EngineCore, params: SamplingParams): Int32Array | undefined {
  const p = params.prediction;
  if (p === null || !params.speculative) return undefined;
  if ('tokenIds' in p) return Int32Array.from(p.tokenIds);
  const tokenizer = core.readyValue?.tokenizer;
  if (!tokenizer) throw new Error('the engine is not ready (the model is still being resolved or downloaded)');
  return Int32Array.from(tokenizer.encode(p.text, { addSpecialTokens: false, parseSpecial: false }));
}

/**
 * The mmproj the engine loads: the one asked for, none (false), the one the model reference brings (a hub pull
 * with an mmproj file), or the single matching one beside the model file.
 */
function resolveMmproj(options: EngineOptions, modelFile: string, fromRef: string | null): string | undefined {
  if (options.mmproj === false) return undefined;
  if (typeof options.mmproj === 'string') return options.mmproj;
  if (fromRef) return fromRef;
  return findMmproj(modelFile, () => loadNative().NativeEngine.inspect(modelFile).info.nEmbd).path ?? undefined;
}

/** Engine stats before the native engine exists (a model reference still resolving or downloading). */
const NOT_STARTED: NativeEngineStats = {
  ready: false, closed: false, running: 0, waiting: 0, promptTokens: 0, generatedTokens: 0, requestsFinished: 0,
  steps: 0, kvBlocksTotal: 0, kvBlocksUsed: 0, kvBlocksFree: 0, kvBlockSize: 0, preemptions: 0, computedTokens: 0,
  failedSteps: 0, stepSeconds: 0, forwardSeconds: 0, imagesEncoded: 0, imageEncodeSeconds: 0, prefixCaching: false,
  prefixCacheQueries: 0, prefixCacheHits: 0, kvBlocksCached: 0, specDrafts: 0, specDraftTokens: 0, specAcceptedTokens: 0,
};

export interface CoreReady {
  info: NativeModelInfo;
  tokenizer: Tokenizer;
}

/** What one engine step added to a request. */
export interface RequestDelta {
  tokenIds: number[];
  text: string;
  logprobs: NativeLogprob[] | undefined;
  promptLogprobs?: NativeLogprob[]; // with the first token, when asked: one per prompt token after the first
  finishReason: FinishReason | null;
  stopReason: string | number | null;
  phases?: RequestPhases; // the phases this step settled (with the first token; with the finish)
}

/** A request's phases in seconds, as vLLM's metrics split them (undefined until known). */
export interface RequestPhases {
  queueSeconds?: number; // submitted until its first scheduled engine step began
  prefillSeconds?: number; // that step's start until its first token
  decodeSeconds?: number; // first token until the last
  inferenceSeconds?: number; // prefill + decode (vLLM's running phase)
}

export interface RequestResult {
  tokenIds: number[];
  text: string;
  logprobs: NativeLogprob[] | undefined;
  finishReason: FinishReason;
  stopReason: string | number | null;
  latencySeconds: number; // submit to finish
  cachedTokens: number; // prompt tokens whose KV came from the prefix cache (vLLM's num_cached_tokens)
  draftTokens: number; // speculative draft tokens verified for this request
  acceptedDraftTokens: number; // of those, accepted (OpenAI's accepted_prediction_tokens)
  embedding?: Float32Array; // embedding requests: the pooled hidden state (not normalized)
  promptLogprobs?: NativeLogprob[]; // when asked (promptLogprobs): one per prompt token after the first
}

export class RequestHandle {
  readonly id: number;
  readonly result: Promise<RequestResult>;
  readonly deltas: AsyncQueue<RequestDelta> | null;
  #core: EngineCore;
  #resolve!: (r: RequestResult) => void;
  #reject!: (e: Error) => void;
  #start = performance.now();
  #acc: RequestResult = {
    tokenIds: [], text: '', logprobs: undefined, finishReason: 'abort', stopReason: null, latencySeconds: 0, cachedTokens: 0,
    draftTokens: 0, acceptedDraftTokens: 0,
  };
  #settled = false;

  /** @internal */
  constructor(core: EngineCore, id: number, stream: boolean) {
    this.#core = core;
    this.id = id;
    this.result = new Promise<RequestResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.result.catch(() => {}); // a stream consumer may never look at result
    this.deltas = stream ? new AsyncQueue<RequestDelta>(() => this.abort()) : null;
  }

  get settled(): boolean { return this.#settled; }
  /** Prompt tokens of this request found in the prefix cache (known once its first token came). */
  get cachedTokens(): number { return this.#acc.cachedTokens; }
  /** Speculative draft tokens verified so far for this request, and how many of them were accepted. */
  get draftTokens(): number { return this.#acc.draftTokens; }
  get acceptedDraftTokens(): number { return this.#acc.acceptedDraftTokens; }

  abort(): void {
    if (!this.#settled) this.#core.abortRequest(this.id);
  }

  /** @internal */
  apply(out: NativeStepOutput): void {
    const acc = this.#acc;
    acc.cachedTokens = Math.max(acc.cachedTokens, out.cachedTokens ?? 0);
    acc.draftTokens += out.draftTokens ?? 0;
    acc.acceptedDraftTokens += out.acceptedDraftTokens ?? 0;
    if (out.embedding) acc.embedding = out.embedding;
    acc.tokenIds.push(...out.tokenIds);
    acc.text += out.text;
    if (out.logprobs) (acc.logprobs ??= []).push(...out.logprobs);
    if (out.promptLogprobs) acc.promptLogprobs = out.promptLogprobs;
    const delta: RequestDelta = {
      tokenIds: out.tokenIds,
      text: out.text,
      logprobs: out.logprobs,
      ...(out.promptLogprobs ? { promptLogprobs: out.promptLogprobs } : {}),
      finishReason: out.finishReason,
      stopReason: out.stopReason,
    };
    if (out.queueSeconds !== undefined || out.decodeSeconds !== undefined) {
      delta.phases = {
        queueSeconds: out.queueSeconds, prefillSeconds: out.prefillSeconds,
        decodeSeconds: out.decodeSeconds, inferenceSeconds: out.inferenceSeconds,
      };
    }
    if (out.error !== null) {
      this.fail(new Error(`generation failed: ${out.error}`));
      return;
    }
    this.deltas?.push(delta);
    if (out.finishReason !== null) {
      acc.finishReason = out.finishReason;
      acc.stopReason = out.stopReason;
      this.finish();
    }
  }

  /** @internal */
  finish(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#acc.latencySeconds = (performance.now() - this.#start) / 1000;
    this.deltas?.end();
    this.#resolve(this.#acc);
  }

  /** @internal */
  fail(error: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    this.deltas?.fail(error);
    this.#reject(error);
  }
}

/** The requests of one submitMany call: params[i].n samples of prompt i, handles[i][j]. */
export class Submission {
  readonly handles: RequestHandle[][] = [];
  #signal: AbortSignal | undefined;
  #onAbort = (): void => this.abort();

  /** @internal Queues every request or none: a failure aborts those already queued and rethrows. */
  constructor(core: EngineCore, prompts: readonly CorePrompt[], params: readonly SamplingParams[],
    stream: boolean, signal: AbortSignal | undefined, target: SubmitTarget = {}) {
    if (params.length !== prompts.length) throw new Error('submitMany: one SamplingParams per prompt');
    if (target.promptLoras && target.promptLoras.length !== prompts.length) throw new Error('submitMany: one LoRA adapter (or null) per prompt');
    const shared = target.promptLoras ? -1 : core.loraIndex(target.lora ?? null);
    const loras = prompts.map((_, i) => (target.promptLoras ? core.loraIndex(target.promptLoras[i]) : shared)); // checked before queueing
    try {
      prompts.forEach((ids, i) => {
        const row: RequestHandle[] = [];
        this.handles.push(row);
        const prediction = predictionIds(core, params[i]);
        const lora = loras[i];
        const p = core.seeded(params[i]); // a seed from the engine's, if it has one and the request has none
        for (let j = 0; j < p.n; j++) row.push(core.submit(specOf(ids, p, j, prediction, lora, target.cacheSalt), stream));
      });
    } catch (e) {
      this.abort();
      throw e;
    }
    if (signal) {
      this.#signal = signal;
      signal.addEventListener('abort', this.#onAbort, { once: true });
      if (signal.aborted) this.abort();
    }
  }

  /** Every request, prompt by prompt, sample by sample. */
  get all(): RequestHandle[] { return this.handles.flat(); }

  /** Aborts every request still running (finished ones are unaffected). */
  abort(): void {
    for (const h of this.all) h.abort();
  }

  /** Stops following the AbortSignal. */
  detach(): void {
    this.#signal?.removeEventListener('abort', this.#onAbort);
  }

  /** Every result, [prompt][sample]; a failure aborts the rest and rejects. Detaches the signal when settled. */
  async results(): Promise<RequestResult[][]> {
    try {
      return await Promise.all(this.handles.map((row) => Promise.all(row.map((h) => h.result))));
    } catch (e) {
      this.abort();
      throw e;
    } finally {
      this.detach();
    }
  }
}

export class EngineCore {
  readonly modelPath: string; // the model reference as given (a path, a store name or a hub reference)
  readonly options: EngineOptions;
  #native: NativeEngine | null = null; // null while a model reference resolves (store lookup or download)
  #modelFile: string | null = null; // the GGUF file loaded
  #ready: Promise<CoreReady>;
  #readyValue: CoreReady | undefined;
  #loadError: Error | undefined;
  #requests = new Map<number, RequestHandle>();
  // The native engine's adapter slots: loraModules, then a Modelfile ADAPTER, then runtime loads (null: an empty slot)
  #loras: (LoraModule | null)[] = [];
  #loraOps = new Map<number, { resolve: () => void; reject: (e: Error) => void }>(); // a load / unload per slot in flight
  #loraBusy = new Set<string>(); // names being loaded or unloaded
  #loraLoads = new Map<string, Promise<void>>(); // ensureLora's loads in flight, by name
  #flushes: { resolve: (r: CacheFlushResult) => void; reject: (e: Error) => void }[] = []; // flushCache calls in flight, in order
  #defaultLora = -1; // the index of the Modelfile ADAPTER a request without one runs with (-1: none)
  #closing: Promise<void> | undefined;
  readonly #resolving = new AbortController(); // close() stops a pull still resolving the model reference
  #closed = false;
  #seedState: number | null; // options.seed's generator (mulberry32), which seeds requests that bring none
  #sampling: GgufSampling | undefined; // modelSampling()'s, read once
  #samplingRefused: string[] = [];

  constructor(options: EngineOptions) {
    this.modelPath = options.model;
    this.options = options;
    this.#seedState = options.seed === null ? null : options.seed >>> 0;
    let resolveReady!: (r: CoreReady) => void;
    let rejectReady!: (e: Error) => void;
    this.#ready = new Promise<CoreReady>((resolve, reject) => {
      resolveReady = resolve;
      rejectReady = reject;
    });
    this.#ready.catch(() => {}); // reported through ready() / generate(), never as an unhandled rejection
    const onEvent = (ev: NativeEvent): void => {
      try {
        this.#onEvent(ev, resolveReady, rejectReady);
      } catch (e) {
        this.#failAll(e instanceof Error ? e : new Error(String(e)));
      }
    };
    const start = (modelFile: string, mmproj: string | null, adapter: string | null): void => {
      this.#loras = [...options.loraModules, ...(adapter ? [{ name: MODELFILE_ADAPTER, path: adapter, scale: 1 }] : [])];
      this.#defaultLora = adapter ? this.#loras.length - 1 : -1;
      const { NativeEngine } = loadNative();
      this.#modelFile = modelFile;
      this.#native = new NativeEngine(modelFile, {
      maxModelLen: options.maxModelLen ?? undefined,
      threads: options.threads ?? undefined,
      maxNumSeqs: options.maxNumSeqs,
      maxNumBatchedTokens: options.maxNumBatchedTokens ?? undefined,
      chunkedPrefillSize: options.chunkedPrefillSize ?? undefined,
      kvCacheMemory: options.kvCacheMemory ?? undefined,
      device: options.device,
      dtype: kvCacheType(options),
      mmproj: resolveMmproj(options, modelFile, mmproj),
      enablePrefixCaching: options.enablePrefixCaching,
      enforceEager: options.enforceEager,
      speculativeMethod: options.speculativeConfig?.method === 'ngram' ? 'ngram' : undefined,
      numSpeculativeTokens: options.speculativeConfig?.numSpeculativeTokens,
      promptLookupMin: options.speculativeConfig?.promptLookupMin,
      promptLookupMax: options.speculativeConfig?.promptLookupMax,
      speculativeModel: options.speculativeConfig?.model ?? undefined,
      imageMinTokens: options.imageMinTokens ?? undefined,
      imageMaxTokens: options.imageMaxTokens ?? undefined,
      loras: this.#loras as LoraModule[],
      }, onEvent);
    };
    let ref: ModelRef;
    try {
      ref = parseModelRef(options.model);
    } catch (e) {
      this.#loadError = e as Error;
      rejectReady(this.#loadError);
      return;
    }
    if (ref.kind === 'path') {
      start(options.model, null, null); // a file: loads at once (the native loader names a missing or bad file)
      return;
    }
    // A store name or hub reference: resolved (pulled if needed) first, then loaded; close() cancels a pull.
    resolveModel(options.model, { signal: this.#resolving.signal }).then((r) => {
      if (this.#closing) {
        rejectReady(new Error('the engine was closed before the model finished loading'));
        return;
      }
      start(r.model, r.mmproj, r.adapter);
    }, (e: Error) => {
      this.#loadError = e;
      rejectReady(e);
    });
  }

  /** The adapter slots: the native engine's, or loraModules before it exists (a reference still resolving). */
  get #slots(): readonly (LoraModule | null)[] {
    return this.#native ? this.#loras : this.options.loraModules;
  }

  /** Whether every request runs with the model's Modelfile ADAPTER (known once ready). */
  get modelfileAdapter(): boolean { return this.#defaultLora >= 0; }

  /** The LoRA adapters requests may name now: loraModules and the runtime loads (not a Modelfile ADAPTER). */
  get loraModules(): LoraModule[] {
    return this.#slots.filter((m): m is LoraModule => m !== null && m.name !== MODELFILE_ADAPTER);
  }

  /**
   * vLLM's /v1/load_lora_adapter: loads a LoRA adapter under `name` into a free slot of the running engine (between
   * engine steps); resolves once requests may name it. Rejects when the name is taken (or being changed), the
   * model is not loaded, or the file is no adapter of this model (the engine's message).
   */
  async loadLora(name: string, path: string, scale = 1): Promise<void> {
    try {
      await this.ready();
    } catch (e) {
      throw new LoraUpdateError(`the model is not available: ${(e as Error).message}`, 503);
    }
    if (this.#closing) throw new LoraUpdateError('the engine is closing', 503);
    if (!existsSync(path)) throw new LoraUpdateError(`No adapter found for ${path}: no such file`, 404);
    if (this.#loraBusy.has(name)) throw new LoraUpdateError(`the LoRA adapter '${name}' is being loaded or unloaded`, 400);
    if (this.#loras.some((m) => m?.name === name)) throw new LoraUpdateError(`the LoRA adapter '${name}' has already been loaded`, 400);
    let slot = 0; // the first empty slot no other change holds
    while ((slot < this.#loras.length && this.#loras[slot] !== null) || this.#loraOps.has(slot)) slot++;
    if (slot >= 32766) throw new LoraUpdateError('too many LoRA adapters are loaded (32766 at most); unload one first', 400);
    const module = { name, path, scale };
    this.#loraBusy.add(name);
    try {
      await this.#loraOp(slot, () => this.#native!.loadLora(slot, module));
      while (this.#loras.length <= slot) this.#loras.push(null);
      this.#loras[slot] = module;
    } finally {
      this.#loraOps.delete(slot); // only now: the slot stays reserved until #loras says it is taken
      this.#loraBusy.delete(name);
    }
  }

  /**
   * vLLM's offline LoRARequest: the adapter `refs` name if loaded, else, when a path is given, that file loaded under
   * the request's name (its path when it has none) first, as vLLM's LLM loads a LoRARequest's adapter on first use.
   * Concurrent callers wait for the same load.
   */
  async ensureLora(name: string | null, path: string | null): Promise<void> {
    await this.ready();
    const refs = [name, path].filter((x): x is string => x !== null);
    if (refs.length === 0 || this.loraModules.some((m) => refs.includes(m.name) || refs.includes(m.path))) return;
    if (path === null) return; // a name alone: submit reports it as not loaded
    const key = name ?? path;
    let load = this.#loraLoads.get(key);
    if (!load) {
      load = this.loadLora(key, path).finally(() => this.#loraLoads.delete(key));
      this.#loraLoads.set(key, load);
    }
    await load;
  }

  /**
   * vLLM's /v1/unload_lora_adapter: new requests can no longer name it (running ones finish with it); rejects for a
   * name not loaded at runtime or by loraModules.
   */
  async unloadLora(name: string): Promise<void> {
    try {
      await this.ready();
    } catch (e) {
      throw new LoraUpdateError(`the model is not available: ${(e as Error).message}`, 503);
    }
    const slot = this.#loras.findIndex((m) => m?.name === name && m.name !== MODELFILE_ADAPTER);
    if (slot < 0 || this.#loraBusy.has(name)) throw new LoraUpdateError(`the LoRA adapter '${name}' cannot be found`, 404);
    const module = this.#loras[slot];
    this.#loras[slot] = null; // new requests no longer find it (the slot stays reserved by the op)
    this.#loraBusy.add(name);
    try {
      await this.#loraOp(slot, () => this.#native!.unloadLora(slot));
    } catch (e) {
      this.#loras[slot] = module; // the engine kept it
      throw e;
    } finally {
      this.#loraOps.delete(slot);
      this.#loraBusy.delete(name);
    }
  }

  /**
   * Empties the prefix cache (SGLang's flush_cache, vLLM's reset_prefix_cache): every cached block no request holds
   * is forgotten, so later prompts compute their KV again. Done only while no request is running or waiting (as both
   * engines refuse it then): resolves `{ flushed: false, reason }` otherwise. Rejects when the engine is closed or
   * failed to load.
   */
  async flushCache(): Promise<CacheFlushResult> {
    await this.ready();
    if (this.#closing) throw new Error('the engine is closed');
    return new Promise<CacheFlushResult>((resolve, reject) => {
      this.#flushes.push({ resolve, reject });
      try {
        this.#native!.flushCache();
      } catch (e) {
        this.#flushes.pop();
        reject(e);
      }
    });
  }

  #loraOp(slot: number, start: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#loraOps.set(slot, { resolve, reject });
      try {
        start();
      } catch (e) {
        this.#loraOps.delete(slot);
        reject(e);
      }
    });
  }

  /** The GGUF file the engine loads (null while a model reference is still resolving). */
  get modelFile(): string | null { return this.#modelFile; }

  ready(): Promise<CoreReady> { return this.#ready; }
  get readyValue(): CoreReady | undefined { return this.#readyValue; }
  get closed(): boolean { return this.#closing !== undefined; }

  /** @internal Queues one request; throws (synchronously) when the engine is not ready or the spec is invalid. */
  submit(spec: NativeSubmitSpec, stream: boolean): RequestHandle {
    if (this.#closing) throw new Error('the engine is closed');
    if (this.#loadError) throw this.#loadError;
    if (!this.#native) throw new Error('the engine is not ready (the model is still being resolved or downloaded)');
    const id = this.#native.submit(spec);
    const handle = new RequestHandle(this, id, stream);
    this.#requests.set(id, handle);
    return handle;
  }

  /**
   * The model maker's recommended sampling (the GGUF's general.sampling.*), read from the file's header once the
   * model file is known; {} with generationConfig 'vllm', before the file is known, or when the header cannot be read.
   * A value the sampling parameters' own check refuses (top_p 0, a negative temperature) is left out and listed in
   * modelSamplingRefused, so a file's odd recommendation never turns requests into errors.
   */
  modelSampling(): GgufSampling {
    if (this.options.generationConfig === 'vllm' || this.#modelFile === null) return {};
    if (this.#sampling === undefined) {
      let read: GgufSampling = {};
      try {
        read = readModelFileInfo(this.#modelFile).sampling;
      } catch {
        // the load reports a bad file; defaults are not the place to fail
      }
      this.#sampling = {};
      for (const [k, v] of Object.entries(read) as Array<[keyof GgufSampling, number]>) {
        try {
          normalizeSamplingParams({ [k]: v });
          this.#sampling[k] = v;
        } catch (e) {
          this.#samplingRefused.push(`${k} ${v}: ${(e as Error).message}`);
        }
      }
    }
    return this.#sampling;
  }

  /** The general.sampling.* values modelSampling() left out, each with the reason. */
  get modelSamplingRefused(): readonly string[] { return this.#samplingRefused; }

  /**
   * The model's info as this engine presents it: a chatTemplate option replaces the GGUF's everywhere the template
   * is read (prompts, tool and reasoning parser detection, /tokenizer_info, capabilities).
   */
  withOptions(info: NativeModelInfo): NativeModelInfo {
    const template = this.options.chatTemplate;
    return template === null ? info : { ...info, chatTemplate: template };
  }

  /**
   * params with a seed drawn from the engine's seed (vLLM's `seed` engine argument: sampled requests without a seed
   * of their own get seeds from one generator started at it, so a run of the same requests in the same order draws
   * the same tokens); params as they are when the engine has no seed (each request then seeds itself at random),
   * when they have a seed, or when they are greedy.
   */
  seeded(params: SamplingParams): SamplingParams {
    // greedy requests draw nothing (the server's warm-up, health probes, greedy beam steps): they leave the
    // sequence of the sampled requests' seeds as it would be without them
    if (this.#seedState === null || params.seed !== null || params.temperature === 0) return params;
    // mulberry32: a 32-bit state stepped by a constant, mixed into the next 32-bit seed
    const s = (this.#seedState = (this.#seedState + 0x6d2b79f5) >>> 0);
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return { ...params, seed: (t ^ (t >>> 14)) >>> 0 };
  }

  /**
   * The one submission path of LLM, Engine and the server: params[i].n samples of every prompt i (sample j gets
   * seed + j), all queued or none, aborted together when `signal` fires. Throws synchronously like submit().
   */
  submitMany(prompts: readonly CorePrompt[], params: readonly SamplingParams[],
    options: { stream: boolean; signal?: AbortSignal } & SubmitTarget): Submission {
    return new Submission(this, prompts, params, options.stream, options.signal, options);
  }

  /**
   * The engine's index of the LoRA adapter `ref` names (a module's name, else its path; of several, the first
   * that names one); null: the model's Modelfile ADAPTER if it has one, else -1 (the base model). Throws for one not
   * loaded.
   */
  loraIndex(ref: string | readonly string[] | null): number {
    if (ref === null) return this.#defaultLora;
    const refs = typeof ref === 'string' ? [ref] : ref;
    const modules = this.#slots;
    for (const r of refs) {
      const i = modules.findIndex((m) => m?.name === r);
      if (i >= 0) return i;
    }
    for (const r of refs) {
      const i = modules.findIndex((m) => m?.path === r);
      if (i >= 0) return i;
    }
    const loaded = this.loraModules.map((m) => m.name);
    throw new Error(`the LoRA adapter '${refs[0]}' is not loaded (${loaded.length ? `loaded: ${loaded.join(', ')}` : 'none is: give adapters in loraModules'})`);
  }

  /**
   * Embedding requests, one per prompt (token ids), all queued or none, aborted together when `signal` fires:
   * each resolves with its prompt's hidden states pooled as asked (not normalized). Throws synchronously like
   * submit(); rejects when a request fails in the engine.
   */
  async embedMany(prompts: readonly (readonly number[])[], pooling: 'mean' | 'cls' | 'last',
    signal?: AbortSignal): Promise<{ embedding: Float32Array; cachedTokens: number }[]> {
    if (signal?.aborted) throw new Error('the embedding request was aborted'); // before anything is queued
    const handles: RequestHandle[] = [];
    try {
      for (const ids of prompts) handles.push(this.submit({ promptTokenIds: ids, pooling }, false));
    } catch (e) {
      for (const h of handles) h.abort();
      throw e;
    }
    const abort = (): void => { for (const h of handles) h.abort(); };
    signal?.addEventListener('abort', abort, { once: true });
    try {
      const results = await Promise.all(handles.map((h) => h.result));
      return results.map((r) => {
        if (!r.embedding) throw new Error(r.finishReason === 'abort' ? 'the embedding request was aborted' : 'the engine returned no embedding');
        return { embedding: r.embedding, cachedTokens: r.cachedTokens };
      });
    } catch (e) {
      abort();
      await Promise.allSettled(handles.map((h) => h.result)); // every request has left the engine
      throw e;
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  }

  /** @internal */
  abortRequest(id: number): void {
    if (!this.#closed) this.#native?.abort(id);
  }

  stats(): NativeEngineStats { return this.#native ? this.#native.stats() : { ...NOT_STARTED, closed: this.#closing !== undefined }; }

  /** The prompt positions of a width x height image: marker ids and -1 per embedding (throws before ready or
   * when the model takes no images). */
  imageLayout(width: number, height: number): number[] {
    if (!this.#readyValue) throw new Error('imageLayout is available after the model has loaded');
    return Array.from(this.#native!.imageLayout(width, height));
  }

  /** Media limits for the offline APIs and the CLI: local image paths are the caller's own files (any path,
   * unless allowedLocalMediaPath narrows it); the server keeps the engine options' limits. */
  get offlineMediaFetch(): ImageInputOptions['fetch'] {
    return { allowedLocalMediaPath: this.options.allowedLocalMediaPath ?? '/' };
  }

  /** Whether the loaded model takes images (an mmproj is loaded); false before ready. */
  get acceptsImages(): boolean { return this.#readyValue?.info.mmproj != null; }

  /**
   * Text holding one media marker per image (multimodal-prompt.ts), or token ids holding one -1 per image
   * embedding, + the images as users give them -> the
   * engine's prompt. Rejects with an ImageInputError for an image that cannot be loaded, and with an Error when
   * the model takes no images. fetch: the media limits (defaults: the engine options' allowed path and domains).
   */
  async multimodalPrompt(text: string | readonly number[], sources: readonly ImageSource[], what: string, rendered: boolean,
    fetch: ImageInputOptions['fetch'] = {}): Promise<MultimodalPrompt> {
    const { tokenizer } = await this.ready();
    if (!this.acceptsImages) {
      throw new Error('this model does not take images: it has no vision projector (give an mmproj file, e.g. --mmproj)');
    }
    const images = await loadImages(sources, what, {
      fetch: {
        allowedLocalMediaPath: this.options.allowedLocalMediaPath,
        allowedDomains: this.options.allowedMediaDomains,
        ...fetch,
      },
    });
    const layoutOf = (w: number, h: number): Int32Array => this.#native!.imageLayout(w, h);
    // Token ids: they hold the placeholders already (placeImages); text: one marker per image (spliceImages).
    if (typeof text !== 'string') return placeImages(text, images, layoutOf);
    return spliceImages(text, images, tokenizer, layoutOf, rendered);
  }

  /** Stops the engine: aborts (or with drain, finishes) pending requests, then joins the engine thread. */
  close(drain = false): Promise<void> {
    this.#resolving.abort();
    this.#closing ??= this.#native ? this.#native.close({ drain }) : Promise.resolve();
    return this.#closing;
  }

  #onEvent(ev: NativeEvent, resolveReady: (r: CoreReady) => void, rejectReady: (e: Error) => void): void {
    switch (ev.type) {
      case 'ready': {
        const info = this.withOptions(ev.info);
        this.#readyValue = { info, tokenizer: new Tokenizer(ev.tokenizer, info) };
        resolveReady(this.#readyValue);
        break;
      }
      case 'loadError':
        this.#loadError = new Error(ev.message);
        rejectReady(this.#loadError);
        break;
      case 'step':
        for (const out of ev.outputs) {
          const handle = this.#requests.get(out.id);
          if (!handle) continue;
          handle.apply(out);
          if (handle.settled) this.#requests.delete(out.id);
        }
        break;
      case 'lora': {
        const op = this.#loraOps.get(ev.slot); // deleted by its loadLora / unloadLora once #loras is up to date
        if (ev.error === null) op?.resolve();
        else op?.reject(new LoraUpdateError(ev.error, 400));
        break;
      }
      case 'cache_flush': // the engine answers flushes in the order they were asked
        this.#flushes.shift()?.resolve(ev.error === null ? { flushed: true, blocks: ev.blocks, reason: null }
          : { flushed: false, blocks: 0, reason: ev.error });
        break;
      case 'closed':
        this.#closed = true;
        for (const f of this.#flushes) f.reject(new Error('the engine closed before the prefix cache was flushed'));
        this.#flushes = [];
        for (const op of this.#loraOps.values()) op.reject(new LoraUpdateError('the engine closed before the LoRA adapter change', 503));
        this.#loraOps.clear();
        rejectReady(this.#loadError ?? new Error('the engine was closed before the model finished loading'));
        for (const handle of this.#requests.values()) handle.finish(); // the engine reported aborts already
        this.#requests.clear();
        break;
    }
  }

  #failAll(error: Error): void {
    for (const handle of this.#requests.values()) handle.fail(error);
    this.#requests.clear();
  }
}
