/// <reference lib="esnext.disposable" />
// SGLang-style offline API: `new Engine({ modelPath })`, generate({ prompt | inputIds, samplingParams, stream }).
// Invariants: a non-streaming call resolves to one result per prompt (an array when a batch or n > 1 was
// given); a streaming call yields incremental chunks (text and ids added since the previous chunk) and its
// last chunk carries metaInfo.finishReason; leaving a for-await early aborts the request; generate() never
// throws synchronously (bad input rejects the promise, or throws from the stream's first next()).
import { embed, type Pooling } from './embeddings.js';
import { EngineCore, type CorePrompt, type RequestResult, type SubmitTarget } from './engine-core.js';
import { normalizeEngineOptions, type EngineOptionsInput } from './engine-options.js';
import { alignParams } from './llm.js';
import { loadNative, type FinishReason, type NativeEngineStats, type NativeModelInfo } from './native.js';
import type { SamplingParams, SamplingParamsInput } from './sampling-params.js';
import { Tokenizer } from './tokenizer.js';
import type { ImageSource } from './vision/image-input.js';
import { alignImages, PromptInputError, promptInputs, sglangPrompts } from './sglang-prompts.js';

export type EngineConstructorOptions = EngineOptionsInput;

export interface EngineGenerateInput {
  prompt?: string | string[];
  text?: string | string[]; // SGLang's name for prompt
  inputIds?: number[] | number[][];
  input_ids?: number[] | number[][];
  samplingParams?: SamplingParamsInput | SamplingParamsInput[];
  sampling_params?: SamplingParamsInput | SamplingParamsInput[];
  /**
   * Images (vision models), SGLang's image_data: for one prompt an image or a list of images; for a batch one
   * entry (an image, a list, or null) per prompt. An image is a URL, a data URL, a file path or the bytes. In
   * the prompt text each `<image>` (or `<__media__>`) stands for the next image; a prompt without one gets its
   * images before the text. With inputIds, the ids hold one -1 per image embedding instead (imageLayout).
   */
  imageData?: ImageSource | ImageSource[] | (ImageSource | ImageSource[] | null)[];
  image_data?: ImageSource | ImageSource[] | (ImageSource | ImageSource[] | null)[];
  stream?: boolean;
  signal?: AbortSignal;
  /** SGLang's lora_path: a LoRA adapter of the engine's loraModules, by name or path: one for the whole call, or one
   * (or null) per prompt of a batch. */
  loraPath?: string | (string | null)[] | null;
  lora_path?: string | (string | null)[] | null;
}

/** SGLang's finish_reason object. */
export interface EngineFinishReason {
  type: FinishReason;
  matched?: string | number; // stop: the stop string or token id
  length?: number; // length: the number of generated tokens
}

export interface EngineMetaInfo {
  id: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number; // prompt tokens whose KV came from the prefix cache (SGLang's meta_info.cached_tokens)
  finishReason: EngineFinishReason | null; // null on stream chunks before the last
  e2eLatency: number; // seconds
}

export interface EngineResult {
  text: string;
  outputIds: number[];
  metaInfo: EngineMetaInfo;
}

/** A streamed chunk: text and ids added since the previous chunk. */
export type EngineChunk = EngineResult;

/** SGLang's Engine.encode input: text(s) or token ids, and how to pool (defaults as LLM.embed). */
export interface EngineEncodeInput {
  prompt?: string | string[];
  text?: string | string[];
  inputIds?: number[] | number[][];
  input_ids?: number[] | number[][];
  pooling?: Pooling;
  normalize?: boolean;
  dimensions?: number;
  signal?: AbortSignal;
}

/** SGLang's encode result: the embedding and meta_info (camelCase). */
export interface EngineEncodeResult {
  embedding: number[];
  metaInfo: { promptTokens: number };
}

const ENCODE_KEYS = ['prompt', 'text', 'inputIds', 'input_ids', 'pooling', 'normalize', 'dimensions', 'signal'];

const INPUT_KEYS = ['prompt', 'text', 'inputIds', 'input_ids', 'samplingParams', 'sampling_params', 'imageData', 'image_data', 'stream', 'signal', 'loraPath', 'lora_path'];

function pick<T>(input: Record<string, unknown>, a: string, b: string, what = 'generate'): T | undefined {
  if (input[a] !== undefined && input[b] !== undefined) throw new TypeError(`${what}: give ${a} or ${b}, not both`);
  return (input[a] ?? input[b]) as T | undefined;
}

function finishReasonOf(r: { finishReason: FinishReason; stopReason: string | number | null }, n: number): EngineFinishReason {
  if (r.finishReason === 'stop' && r.stopReason !== null) return { type: 'stop', matched: r.stopReason };
  if (r.finishReason === 'length') return { type: 'length', length: n };
  return { type: r.finishReason };
}

