/// <reference lib="esnext.disposable" />
// vLLM-style offline API: `new LLM({ model })`, generate(prompts, params), chat(conversations, params).
// Invariants: results come back in input order, in vLLM's RequestOutput shape (camelCase); an AbortSignal
// ends the affected requests with finishReason 'abort' (partial output kept); bad input throws before
// anything is queued; n > 1 runs n independent samples (seed, seed + 1, ... when seeded).
import { imageSources, type ChatMessage } from './chat/template.js';
import { embed as embedInputs, type Pooling } from './embeddings.js';
import { scorePairs, scoringPairNames, scoringPairs } from './scoring.js';
import { beamSearch, normalizeBeamSearchParams, type BeamSearchOutput, type BeamSearchParamsInput } from './beam-search.js';
import { EngineCore, type CorePrompt, type RequestResult } from './engine-core.js';
import { normalizeEngineOptions, type EngineOptionsInput } from './engine-options.js';
import type { FinishReason, NativeEngineStats, NativeLogprob, NativeModelInfo } from './native.js';
import { normalizeSamplingParams, type SamplingParams, type SamplingParamsInput } from './sampling-params.js';
import type { Tokenizer } from './tokenizer.js';
import type { ImageSource } from './vision/image-input.js';
import { markRawPrompt, MEDIA_MARKER } from './vision/multimodal-prompt.js';

export type LLMOptions = EngineOptionsInput & { model: string };

export interface Logprob {
  logprob: number;
  rank: number; // 1 = most likely
  decodedToken: string;
}

export interface CompletionOutput {
  index: number;
  text: string;
  tokenIds: number[];
  finishReason: FinishReason;
  /** The stop string or stop token id that ended it; null for length, abort and the model's EOS (as vLLM). */
  stopReason: string | number | null;
  /** Per generated token: the sampled token and the top alternatives, keyed by token id. */
  logprobs?: Array<Record<number, Logprob>>;
  cumulativeLogprob?: number;
}

export interface RequestOutput {
  prompt: string | null; // null when the prompt was given as token ids
  promptTokenIds: number[];
  outputs: CompletionOutput[];
  finished: boolean;
  numCachedTokens: number; // prompt tokens whose KV came from the prefix cache (vLLM's num_cached_tokens)
  /** With promptLogprobs (vLLM's prompt_logprobs): null for the first prompt token, then per prompt token its
   * logprob given the tokens before it and the top alternatives, keyed by token id. */
  promptLogprobs?: Array<Record<number, Logprob> | null>;
}

/** vLLM's multi_modal_data: images (a URL, data URL, path or bytes each) for a prompt that marks their places. */
export interface MultiModalData {
  image: ImageSource | ImageSource[];
}

type WithImages = { multiModalData?: MultiModalData; multi_modal_data?: MultiModalData };

/**
 * A raw prompt. With multiModalData (vision models): a text prompt marks each image with `<image>` (or
 * `<__media__>`; none: images first); token ids hold one -1 per image embedding (llm.imageLayout).
 */
export type PromptInput = string
  | ({ prompt: string } & WithImages)
  | ({ promptTokenIds: readonly number[] } & WithImages)
  | ({ prompt_token_ids: readonly number[] } & WithImages);

export interface SignalOptions {
  signal?: AbortSignal;
}

export interface GenerateOptions extends SignalOptions {
  /**
   * vLLM's lora_request: a LoRA adapter of the engine's loraModules, by name or path, or a LoRARequest-shaped
   * object ({ loraName, loraIntId, loraPath } or snake_case): an adapter not loaded yet is loaded from its path on
   * first use (vLLM's LLM does the same). Absent / null: the base model.
   */
  loraRequest?: LoraRequestInput | null;
}

/** vLLM's LoRARequest (camelCase or snake_case), or an adapter's name or path. */
export type LoraRequestInput = string | {
  loraName?: string; lora_name?: string; loraIntId?: number; lora_int_id?: number; loraPath?: string; lora_path?: string;
};

/**
 * A loraRequest read: the names EngineCore.loraIndex tries (a string as given; a LoRARequest's name, then its path),
 * and a LoRARequest's name and path (null when not given), which EngineCore.ensureLora loads on first use.
 */
export interface LoraRef {
  refs: string[];
  name: string | null;
  path: string | null;
}

