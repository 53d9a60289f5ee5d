// Loads the native addon and mirrors its interface by hand (native/napi/*.cpp).
// Lookup: SPINDLE_NATIVE_PATH (a .node file, or a package-like directory holding build/Release or prebuilds)
// when set; else the CUDA prebuild (prebuilds/<platform>-<arch>-cuda/, scripts/prebuild.mjs) on a machine with an
// NVIDIA driver; else a prebuilt binary from prebuilds/<platform>-<arch>/ (the CPU one) when one matches; else the
// local build (build/Release) made by cmake-js or node-gyp. SPINDLE_NATIVE_VARIANT=cpu | cuda forces the choice
// between the two prebuilds.
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

/** native/napi/tokenizer_wrap.cpp */
export interface NativeTokenizer {
  encode(text: string, addSpecial?: boolean, parseSpecial?: boolean): Int32Array;
  decode(ids: Int32Array | readonly number[], skipSpecial?: boolean): string;
  tokenToPiece(id: number, special?: boolean): Buffer;
  isEog(id: number): boolean;
  readonly nVocab: number;
  readonly bosId: number; // -1 if none
  readonly eosId: number; // -1 if none
  readonly addBos: boolean;
  readonly eogIds: Int32Array;
}

export interface NativeTokenizerClass {
  fromFile(path: string): NativeTokenizer;
}

/** native/napi/engine_wrap_convert.cpp info_object */
export interface NativeModelInfo {
  arch: string;
  name: string;
  nVocab: number;
  nCtxTrain: number;
  nEmbd: number; // {arch}.embedding_length (0 when the file does not say)
  maxModelLen: number;
  maxNumBatchedTokens: number; // tokens per engine step (the default resolved by the engine); 0 from inspect()
  bosId: number;
  eosId: number;
  addBos: boolean;
  eogIds: number[];
  bosToken: string | null;
  eosToken: string | null;
  eogTokens: string[];
  chatTemplate: string | null;
  device: 'cpu' | 'cuda' | null; // the backend the loaded model runs on; null from inspect() (nothing loaded)
  kvCacheDtype: 'float32' | 'float16' | 'bfloat16' | 'q8_0' | 'q4_0' | 'fp8_e4m3' | 'fp8_e5m2' | null; // its KV cache's element type (--dtype); null from inspect()
  mmproj: string | null; // the loaded vision projector; null: the model takes no images
  pooling: 'none' | 'mean' | 'cls' | 'last' | 'rank' | null; // the file's {arch}.pooling_type; null: unsaid
  // A reranker's classifier head (cls.output.weight, dequantized): nOut rows of nEmbd weights, their biases, the
  // labels ({arch}.classifier.output_labels); null: the file has none.
  classifier: { weights: Float32Array; nOut: number; bias: Float32Array | null; labels: string[] } | null;
  rerankTemplate: string | null; // tokenizer.chat_template.rerank: a reranker's prompt with {query} and {document}
}

export interface NativeLogprob {
  tokenId: number;
  logprob: number;
  rank: number;
  topTokenIds: number[];
  topLogprobs: number[];
}

export type FinishReason = 'stop' | 'length' | 'abort';

/** One request's news in one engine step. */
export interface NativeStepOutput {
  id: number;
  tokenIds: number[];
  text: string;
  finishReason: FinishReason | null;
  stopReason: string | number | null; // the stop string or stop token id that matched
  error: string | null;
  cachedTokens: number; // prompt tokens whose KV came from the prefix cache (0 until the first token)
  draftTokens: number; // speculative draft tokens verified this step
  acceptedDraftTokens: number; // of those, accepted (their tokens are in tokenIds)
  logprobs?: NativeLogprob[];
  promptLogprobs?: NativeLogprob[]; // with the first token, when asked: one per prompt token after the first
  // The request's phases in seconds (vLLM's request_queue_time / prefill_time / decode_time / inference_time):
  // queue (submitted until its first scheduled step began) and prefill (that step until its first token) with the
  // first token, decode (first token until the last) and inference (prefill + decode) with the finish.
  queueSeconds?: number;
  prefillSeconds?: number;
  decodeSeconds?: number;
  inferenceSeconds?: number;
  embedding?: Float32Array; // embedding requests, with the finish: the pooled hidden state [nEmbd], not normalized
}