function checkInput(input: unknown): asserts input is EngineGenerateInput {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new TypeError('generate: input must be an object');
  for (const key of Object.keys(input)) {
    if (!INPUT_KEYS.includes(key)) throw new TypeError(`generate: unknown field '${key}' (known: ${INPUT_KEYS.join(', ')})`);
  }
  const { stream, signal } = input as EngineGenerateInput;
  if (stream !== undefined && typeof stream !== 'boolean') throw new TypeError('generate: stream must be a boolean');
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('generate: signal must be an AbortSignal');
  const lora = (input as EngineGenerateInput).loraPath ?? (input as EngineGenerateInput).lora_path ?? null;
  const isRef = (x: unknown): boolean => x === null || typeof x === 'string';
  if (lora !== null && typeof lora !== 'string' && !(Array.isArray(lora) && lora.every(isRef))) {
    throw new TypeError('generate: loraPath must be a loaded LoRA adapter\'s name or path, or a list of them (or null) with one per prompt');
  }
}

/** Where the prompts run: SGLang's lora_path, one adapter for all or one per prompt (count of them). */
function loraTarget(input: EngineGenerateInput, count: number): SubmitTarget {
  const lora = input.loraPath ?? input.lora_path ?? null;
  if (!Array.isArray(lora)) return { lora };
  if (lora.length !== count) throw new TypeError(`generate: loraPath has ${lora.length} entries for ${count} prompts (give one per prompt)`);
  return { promptLoras: lora };
}

export class Engine {
  readonly #core: EngineCore;
  #earlyTokenizer: Tokenizer | undefined;

  constructor(options: EngineConstructorOptions) {
    this.#core = new EngineCore(normalizeEngineOptions(options, 'Engine'));
  }

  async ready(): Promise<void> {
    await this.#core.ready();
  }

  /**
   * The model's tokenizer. Before the model has loaded it is read from the GGUF metadata (synchronously) once the
   * model file is known (a store name or hub reference first has to resolve: `await engine.ready()`).
   */
  get tokenizer(): Tokenizer {
    const r = this.#core.readyValue;
    if (r) return r.tokenizer;
    if (!this.#earlyTokenizer) {
      const file = this.#core.modelFile;
      if (file === null) throw new Error('engine.tokenizer: the model reference is still being resolved; await engine.ready() first');
      const { info, tokenizer } = loadNative().NativeEngine.inspect(file);
      this.#earlyTokenizer = new Tokenizer(tokenizer, this.#core.withOptions(info));
    }
    return this.#earlyTokenizer;
  }

  get modelInfo(): NativeModelInfo {
    const r = this.#core.readyValue;
    if (!r) throw new Error('engine.modelInfo is available after `await engine.ready()`');
    return r.info;
  }