export function loraOf(what: string, r: LoraRequestInput | null | undefined): LoraRef | null {
  if (r === undefined || r === null) return null;
  if (typeof r === 'string') return { refs: [r], name: null, path: null };
  if (typeof r !== 'object' || Array.isArray(r)) throw new TypeError(`${what}: loraRequest must be an adapter name or { loraName, loraPath }`);
  const o = r as Record<string, unknown>;
  const name = o.loraName ?? o.lora_name, path = o.loraPath ?? o.lora_path;
  for (const [k, v] of [['loraName', name], ['loraPath', path]] as const) {
    if (v !== undefined && typeof v !== 'string') throw new TypeError(`${what}: loraRequest.${k} must be a string`);
  }
  const given = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
  const ref = { refs: [given(name), given(path)].filter((x): x is string => x !== null), name: given(name), path: given(path) };
  if (ref.refs.length === 0) throw new TypeError(`${what}: loraRequest needs loraName (a loaded adapter's name) or loraPath`);
  return ref;
}

export interface EmbedOptions extends SignalOptions {
  pooling?: Pooling; // default: the engine's pooling option, else the model file's, else 'last'
  normalize?: boolean; // default true (unit L2 norm)
  dimensions?: number; // keep the first N values (normalized again)
  truncate?: boolean; // default false: an input longer than maxModelLen throws; true: its first maxModelLen tokens
}

/** vLLM's ScoringRequestOutput (camelCase): one (text1, text2) pair's score. */
export interface ScoringRequestOutput {
  text1: string;
  text2: string;
  finished: true;
  outputs: { score: number };
}

/** vLLM's EmbeddingRequestOutput (camelCase). */
export interface EmbeddingRequestOutput {
  prompt: string | null;
  promptTokenIds: number[];
  finished: true;
  outputs: { embedding: number[] };
}

export interface ChatOptions extends GenerateOptions {
  addGenerationPrompt?: boolean; // default true (false with continueFinalMessage)
  /** vLLM's continue_final_message: the model continues the final message (an assistant prefill). */
  continueFinalMessage?: boolean;
  tools?: unknown[];
  chatTemplate?: string;
  chatTemplateKwargs?: Record<string, unknown>;
}

interface PreparedPrompt {
  prompt: string | null;
  promptTokenIds: number[];
  multimodal?: CorePrompt; // with images: the ids (with -1 placeholders) and the images
}

function checkOptions(what: string, options: object, known: readonly string[]): void {
  if (typeof options !== 'object' || options === null) throw new TypeError(`${what}: options must be an object`);
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new TypeError(`${what}: unknown option '${key}' (known: ${known.join(', ')})`);
  }
  const signal = (options as GenerateOptions).signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`${what}: signal must be an AbortSignal`);
}

/** One params object for all prompts, or an array aligned with them. */
export function alignParams(params: SamplingParamsInput | SamplingParamsInput[] | undefined, count: number): SamplingParams[] {
  if (Array.isArray(params)) {
    if (params.length !== count) {
      throw new RangeError(`params has ${params.length} entries but there are ${count} prompts (give one object, or one per prompt)`);
    }
    return params.map((p) => normalizeSamplingParams(p));
  }
  const one = normalizeSamplingParams(params);
  return new Array<SamplingParams>(count).fill(one);
}

/** vLLM's logprob entries: per token the top alternatives and the token itself, keyed by token id. */
function logprobEntries(lps: readonly NativeLogprob[], tokenizer: Tokenizer): Array<Record<number, Logprob>> {
  const piece = (id: number): string => tokenizer.decode([id]);
  return lps.map((lp) => {
    const entry: Record<number, Logprob> = {};
    lp.topTokenIds.forEach((id, k) => {
      entry[id] = { logprob: lp.topLogprobs[k], rank: k + 1, decodedToken: piece(id) };
    });
    entry[lp.tokenId] = { logprob: lp.logprob, rank: lp.rank, decodedToken: piece(lp.tokenId) };
    return entry;
  });
}

function formatLogprobs(r: RequestResult, tokenizer: Tokenizer): { logprobs: Array<Record<number, Logprob>>; cumulative: number } {
  const lps = r.logprobs ?? [];
  return { logprobs: logprobEntries(lps, tokenizer), cumulative: lps.reduce((a, lp) => a + lp.logprob, 0) };
}

/**
 * vLLM's stop_reason: the stop string, or the stop token id that ended the output, except the model's own EOS
 * token, which vLLM reports as None (its other end-of-generation ids, e.g. <|eot_id|>, are reported by id).
 */