export type NativeEvent =
  | { type: 'ready'; info: NativeModelInfo; tokenizer: NativeTokenizer }
  | { type: 'loadError'; message: string }
  | { type: 'step'; outputs: NativeStepOutput[] }
  | { type: 'lora'; slot: number; error: string | null } // a loadLora / unloadLora finished (error: why it failed)
  | { type: 'cache_flush'; blocks: number; error: string | null } // a flushCache finished (error: why it did nothing)
  | { type: 'closed' };

/** Field names and meanings as in lib/sampling-params.ts; absent = default. */
export interface NativeSubmitSpec {
  promptTokenIds: Int32Array | readonly number[];
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  repetitionPenalty?: number;
  repeatLastN?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  maxTokens?: number; // absent: until the context is full
  minTokens?: number;
  stop?: readonly string[];
  stopTokenIds?: readonly number[];
  ignoreEos?: boolean;
  seed?: number;
  logprobs?: number;
  promptLogprobs?: number; // the prompt tokens' logprobs (vLLM's prompt_logprobs) with this many alternatives each
  skipSpecialTokens?: boolean; // default true: control tokens add no text
  grammar?: string; // GBNF the output must match
  grammarTriggers?: readonly { text: string; atStart?: boolean }[]; // lazy grammar: free until a trigger appears
  grammarReasoning?: { startTag: string; endTag: string; inBlock: boolean }; // lazy grammar: triggers count after the thinking block
  logitBias?: readonly (readonly [number, number])[]; // [tokenId, bias in [-100, 100]]
  images?: readonly NativeImage[]; // in prompt order; promptTokenIds holds each one's layout (imageLayout) at `position`
  predictionTokenIds?: Int32Array | readonly number[]; // the output expected (Predicted Outputs): speculative drafts
  speculative?: boolean; // false: no drafts of any kind for this request (default true)
  // An embedding request: the prompt's hidden states (after the output norm) pooled this way, nothing generated,
  // the sampling fields unused; absent: a generation request.
  pooling?: 'mean' | 'cls' | 'last';
  lora?: number; // a LoRA adapter: index into the engine's loras (absent / -1: the base model)
  cacheSalt?: string; // vLLM's cache_salt: cached prefixes are shared only between requests of one salt
}

/** A decoded image of a request: RGB bytes [height][width][3] and the prompt index where its layout starts. */
export interface NativeImage {
  data: Uint8Array;
  width: number;
  height: number;
  position: number;
}

export interface NativeEngineStats {
  ready: boolean;
  closed: boolean;
  running: number;
  waiting: number;
  promptTokens: number;
  generatedTokens: number;
  requestsFinished: number;
  steps: number;
  kvBlocksTotal: number;
  kvBlocksUsed: number;
  kvBlocksFree: number;
  kvBlockSize: number; // tokens per block
  preemptions: number;
  computedTokens: number; // tokens forwarded (prompt chunks, recomputes, decodes)
  failedSteps: number; // steps whose forward pass threw (their requests failed; the server reports 503 on /health)
  stepSeconds: number; // wall time of the engine's steps (scheduling, forward pass, sampling, bookkeeping)
  forwardSeconds: number; // of that, the forward passes (host work and device, draft model included)
  imagesEncoded: number; // images run through the vision encoder
  imageEncodeSeconds: number; // time spent encoding them, preprocessing included
  prefixCaching: boolean; // automatic prefix caching in effect (asked for, and the model keeps no recurrent state)
  prefixCacheQueries: number; // prompt tokens looked up in the prefix cache
  prefixCacheHits: number; // of those, tokens found there
  kvBlocksCached: number; // KV blocks holding cached prefixes (in use or free)
  specDrafts: number; // decodes that verified speculative draft tokens (vLLM's spec_decode_num_drafts)
  specDraftTokens: number; // draft tokens verified
  specAcceptedTokens: number; // of those, accepted
}