  /**
   * Embeddings (SGLang's Engine.encode): a text, a list of texts, or token ids (one list or a batch); one result,
   * or one per input for a list. Pooled and normalized as LLM.embed.
   */
  async encode(input: string | string[] | EngineEncodeInput): Promise<EngineEncodeResult | EngineEncodeResult[]> {
    const spec: EngineEncodeInput = typeof input === 'string' || Array.isArray(input) ? { prompt: input } : input;
    if (typeof spec !== 'object' || spec === null) throw new TypeError('encode: input must be a string, a list of strings or an object');
    for (const key of Object.keys(spec)) {
      if (!ENCODE_KEYS.includes(key)) throw new TypeError(`encode: unknown field '${key}' (known: ${ENCODE_KEYS.join(', ')})`);
    }
    const text = pick<string | string[]>(spec as Record<string, unknown>, 'prompt', 'text', 'encode');
    const ids = pick<number[] | number[][]>(spec as Record<string, unknown>, 'inputIds', 'input_ids', 'encode');
    if ((text === undefined) === (ids === undefined)) throw new TypeError('encode: give prompt (text) or inputIds, one of them');
    const batch = text !== undefined ? Array.isArray(text) : Array.isArray(ids![0]);
    const inputs: (string | number[])[] = text !== undefined ? (Array.isArray(text) ? text : [text])
      : batch ? ids as number[][] : [ids as number[]];
    const r = await embed(this.#core, inputs, spec, 'input');
    const out = r.embeddings.map((embedding, i) => ({ embedding, metaInfo: { promptTokens: r.promptTokenIds[i].length } }));
    return batch ? out : out[0];
  }

  /**
   * Never throws synchronously: a bad input rejects the returned promise, or (stream: true) makes the first
   * `next()` of the iterator throw, so `await` / `for await` see every error at the same place.
   */
  generate(input: EngineGenerateInput & { stream: true }): AsyncIterableIterator<EngineChunk>;
  generate(input: EngineGenerateInput & { stream?: false }): Promise<EngineResult | EngineResult[]>;
  generate(input: EngineGenerateInput): Promise<EngineResult | EngineResult[]> | AsyncIterableIterator<EngineChunk>;
  generate(input: EngineGenerateInput): Promise<EngineResult | EngineResult[]> | AsyncIterableIterator<EngineChunk> {
    const stream = typeof input === 'object' && input !== null && input.stream === true;
    return stream ? this.#stream(input) : this.#generate(input);
  }

  /**
   * SGLang's Engine.flush_cache(): forgets every cached prefix (the radix cache), only while no request is running
   * or waiting. Resolves `{ success, message }` as SGLang's FlushCacheReqOutput (message: why it was not done).
   */
  async flushCache(): Promise<{ success: boolean; message: string }> {
    const r = await this.#core.flushCache();
    return { success: r.flushed, message: r.reason ?? `flushed ${r.blocks} cached blocks` };
  }

  /** Engine counters: running / waiting requests, KV blocks, tokens, steps, images encoded and their encode time. */
  stats(): NativeEngineStats { return this.#core.stats(); }

  /** Vision models, after ready(): the prompt positions of a width x height image (marker ids, -1 per embedding),
   * for prompts given as inputIds with imageData. */
  imageLayout(width: number, height: number): number[] {
    return this.#core.imageLayout(width, height);
  }

  /** Aborts pending requests and stops the engine thread. */
  shutdown(): Promise<void> {
    return this.#core.close(false);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }

  // Prompts (as ids, or ids + images), whether the input was a batch, and params aligned with the prompts.
  async #prepare(input: EngineGenerateInput): Promise<{ ids: CorePrompt[]; promptTokens: number[]; batch: boolean; params: SamplingParams[] }> {
    checkInput(input);
    const raw = input as Record<string, unknown>;
    const paramsIn = pick<SamplingParamsInput | SamplingParamsInput[]>(raw, 'samplingParams', 'sampling_params');
    let read: ReturnType<typeof promptInputs>;
    try {
      read = promptInputs(pick<unknown>(raw, 'prompt', 'text'), pick<unknown>(raw, 'inputIds', 'input_ids'), { text: 'prompt (text)', ids: 'inputIds' });
    } catch (e) {
      throw e instanceof PromptInputError ? new TypeError(`generate: ${e.message}`) : e;
    }
    const { input: prompts, batch } = read;
    const count = 'text' in prompts ? prompts.text.length : prompts.ids.length;
    const params = alignParams(paramsIn, count);
    const images = alignImages(pick<unknown>(raw, 'imageData', 'image_data'), count, batch);
    const ids = await sglangPrompts(this.#core, prompts, images, this.#core.offlineMediaFetch, 'imageData');
    const promptTokens = ids.map((p) => ('tokenIds' in p ? p.tokenIds.length : (p as number[]).length));
    return { ids, promptTokens, batch, params };
  }

  async #generate(input: EngineGenerateInput): Promise<EngineResult | EngineResult[]> {
    const { ids, promptTokens, batch, params } = await this.#prepare(input);
    const submission = this.#core.submitMany(ids, params, { stream: false, signal: input.signal, ...loraTarget(input, ids.length) });
    const results = await submission.results();
    const out = results.flatMap((row, i) => row.map((r, j) => this.#result(r, submission.handles[i][j].id, promptTokens[i])));
    return batch || out.length > 1 ? out : out[0];
  }

  #result(r: RequestResult, id: number, promptTokens: number): EngineResult {
    return {
      text: r.text,
      outputIds: r.tokenIds,
      metaInfo: {
        id,
        promptTokens,
        completionTokens: r.tokenIds.length,
        cachedTokens: r.cachedTokens,
        finishReason: finishReasonOf(r, r.tokenIds.length),
        e2eLatency: r.latencySeconds,
      },
    };
  }

  async *#stream(input: EngineGenerateInput): AsyncGenerator<EngineChunk> {
    const { ids, promptTokens, params } = await this.#prepare(input);
    if (ids.length !== 1 || params[0].n !== 1) throw new TypeError('generate: stream supports one prompt with n = 1');
    const submission = this.#core.submitMany(ids, params, { stream: true, signal: input.signal, ...loraTarget(input, ids.length) });
    const handle = submission.handles[0][0];
    const start = performance.now();
    let completion = 0;
    try {
      for await (const d of handle.deltas!) {
        completion += d.tokenIds.length;
        yield {
          text: d.text,
          outputIds: d.tokenIds,
          metaInfo: {
            id: handle.id,
            promptTokens: promptTokens[0],
            completionTokens: completion,
            cachedTokens: handle.cachedTokens,
            finishReason: d.finishReason === null ? null : finishReasonOf({ finishReason: d.finishReason, stopReason: d.stopReason }, completion),
            e2eLatency: (performance.now() - start) / 1000,
          },
        };
      }
    } finally {
      submission.detach();
      submission.abort(); // no-op when finished; a consumer that left early frees the sequence
    }
  }
}