function stopReasonOf(r: RequestResult, p: SamplingParams, eosId: number | null): string | number | null {
  if (eosId !== null && r.stopReason === eosId && !p.stopTokenIds.includes(eosId)) return null;
  return r.stopReason;
}

/** Submits every prompt (n samples each), follows `signal`, and collects results in input order. */
export async function runBatch(core: EngineCore, tokenizer: Tokenizer, prompts: PreparedPrompt[],
  params: SamplingParams[], signal: AbortSignal | undefined, lora: string[] | null = null): Promise<RequestOutput[]> {
  const submission = core.submitMany(prompts.map((p) => p.multimodal ?? p.promptTokenIds), params, { stream: false, signal, lora });
  const results = await submission.results();
  return results.map((row, i) => ({
    prompt: prompts[i].prompt,
    promptTokenIds: prompts[i].promptTokenIds,
    finished: true,
    numCachedTokens: row.reduce((m, r) => Math.max(m, r.cachedTokens), 0),
    ...(params[i].promptLogprobs !== null ? { promptLogprobs: [null, ...logprobEntries(row[0]?.promptLogprobs ?? [], tokenizer)] } : {}),
    outputs: row.map((r, index) => {
      const out: CompletionOutput = {
        index, text: r.text, tokenIds: r.tokenIds, finishReason: r.finishReason,
        stopReason: stopReasonOf(r, params[i], tokenizer.eosTokenId),
      };
      if (params[i].logprobs !== null) {
        const { logprobs, cumulative } = formatLogprobs(r, tokenizer);
        out.logprobs = logprobs;
        out.cumulativeLogprob = cumulative;
      }
      return out;
    }),
  }));
}

export class LLM {
  readonly #core: EngineCore;

  constructor(options: LLMOptions) {
    this.#core = new EngineCore(normalizeEngineOptions(options, 'LLM'));
  }