export interface NativeEngineOptions {
  maxModelLen?: number; // absent: the model's trained context length
  threads?: number; // absent: every core
  maxNumSeqs?: number; // sequences holding KV at once (default 256)
  maxNumBatchedTokens?: number; // tokens per step; absent: 2048 on a GPU, 256 on the CPU (at least maxModelLen when prompts never split)
  chunkedPrefillSize?: number; // -1: never split a prompt (default: the step's budget, maxNumBatchedTokens)
  // > 1: bytes. (0, 1]: on the CPU the fraction of available memory for the KV cache (0 / absent: 25%, at most
  // 2 GiB); on a GPU vLLM's gpu_memory_utilization, the fraction of total device memory, weights included
  // (0 / absent: 0.9).
  kvCacheMemory?: number;
  device?: 'auto' | 'cpu' | 'cuda'; // absent: 'auto' (CUDA when usable, else the CPU)
  // the KV cache: 16-bit K / V stores ('float16', 'bfloat16'; CPU and CUDA), 8-bit floats ('fp8_e4m3', 'fp8_e5m2';
  // CPU and CUDA), q8_0 / q4_0 (CPU, head dims multiples of 32, else float16), float32
  dtype?: 'auto' | 'float16' | 'bfloat16' | 'float32' | 'q8_0' | 'q4_0' | 'fp8_e4m3' | 'fp8_e5m2'; // the KV cache's type (kvCacheType)
  enforceEager?: boolean; // no CUDA step graphs (model_options::step_graphs false)
  mmproj?: string; // the vision projector (mmproj GGUF) to load beside the model; absent: text only
  enablePrefixCaching?: boolean; // automatic prefix caching (default true)
  speculativeMethod?: 'none' | 'ngram'; // drafts for every request: prompt lookup (default 'none')
  numSpeculativeTokens?: number; // draft tokens per step at most, also for predictions (default 16)
  promptLookupMin?: number; // n-gram sizes the lookup tries, longest first (default 2 .. 4)
  promptLookupMax?: number;
  speculativeModel?: string; // a draft model (GGUF file with the model's tokenizer) for speculative decoding
  imageMinTokens?: number; // 0 / absent: the projector's default
  imageMaxTokens?: number;
  // LoRA adapters loaded after the model (llama.cpp's GGUF adapter files); requests pick one by index
  loras?: readonly { path: string; scale: number }[];
}

/** native/napi/engine_wrap.cpp */
export interface NativeEngine {
  submit(spec: NativeSubmitSpec): number;
  abort(id: number): void;
  /** Queue loading a LoRA adapter into an empty slot / emptying a slot; the result is a 'lora' event for the slot. */
  loadLora(slot: number, spec: { path: string; scale: number }): void;
  unloadLora(slot: number): void;
  /** Queue emptying the prefix cache (only while no request is running or waiting); a 'cache_flush' event follows. */
  flushCache(): void;
  stats(): NativeEngineStats;
  close(options?: { drain?: boolean }): Promise<void>;
  /** The prompt positions of a width x height image: marker token ids and -1 per image embedding. Throws when
   * the engine is not ready or has no vision projector. */
  imageLayout(width: number, height: number): Int32Array;
}

export interface NativeEngineClass {
  new (path: string, options: NativeEngineOptions, onEvent: (event: NativeEvent) => void): NativeEngine;
  /** Synchronously maps a GGUF and reads its tokenizer and metadata (no weights). Throws on a bad file. */
  inspect(path: string): { info: NativeModelInfo; tokenizer: NativeTokenizer };
}

/** One numeric parameter's allowed values (native/engine/limits.h): [min, max] (exclusive ends as flagged),
 * integers only when `integer`, plus `special` as one extra allowed value; `range` states it for messages. */
export interface NativeParamLimit {
  min: number;
  max: number;
  minExclusive: boolean;
  maxExclusive: boolean;
  integer: boolean;
  special: number | null;
  range: string;
}

/** The addon's `limits` export: the one table of request and engine limits, and the engine's defaults. */
export interface NativeLimits {
  params: Record<string, NativeParamLimit>;
  maxStopStrings: number;
  maxStopStringBytes: number;
  maxStopTokenIds: number;
  maxLogprobs: number;
  maxPredictionTokens: number; // token ids of a request's prediction
  engineDefaults: { maxNumSeqs: number; chunkedPrefillSize: number; blockSize: number }; // chunkedPrefillSize 0: the step's budget
}

/** An mmproj's vision hyperparameters (native/vision/mmproj.h mmproj_hparams). */
export interface NativeMmprojInfo {
  projector: string;
  nEmbd: number;
  nHead: number;
  nFf: number;
  nLayer: number;
  patchSize: number;
  scaleFactor: number;
  posGrid: number;
  imageSize: number; // gemma3: the fixed input side in pixels
  projHidden: number;
  nEmbdOut: number;
  useGelu: boolean;
  eps: number;
  mean: number[];
  std: number[];
}

/** native/napi/vision_wrap.cpp lfm2ImagePlan */
export interface NativeLfm2Plan {
  tiled: boolean;
  cols: number;
  rows: number;
  refinedWidth: number;
  refinedHeight: number;
  embeddings: number;
  positions: number;
  imageSize: { width: number; height: number };
  bestGrid: { cols: number; rows: number };
  crops: { source: 'image' | 'tile' | 'thumbnail'; width: number; height: number; tokens: number; marker: string | null; row: number; col: number }[];
}

export interface NativeAddon {
  version(): string;
  limits: NativeLimits;
  /** Whether `value` is allowed for the limits entry `name` (the engine's own check, native/engine/limits.cpp). */
  limitAllows(name: string, value: number): boolean;
  /** Parses GBNF text (native/engine/grammar_parse.cpp); throws an Error naming the line and column of a problem. */
  grammarCheck(gbnf: string): { rules: number };
  /** Loads and checks an mmproj GGUF (native/vision/mmproj.h); throws an Error naming the bad key or tensor. */
  mmprojInfo(path: string): NativeMmprojInfo;
  /** The LFM2-VL image plan the engine uses (native/vision/lfm2_plan.h); lib/vision/lfm2-plan.ts shapes it. */
  lfm2ImagePlan(width: number, height: number, params?: object): NativeLfm2Plan;
  Tokenizer: NativeTokenizerClass;
  NativeEngine: NativeEngineClass;
}

let cached: NativeAddon | undefined;

/** The limits table of the engine (loads the addon). */
export function nativeLimits(): NativeLimits {
  return loadNative().limits;
}

/** The range text of the limits entry `limit` when it refuses `v` (anything but an allowed number), else null:
 * the engine's own check, for every TypeScript surface (normalizers, CLI flags), each naming the value its way. */
export function limitRefusal(limit: string, v: unknown): string | null {
  if (typeof v === 'number' && loadNative().limitAllows(limit, v)) return null;
  return nativeLimits().params[limit].range;
}

/** The libc tag of this machine's prebuilds ('glibc' / 'musl' on Linux, '' elsewhere), as scripts/prebuild.mjs names them. */
export function prebuildLibc(): string {
  if (process.platform !== 'linux') return '';
  return (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime ? 'glibc' : 'musl';
}

/** Whether this machine has the NVIDIA kernel driver (what the CUDA backend needs at run time). */
function nvidiaDriverPresent(): boolean {
  return ['/proc/driver/nvidia/version', '/dev/nvidiactl'].some((p) => existsSync(p));
}

/**
 * The CUDA prebuild to load, or null: the package's prebuilds/<platform>-<arch>-cuda/ addon (for this libc) when
 * the machine has an NVIDIA driver or SPINDLE_NATIVE_VARIANT is 'cuda'; never with SPINDLE_NATIVE_VARIANT 'cpu'.
 */
export function cudaPrebuild(root = packageRoot, env: NodeJS.ProcessEnv = process.env, driver = nvidiaDriverPresent): string | null {
  const variant = env.SPINDLE_NATIVE_VARIANT;
  if (variant !== undefined && variant !== '' && variant !== 'cpu' && variant !== 'cuda') {
    throw new Error(`SPINDLE_NATIVE_VARIANT must be 'cpu' or 'cuda' (got '${variant}')`);
  }
  if (variant === 'cpu') return null;
  const dir = join(root, 'prebuilds', `${process.platform}-${process.arch}-cuda`);
  if (!existsSync(dir) || (variant !== 'cuda' && !driver())) return null;
  const libc = prebuildLibc();
  const file = readdirSync(dir).find((f) => f.endsWith('.node') && (libc === '' || f.split('.').includes(libc)));
  return file ? join(dir, file) : null;
}

export function loadNative(): NativeAddon {
  if (!cached) {
    const override = process.env.SPINDLE_NATIVE_PATH;
    const cuda = override ? null : cudaPrebuild();
    if (cuda) {
      cached = require(cuda) as NativeAddon;
    } else if (override) {
      const path = resolve(override);
      if (path.endsWith('.node')) {
        cached = require(path) as NativeAddon;
      } else {
        const nodeGypBuild = require('node-gyp-build') as (dir: string) => NativeAddon;
        cached = nodeGypBuild(path);
      }
    } else {
      const nodeGypBuild = require('node-gyp-build') as (dir: string) => NativeAddon;
      cached = nodeGypBuild(packageRoot);
    }
  }
  return cached;
}