  /** The names a call's loraRequest gives the engine (null: none), its adapter loaded first when it names a path. */
  async #lora(what: string, r: LoraRequestInput | null | undefined): Promise<string[] | null> {
    const ref = loraOf(what, r);
    if (ref === null) return null;
    await this.#core.ensureLora(ref.name, ref.path);
    return ref.refs;
  }

  /** Resolves when the model is loaded; rejects with the load error. */
  async ready(): Promise<void> {
    await this.#core.ready();
  }

  get tokenizer(): Tokenizer {
    const r = this.#core.readyValue;
    if (!r) throw new Error('llm.tokenizer is available after `await llm.ready()`');
    return r.tokenizer;
  }

  /** Model facts (architecture, context length, special tokens, chat template); after ready(). */
  get modelInfo(): NativeModelInfo {
    const r = this.#core.readyValue;
    if (!r) throw new Error('llm.modelInfo is available after `await llm.ready()`');
    return r.info;
  }

  /** Engine counters: running / waiting requests, KV blocks used / free, preemptions, tokens, steps. */
  stats(): NativeEngineStats { return this.#core.stats(); }

  /**
   * vLLM's LLM.get_default_sampling_params: what generate() and chat() use when they are given no params, the model
   * maker's recommended sampling (the GGUF's general.sampling.* temperature, top_p, top_k, min_p, repetition
   * penalty) over the defaults; the defaults alone with generationConfig 'vllm' or a file without those keys.
   */
  async getDefaultSamplingParams(): Promise<SamplingParamsInput> {
    await this.#core.ready();
    return { ...this.#core.modelSampling() };
  }

  /** generate() / chat()'s params aligned with the prompts; none given (undefined or null): the default ones. */
  async #aligned(params: SamplingParamsInput | SamplingParamsInput[] | undefined | null, count: number): Promise<SamplingParams[]> {
    if (params !== undefined && params !== null) return alignParams(params, count);
    return alignParams(await this.getDefaultSamplingParams(), count);
  }

  /**
   * vLLM's LLM.reset_prefix_cache(): forgets every cached prefix, so later prompts compute their KV again (e.g.
   * between benchmark runs). Done only while no request of this LLM is running or waiting; resolves whether it was.
   */
  async resetPrefixCache(): Promise<boolean> {
    return (await this.#core.flushCache()).flushed;
  }

  /** Raw prompts (no chat template; BOS added where the model asks for it, unless the text starts with it) or { promptTokenIds }. */
  async generate(prompts: PromptInput | PromptInput[], params?: SamplingParamsInput | SamplingParamsInput[],
    options: GenerateOptions = {}): Promise<RequestOutput[]> {
    checkOptions('generate', options, ['signal', 'loraRequest']);
    const lora = await this.#lora('generate', options.loraRequest);
    const list = Array.isArray(prompts) ? prompts : [prompts];
    if (list.length === 0) return [];
    const aligned = await this.#aligned(params, list.length);
    const { tokenizer } = await this.#core.ready();
    const prepared = await Promise.all(list.map(async (p, i) => {
      const plain = preparePrompt(p, i, tokenizer);
      const images = promptImages(p, i);
      if (images.length === 0) return plain;
      const source = plain.prompt !== null ? markRawPrompt(plain.prompt, images.length) : plain.promptTokenIds;
      const mm = await this.#core.multimodalPrompt(source, images, `prompts[${i}] image`, false,
        this.#core.offlineMediaFetch);
      return { prompt: plain.prompt, promptTokenIds: mm.tokenIds, multimodal: mm };
    }));
    return runBatch(this.#core, tokenizer, prepared, aligned, options.signal, lora);
  }

  /**
   * vLLM's LLM.beam_search: the beamWidth best continuations of each prompt (lib/beam-search.ts), best first, each
   * with its tokens (prompt included), per-step candidate logprobs, cumulative logprob and text. Text prompts (or
   * token ids; no images) and a loraRequest as generate() takes them.
   */
  async beamSearch(prompts: PromptInput | PromptInput[], params: BeamSearchParamsInput, options: GenerateOptions = {}): Promise<BeamSearchOutput[]> {
    checkOptions('beamSearch', options, ['signal', 'loraRequest']);
    const p = normalizeBeamSearchParams(params);
    const lora = await this.#lora('beamSearch', options.loraRequest);
    const list = Array.isArray(prompts) ? prompts : [prompts];
    const { tokenizer, info } = await this.#core.ready();
    const ids = list.map((x, i) => {
      if (promptImages(x, i).length > 0) throw new TypeError(`beamSearch: prompts[${i}] has images; beam search takes text prompts only`);
      return preparePrompt(x, i, tokenizer).promptTokenIds;
    });
    return beamSearch({ core: this.#core, tokenizer, eogIds: info.eogIds, maxModelLen: info.maxModelLen, signal: options.signal,
      target: { lora } }, ids, p);
  }

  /** One conversation (Message[]) or a batch (Message[][]), rendered with the model's chat template. */
  async chat(conversations: ChatMessage[] | ChatMessage[][], params?: SamplingParamsInput | SamplingParamsInput[],
    options: ChatOptions = {}): Promise<RequestOutput[]> {
    checkOptions('chat', options, ['signal', 'loraRequest', 'addGenerationPrompt', 'continueFinalMessage', 'tools', 'chatTemplate', 'chatTemplateKwargs']);
    const lora = await this.#lora('chat', options.loraRequest);
    if (!Array.isArray(conversations) || conversations.length === 0) {
      throw new TypeError('chat: conversations must be a non-empty array of messages (or of conversations)');
    }
    const batch = (Array.isArray(conversations[0]) ? conversations : [conversations]) as ChatMessage[][];
    const aligned = await this.#aligned(params, batch.length);
    const { tokenizer } = await this.#core.ready();
    const vision = this.#core.acceptsImages;
    const prepared = await Promise.all(batch.map(async (messages, i): Promise<PreparedPrompt> => {
      const prompt = tokenizer.applyChatTemplate(messages, {
        tokenize: false,
        addGenerationPrompt: options.addGenerationPrompt,
        continueFinalMessage: options.continueFinalMessage,
        tools: options.tools,
        chatTemplate: options.chatTemplate,
        chatTemplateKwargs: options.chatTemplateKwargs,
        mediaMarker: vision ? MEDIA_MARKER : undefined,
      });
      const images = vision ? imageSources(messages) : [];
      if (images.length === 0) return { prompt, promptTokenIds: tokenizer.encode(prompt, { addSpecialTokens: false, parseSpecial: true }) };
      const mm = await this.#core.multimodalPrompt(prompt, images, `conversations[${i}] image`, true,
        this.#core.offlineMediaFetch);
      return { prompt, promptTokenIds: mm.tokenIds, multimodal: mm };
    }));
    return runBatch(this.#core, tokenizer, prepared, aligned, options.signal, lora);
  }

  /**
   * Embeddings (vLLM's LLM.embed): each prompt's hidden states after the output norm, pooled (mean, cls or last)
   * and L2-normalized; text is tokenized with the model's special tokens (BOS / EOS as its tokenizer asks).
   */
  async embed(prompts: PromptInput | PromptInput[], options: EmbedOptions = {}): Promise<EmbeddingRequestOutput[]> {
    checkOptions('embed', options, ['signal', 'pooling', 'normalize', 'dimensions', 'truncate']);
    const list = Array.isArray(prompts) ? prompts : [prompts];
    if (list.length === 0) return [];
    const inputs = list.map((p, i) => {
      if (promptImages(p, i).length > 0) throw new TypeError(`embed: prompts[${i}]: images are not supported for embeddings`);
      if (typeof p === 'string') return p;
      const ids = typeof p === 'object' && p !== null ? ('promptTokenIds' in p ? p.promptTokenIds : 'prompt_token_ids' in p ? p.prompt_token_ids : undefined) : undefined;
      if (ids !== undefined) return ids;
      if (typeof p === 'object' && p !== null && 'prompt' in p && typeof p.prompt === 'string') return p.prompt;
      throw new TypeError(`embed: prompts[${i}] must be a string, { prompt: string } or { promptTokenIds: number[] }`);
    });
    const r = await embedInputs(this.#core, inputs, options, 'prompts');
    return r.embeddings.map((embedding, i) => ({
      prompt: typeof inputs[i] === 'string' ? inputs[i] as string : null,
      promptTokenIds: r.promptTokenIds[i],
      finished: true as const,
      outputs: { embedding },
    }));
  }

  /**
   * vLLM's LLM.score: scores (text1, text2) pairs, one text against one, one against many, or two lists pairwise
   * (lib/scoring.ts: a reranker's classifier head, else the cosine similarity of the texts' embeddings).
   */
  async score(text1: string | string[], text2: string | string[], options: { signal?: AbortSignal } = {}): Promise<ScoringRequestOutput[]> {
    checkOptions('score', options, ['signal']);
    const pairs = scoringPairs(text1, text2, ['text1', 'text2']);
    const r = await scorePairs(this.#core, pairs, scoringPairNames(text1, ['text1', 'text2']), options.signal);
    return pairs.map(([a, b], i) => ({ text1: a, text2: b, finished: true as const, outputs: { score: r.scores[i] } }));
  }

  /** Vision models, after ready(): the prompt positions of a width x height image (marker ids, -1 per embedding). */
  imageLayout(width: number, height: number): number[] {
    return this.#core.imageLayout(width, height);
  }

  /** Aborts pending requests and stops the engine thread. */
  close(): Promise<void> {
    return this.#core.close(false);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** The images of a prompt's multiModalData (vLLM's multi_modal_data), checked. */
function promptImages(p: PromptInput, i: number): ImageSource[] {
  if (typeof p !== 'object' || p === null) return [];
  const o = p as WithImages;
  if (o.multiModalData !== undefined && o.multi_modal_data !== undefined) {
    throw new TypeError(`prompts[${i}]: give multiModalData or multi_modal_data, not both`);
  }
  const data = o.multiModalData ?? o.multi_modal_data;
  if (data === undefined || data === null) return [];
  const image = typeof data === 'object' ? (data as MultiModalData).image : undefined;
  const list = Array.isArray(image) ? image : image === undefined ? [] : [image];
  if (list.length === 0 || !list.every((x) => typeof x === 'string' || x instanceof Uint8Array)) {
    throw new TypeError(`prompts[${i}].multiModalData must be { image } with an image (URL, data URL, path or bytes) or a list of them`);
  }
  return list;
}

function preparePrompt(p: PromptInput, i: number, tokenizer: Tokenizer): PreparedPrompt {
  if (typeof p === 'string') return { prompt: p, promptTokenIds: tokenizer.encodePrompt(p) };
  if (typeof p === 'object' && p !== null) {
    const ids = 'promptTokenIds' in p ? p.promptTokenIds : 'prompt_token_ids' in p ? p.prompt_token_ids : undefined;
    if (ids !== undefined) {
      if (!Array.isArray(ids) || !ids.every((x) => Number.isInteger(x))) {
        throw new TypeError(`prompts[${i}].promptTokenIds must be an array of integer token ids`);
      }
      return { prompt: null, promptTokenIds: [...ids] };
    }
    if ('prompt' in p && typeof p.prompt === 'string') return { prompt: p.prompt, promptTokenIds: tokenizer.encodePrompt(p.prompt) };
  }
  throw new TypeError(`prompts[${i}] must be a string, { prompt: string } or { promptTokenIds: number[] }`);
}
