// Engine options shared by LLM (vLLM spelling) and Engine (SGLang spelling), camelCase or snake_case.
// Invariant: normalizeEngineOptions returns checked values or throws a TypeError / RangeError naming the option;
// unknown options are rejected. The native engine acts on every one of them (seed and chatTemplate act in
// engine-core.ts: the seeds of requests without one, the template the model info presents): maxNumSeqs, maxNumBatchedTokens,
// chunkedPrefillSize and kvCacheMemory drive the scheduler and the paged KV cache; device picks the backend
// ('auto': CUDA when this build has it and a usable GPU and driver are present, else the CPU; 'cuda' without
// them fails the load with "device 'cuda' is not available: ..."). kvCacheMemory on a GPU is vLLM's
// gpu_memory_utilization (fraction of the device's total memory, weights included; default 0.9); on the CPU
// it is the fraction of available memory for the KV cache (default 0.25, at most 2 GiB). dtype is accepted as vLLM
// spells it (auto, float16 or its alias half, bfloat16, float32): the KV cache's type (float16 / bfloat16: half the
// memory per token), on the CPU and on a GPU; auto is float16 on both; kvCacheDtype
// sets the cache's type alone, and also takes llama.cpp's / Ollama's q8_0 and q4_0 (34 / 18 bytes per 32 values: CPU
// caches of head dims that are multiples of 32; float16 elsewhere) and vLLM's / SGLang's fp8 (fp8 = fp8_e4m3, fp8_e5m2: a byte per
// value at scale 1, as vLLM stores without calibrated scales). Activations are float32 (weights keep their GGUF types). Ranges and defaults (maxNumSeqs 256, chunked
// prefill on, a prompt taking up to a step's whole budget as in vLLM V1; -1 turns it off) are the engine's own,
// read from the addon's limits table, so every layer agrees.

import { Template } from '@huggingface/jinja';
import { limitRefusal, nativeLimits } from './native.js';

/** vLLM's --dtype values ('half' is accepted as float16). */
export const DTYPES: readonly string[] = ['auto', 'float16', 'half', 'bfloat16', 'float32'];
// kv_cache_dtype's short names (vLLM's fp16, SGLang's bf16, vLLM's fp8: e4m3, as on its CUDA backend).
const KV_ALIASES: Record<string, KvCacheDtype> = { fp16: 'float16', bf16: 'bfloat16', fp8: 'fp8_e4m3' };
export type Dtype = 'auto' | 'float16' | 'bfloat16' | 'float32';
/** The KV cache's types: dtype's, llama.cpp's / Ollama's q8_0 and q4_0, vLLM's / SGLang's fp8 ones. */
export type KvCacheDtype = Dtype | 'q8_0' | 'q4_0' | 'fp8_e4m3' | 'fp8_e5m2';

export interface EngineOptionsInput {
  model?: string;
  modelPath?: string;
  model_path?: string;
  maxModelLen?: number;
  max_model_len?: number;
  contextLength?: number;
  context_length?: number;
  maxNumSeqs?: number;
  max_num_seqs?: number;
  maxRunningRequests?: number;
  max_running_requests?: number;
  maxNumBatchedTokens?: number;
  max_num_batched_tokens?: number;
  chunkedPrefillSize?: number;
  chunked_prefill_size?: number;
  kvCacheMemory?: number;
  kv_cache_memory?: number;
  threads?: number;
  dtype?: Dtype | 'half';
  device?: 'auto' | 'cpu' | 'cuda';
  mmproj?: string | false;
  imageMinTokens?: number;
  image_min_tokens?: number;
  imageMaxTokens?: number;
  image_max_tokens?: number;
  allowedLocalMediaPath?: string;
  allowed_local_media_path?: string;
  allowedMediaDomains?: string[];
  allowed_media_domains?: string[];
  enablePrefixCaching?: boolean;
  enable_prefix_caching?: boolean;
  enforceEager?: boolean; // vLLM's enforce_eager (SGLang's disable_cuda_graph): no CUDA graphs, every step op by op
  enforce_eager?: boolean;
  disableCudaGraph?: boolean;
  disable_cuda_graph?: boolean;
  disableRadixCache?: boolean; // SGLang's spelling, inverted
  disable_radix_cache?: boolean;
  speculativeConfig?: SpeculativeConfigInput | null; // vLLM's speculative_config
  speculative_config?: SpeculativeConfigInput | null;
  speculativeAlgorithm?: string; // SGLang: 'NGRAM'
  speculative_algorithm?: string;
  speculativeNumDraftTokens?: number; // SGLang: draft tokens per step
  speculative_num_draft_tokens?: number;
  speculativeDraftModelPath?: string; // SGLang: the draft model (algorithm STANDALONE)
  speculative_draft_model_path?: string;
  pooling?: 'mean' | 'cls' | 'last'; // embeddings (llama.cpp's --pooling); absent: the model file's, else 'last'
  loraModules?: LoraModuleInput[]; // vLLM's lora_modules (SGLang's lora_paths)
  lora_modules?: LoraModuleInput[];
  loraPaths?: LoraModuleInput[];
  lora_paths?: LoraModuleInput[];
  enableLora?: boolean; // vLLM's enable_lora: accepted (adapters are on whenever loraModules names some)
  enable_lora?: boolean;
  seed?: number; // vLLM's seed (SGLang's random_seed): requests without a seed draw theirs from it
  randomSeed?: number;
  random_seed?: number;
  kvCacheDtype?: KvCacheDtype | 'half' | 'fp16' | 'bf16' | 'fp8'; // vLLM's / SGLang's kv_cache_dtype (auto: dtype decides)
  kv_cache_dtype?: KvCacheDtype | 'half' | 'fp16' | 'bf16' | 'fp8';
  chatTemplate?: string; // SGLang's chat_template (vLLM's --chat-template): the Jinja text used instead of the GGUF's
  chat_template?: string;
  generationConfig?: 'auto' | 'vllm'; // vLLM's generation_config: 'auto' applies the GGUF's general.sampling.*
  generation_config?: 'auto' | 'vllm';
  samplingDefaults?: 'model' | 'openai'; // SGLang's sampling_defaults: 'model' = 'auto', 'openai' = 'vllm'
  sampling_defaults?: 'model' | 'openai';
}

/** The KV cache types kvCacheDtype takes ('auto': as dtype says): dtype's, vLLM's / SGLang's short names, q8_0, q4_0, fp8's. */
export const KV_CACHE_DTYPES: readonly string[] = [...DTYPES, 'fp16', 'bf16', 'q8_0', 'q4_0', 'fp8', 'fp8_e4m3', 'fp8_e5m2'];

/** A LoRA adapter: { name, path, scale? } (vLLM's { name, path, base_model_name } too), 'name=path', or a path (its own name, SGLang's). */
export type LoraModuleInput = string | { name: string; path: string; scale?: number; base_model_name?: string; baseModelName?: string };

/** A LoRA adapter the engine loads with the model (llama.cpp's GGUF adapter format); requests choose it by name. */
export interface LoraModule {
  name: string;
  path: string;
  scale: number; // the user scale (llama.cpp's --lora-scaled); the delta is scale * alpha / rank * B A x
}

/** vLLM's speculative_config (camelCase or snake_case keys). */
export interface SpeculativeConfigInput {
  method?: string | null; // 'ngram' (also 'NGRAM'), 'draft_model'; absent / null: from `model` if given, else predictions only
  model?: string | null; // a draft model's GGUF file (same tokenizer)
  numSpeculativeTokens?: number;
  num_speculative_tokens?: number;
  promptLookupMin?: number;
  prompt_lookup_min?: number;
  promptLookupMax?: number;
  prompt_lookup_max?: number;
}

/** Speculative decoding: n-gram (prompt lookup) drafts for every request, and the draft length that also bounds
 * the drafts of a request's prediction. */
export interface SpeculativeConfig {
  method: 'ngram' | 'draft_model' | null;
  model?: string; // the draft model's GGUF file (method 'draft_model')
  numSpeculativeTokens?: number; // absent: the engine's default (16)
  promptLookupMin?: number; // absent: 2
  promptLookupMax?: number; // absent: 4
}

export interface EngineOptions {
  model: string;
  maxModelLen: number | null; // null: the model's trained context length
  maxNumSeqs: number;
  maxNumBatchedTokens: number | null;
  chunkedPrefillSize: number | null; // prompt tokens per sequence per step; null: the step's budget; -1: never split
  kvCacheMemory: number | null; // bytes (> 1) or a fraction (<= 1; see the header); null: automatic
  threads: number | null; // null: every core (CPU threads)
  dtype: Dtype; // what was asked ('half' reads float16): the KV cache's type on a GPU (the ready info's kvCacheDtype)
  device: 'auto' | 'cpu' | 'cuda';
  // Vision (models with an mmproj): the projector file; null: look for one mmproj*.gguf beside the model;
  // false: text only.
  mmproj: string | false | null;
  imageMinTokens: number | null; // null: the projector's default (llama.cpp's --image-min-tokens)
  imageMaxTokens: number | null;
  // Where images may come from (vLLM's --allowed-local-media-path / --allowed-media-domains). The offline APIs
  // also take file paths and bytes directly; these bound what a URL in a request may name.
  allowedLocalMediaPath: string | null;
  allowedMediaDomains: string[] | null;
  // Automatic prefix caching (vLLM's --enable-prefix-caching, on by default; SGLang's radix cache): KV blocks of
  // earlier prompts are reused by prompts that start with the same tokens. Models with recurrent state (LFM2)
  // keep a conv-state checkpoint per block for it (CPU; on CUDA they run without it for now).
  enablePrefixCaching: boolean;
  // vLLM's enforce_eager / SGLang's disable_cuda_graph: decode steps run op by op instead of replaying CUDA graphs
  // (the same bits either way; slower on a GPU, no effect on the CPU).
  enforceEager: boolean;
  speculativeConfig: SpeculativeConfig | null; // null: drafts only from requests' predictions, at most 16 per step
  // How embeddings pool the hidden states when a request does not say (llama.cpp's --pooling); null: the model
  // file's {arch}.pooling_type where it names mean / cls / last, else 'last' (vLLM's default for decoder models).
  pooling: 'mean' | 'cls' | 'last' | null;
  // LoRA adapters (llama.cpp's GGUF adapter files), loaded with the model; a request picks one by name (the
  // server: its `model`). Names are unique.
  loraModules: LoraModule[];
  seed: number | null; // requests without a seed get one from a generator started here; null: each draws at random
  kvCacheDtype: KvCacheDtype; // the KV cache's type when not 'auto' (wins over dtype, which otherwise decides)
  chatTemplate: string | null; // the chat template used instead of the GGUF's tokenizer.chat_template; null: the GGUF's
  // 'auto': the model maker's recommended sampling (the GGUF's general.sampling.*, copied from generation_config.json
  // by llama.cpp's converter) is the default of the fields a request leaves out; 'vllm': the API's own defaults.
  generationConfig: 'auto' | 'vllm';
}

type Key = keyof EngineOptions;

const ALIASES: Record<string, Key> = {
  model: 'model', modelPath: 'model', model_path: 'model',
  maxModelLen: 'maxModelLen', max_model_len: 'maxModelLen', contextLength: 'maxModelLen', context_length: 'maxModelLen',
  maxNumSeqs: 'maxNumSeqs', max_num_seqs: 'maxNumSeqs',
  maxRunningRequests: 'maxNumSeqs', max_running_requests: 'maxNumSeqs',
  maxNumBatchedTokens: 'maxNumBatchedTokens', max_num_batched_tokens: 'maxNumBatchedTokens',
  chunkedPrefillSize: 'chunkedPrefillSize', chunked_prefill_size: 'chunkedPrefillSize',
  kvCacheMemory: 'kvCacheMemory', kv_cache_memory: 'kvCacheMemory',
  threads: 'threads',
  dtype: 'dtype',
  device: 'device',
  mmproj: 'mmproj',
  imageMinTokens: 'imageMinTokens', image_min_tokens: 'imageMinTokens',
  imageMaxTokens: 'imageMaxTokens', image_max_tokens: 'imageMaxTokens',
  allowedLocalMediaPath: 'allowedLocalMediaPath', allowed_local_media_path: 'allowedLocalMediaPath',
  allowedMediaDomains: 'allowedMediaDomains', allowed_media_domains: 'allowedMediaDomains',
  enablePrefixCaching: 'enablePrefixCaching', enable_prefix_caching: 'enablePrefixCaching',
  disableRadixCache: 'enablePrefixCaching', disable_radix_cache: 'enablePrefixCaching',
  enforceEager: 'enforceEager', enforce_eager: 'enforceEager',
  disableCudaGraph: 'enforceEager', disable_cuda_graph: 'enforceEager',
  speculativeConfig: 'speculativeConfig', speculative_config: 'speculativeConfig',
  pooling: 'pooling',
  loraModules: 'loraModules', lora_modules: 'loraModules', loraPaths: 'loraModules', lora_paths: 'loraModules',
  seed: 'seed', randomSeed: 'seed', random_seed: 'seed',
  kvCacheDtype: 'kvCacheDtype', kv_cache_dtype: 'kvCacheDtype',
  chatTemplate: 'chatTemplate', chat_template: 'chatTemplate',
  generationConfig: 'generationConfig', generation_config: 'generationConfig',
  samplingDefaults: 'generationConfig', sampling_defaults: 'generationConfig',
};
const ACCEPTED_ONLY = new Set(['enableLora', 'enable_lora']); // checked as booleans, no effect of their own
// SGLang's flat spellings, folded into speculativeConfig before the options are checked.
const SGLANG_SPECULATIVE: Record<string, keyof SpeculativeConfigInput> = {
  speculativeAlgorithm: 'method', speculative_algorithm: 'method',
  speculativeNumDraftTokens: 'numSpeculativeTokens', speculative_num_draft_tokens: 'numSpeculativeTokens',
  speculativeDraftModelPath: 'model', speculative_draft_model_path: 'model',
};
const INVERTED = new Set(['disableRadixCache', 'disable_radix_cache']); // names whose boolean means the opposite

// A number allowed by the engine's limits entry `limit` (native/engine/limits.h); the message states its range.
function limited(name: string, limit: string, v: unknown): number {
  const refusal = limitRefusal(limit, v);
  if (refusal !== null) throw new RangeError(`${name} must be ${refusal} (got ${String(v)})`);
  return v as number;
}

function check(key: Key, name: string, v: unknown): EngineOptions[Key] {
  switch (key) {
    case 'model':
      if (typeof v !== 'string' || v.length === 0) throw new TypeError(`${name} must be a non-empty model reference: a .gguf path, a store name or a hub reference (hf.co/org/repo[:quant])`);
      return v;
    case 'maxModelLen':
    case 'maxNumSeqs':
    case 'maxNumBatchedTokens':
    case 'chunkedPrefillSize':
    case 'threads': return limited(name, key, v);
    case 'kvCacheMemory':
      if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || (v > 1 && !Number.isInteger(v))) {
        throw new RangeError(`${name} must be a fraction in (0, 1] or a whole number of bytes (got ${String(v)})`);
      }
      return v;
    case 'dtype':
    case 'kvCacheDtype': {
      const t = v === 'half' ? 'float16' : key === 'kvCacheDtype' && typeof v === 'string' ? KV_ALIASES[v] ?? v : v;
      if (t === 'auto' || t === 'float16' || t === 'bfloat16' || t === 'float32') return t;
      if (key === 'kvCacheDtype' && (t === 'q8_0' || t === 'q4_0' || t === 'fp8_e4m3' || t === 'fp8_e5m2')) return t;
      if (key === 'dtype') throw new RangeError(`${name} must be one of ${DTYPES.join(', ')} (got ${String(v)})`);
      throw new RangeError(`${name} must be one of ${KV_CACHE_DTYPES.join(', ')} (got ${String(v)})`);
    }
    case 'device':
      if (v === 'auto' || v === 'cpu' || v === 'cuda') return v;
      throw new RangeError(`${name} must be 'auto', 'cpu' or 'cuda' (got ${String(v)})`);
    case 'mmproj':
      if (v === false || (typeof v === 'string' && v.length > 0)) return v;
      throw new TypeError(`${name} must be the path of an mmproj .gguf file, or false for text only`);
    case 'imageMinTokens':
    case 'imageMaxTokens':
      if (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65536) return v;
      throw new RangeError(`${name} must be an integer in [1, 65536] (got ${String(v)})`);
    case 'allowedLocalMediaPath':
      if (typeof v === 'string' && v.length > 0) return v;
      throw new TypeError(`${name} must be a directory path`);
    case 'allowedMediaDomains':
      if (Array.isArray(v) && v.every((d) => typeof d === 'string' && d.length > 0)) return [...v] as string[];
      throw new TypeError(`${name} must be an array of host names`);
    case 'enablePrefixCaching':
    case 'enforceEager':
      if (typeof v === 'boolean') return v;
      throw new TypeError(`${name} must be true or false (got ${String(v)})`);
    case 'speculativeConfig': return speculativeConfig(name, v);
    case 'pooling':
      if (v === 'mean' || v === 'cls' || v === 'last') return v;
      throw new RangeError(`${name} must be 'mean', 'cls' or 'last' (got ${String(v)})`);
    case 'loraModules': return loraModules(name, v);
    case 'seed':
      if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff) return v;
      throw new RangeError(`${name} must be an integer in [0, 4294967295] (got ${String(v)})`);
    case 'generationConfig': {
      const t = v === 'model' ? 'auto' : v === 'openai' ? 'vllm' : v; // SGLang's sampling_defaults
      if (t === 'auto' || t === 'vllm') return t;
      throw new RangeError(`${name} must be 'auto' or 'vllm' (SGLang's sampling_defaults: 'model' or 'openai'; got ${String(v)})`);
    }
    case 'chatTemplate':
      if (typeof v !== 'string' || v.trim().length === 0) throw new TypeError(`${name} must be the text of a Jinja chat template`);
      try {
        new Template(v); // a broken template fails here, not at the first chat request
      } catch (e) {
        throw new TypeError(`${name}: the chat template does not parse: ${(e as Error).message}`);
      }
      return v;
  }
}

const LORA_NAME = /^[A-Za-z0-9_.:/@-]{1,256}$/;

function loraModules(name: string, v: unknown): LoraModule[] {
  if (!Array.isArray(v)) throw new TypeError(`${name} must be an array of { name, path, scale? } (or 'name=path' strings)`);
  const out: LoraModule[] = [];
  v.forEach((e, i) => {
    const at = `${name}[${i}]`;
    let m: LoraModule;
    if (typeof e === 'string') {
      const eq = e.indexOf('=');
      if (eq === 0 || eq === e.length - 1 || e === '') throw new TypeError(`${at} must be 'name=path' or a path (got '${e}')`);
      m = eq < 0 ? { name: e, path: e, scale: 1 } : { name: e.slice(0, eq), path: e.slice(eq + 1), scale: 1 }; // SGLang: a bare path names itself
    } else if (typeof e === 'object' && e !== null && !Array.isArray(e)) {
      const o = e as Record<string, unknown>;
      for (const k of Object.keys(o)) {
        if (!['name', 'path', 'scale', 'base_model_name', 'baseModelName'].includes(k)) {
          throw new TypeError(`${at}: unknown key '${k}' (known: name, path, scale, base_model_name)`);
        }
      }
      if (typeof o.name !== 'string' || typeof o.path !== 'string' || o.path === '') {
        throw new TypeError(`${at} must have a name and the path of the adapter's GGUF file`);
      }
      const scale = o.scale ?? 1;
      if (typeof scale !== 'number' || !Number.isFinite(scale) || Math.abs(scale) > 1e6) {
        throw new RangeError(`${at}.scale must be a finite number in [-1e6, 1e6] (got ${String(scale)})`);
      }
      m = { name: o.name, path: o.path, scale };
    } else {
      throw new TypeError(`${at} must be { name, path, scale? } or 'name=path'`);
    }
    if (!LORA_NAME.test(m.name)) {
      throw new RangeError(`${at}: the name '${m.name}' must be 1 to 256 letters, digits or _ . : / @ -`);
    }
    if (out.some((o) => o.name === m.name)) throw new RangeError(`${at}: the name '${m.name}' is given twice`);
    out.push(m);
  });
  return out;
}

function speculativeConfig(name: string, v: unknown): SpeculativeConfig {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new TypeError(`${name} must be an object such as { method: 'ngram', numSpeculativeTokens: 4 }`);
  }
  const out: SpeculativeConfig = { method: null };
  const keys: Record<string, 'method' | 'model' | 'numSpeculativeTokens' | 'promptLookupMin' | 'promptLookupMax'> = {
    method: 'method', model: 'model', numSpeculativeTokens: 'numSpeculativeTokens', num_speculative_tokens: 'numSpeculativeTokens',
    promptLookupMin: 'promptLookupMin', prompt_lookup_min: 'promptLookupMin',
    promptLookupMax: 'promptLookupMax', prompt_lookup_max: 'promptLookupMax',
  };
  for (const [k, value] of Object.entries(v)) {
    const key = Object.prototype.hasOwnProperty.call(keys, k) ? keys[k] : undefined;
    if (!key) throw new TypeError(`${name}: unknown key '${k}' (known: ${Object.keys(keys).join(', ')})`);
    if (value === undefined || value === null) continue;
    if (key === 'method') {
      const m = typeof value === 'string' ? value.toLowerCase() : '';
      if (!['ngram', 'draft_model', 'standalone', 'none'].includes(m)) {
        throw new RangeError(`${name}.${k} must be 'ngram' (prompt lookup; SGLang's 'NGRAM'), 'draft_model' (SGLang's ` +
          `'STANDALONE': a smaller model with the same tokenizer, given as model) or 'none' (got ${String(value)})`);
      }
      out.method = m === 'ngram' ? 'ngram' : m === 'none' ? null : 'draft_model';
    } else if (key === 'model') {
      if (typeof value !== 'string' || value.length === 0) throw new TypeError(`${name}.${k} must be the path of a draft model's GGUF file`);
      out.model = value;
    } else {
      out[key] = limited(`${name}.${k}`, key === 'numSpeculativeTokens' ? key : 'promptLookupMin / promptLookupMax', value);
    }
  }
  if (out.model !== undefined && out.method === null) out.method = 'draft_model';  // vLLM infers the method from model
  if (out.method === 'draft_model' && out.model === undefined) {
    throw new TypeError(`${name}: method 'draft_model' needs model, the draft model's GGUF file`);
  }
  if (out.method === 'ngram' && out.model !== undefined) {
    throw new TypeError(`${name}: model is a draft model, for method 'draft_model'; method 'ngram' needs none`);
  }
  if ((out.promptLookupMin ?? 2) > (out.promptLookupMax ?? 4)) {
    throw new RangeError(`${name}: promptLookupMin (${out.promptLookupMin ?? 2}) must not exceed promptLookupMax (${out.promptLookupMax ?? 4})`);
  }
  return out;
}

// SGLang's --speculative-algorithm / --speculative-num-draft-tokens as one speculativeConfig entry.
function foldSglangSpeculative(input: EngineOptionsInput, what: string): EngineOptionsInput {
  const flat = Object.entries(input).filter(([k, v]) => Object.prototype.hasOwnProperty.call(SGLANG_SPECULATIVE, k) && v != null);
  if (flat.length === 0) return input;
  const rest: Record<string, unknown> = { ...input };
  const config: Record<string, unknown> = {};
  for (const [k, v] of flat) {
    delete rest[k];
    if (config[SGLANG_SPECULATIVE[k]] !== undefined) throw new TypeError(`${what}: ${k} is given twice; give only one spelling`);
    config[SGLANG_SPECULATIVE[k]] = v;
  }
  if (rest.speculativeConfig != null || rest.speculative_config != null) {
    throw new TypeError(`${what}: ${flat.map(([k]) => k).join(' / ')} and speculativeConfig are the same option; give only one`);
  }
  rest.speculativeConfig = config;  // checked (and named in messages) as speculativeConfig.method / .numSpeculativeTokens
  return rest as EngineOptionsInput;
}

export function normalizeEngineOptions(input: EngineOptionsInput, what: string): EngineOptions {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new TypeError(`${what}: options must be an object such as { model: 'model.gguf' }`);
  }
  const defaults = nativeLimits().engineDefaults;  // the engine's own defaults (native/engine/engine.h)
  const out: EngineOptions = {
    model: '',
    maxModelLen: null,
    maxNumSeqs: defaults.maxNumSeqs,
    maxNumBatchedTokens: null,
    chunkedPrefillSize: null,
    kvCacheMemory: null,
    threads: null,
    dtype: 'auto',
    device: 'auto',
    mmproj: null,
    imageMinTokens: null,
    imageMaxTokens: null,
    allowedLocalMediaPath: null,
    allowedMediaDomains: null,
    enablePrefixCaching: true,
    enforceEager: false,
    speculativeConfig: null,
    pooling: null,
    loraModules: [],
    seed: null,
    kvCacheDtype: 'auto',
    chatTemplate: null,
    generationConfig: 'auto',
  };
  input = foldSglangSpeculative(input, what);
  const seen = new Map<Key, string>();
  for (const [name, value] of Object.entries(input)) {
    if (ACCEPTED_ONLY.has(name)) {
      if (value !== undefined && value !== null && typeof value !== 'boolean') throw new TypeError(`${what}: ${name} must be true or false`);
      continue;
    }
    const key = Object.prototype.hasOwnProperty.call(ALIASES, name) ? ALIASES[name] : undefined;
    if (!key) throw new TypeError(`${what}: unknown option '${name}' (known: ${Object.keys(ALIASES).join(', ')})`);
    if (value === undefined || value === null) continue;
    const previous = seen.get(key);
    if (previous !== undefined) throw new TypeError(`${what}: ${name} and ${previous} are the same option; give only one`);
    seen.set(key, name);
    const checked = check(key, `${what}: ${name}`, value);
    (out as unknown as Record<string, unknown>)[key] = INVERTED.has(name) ? !checked : checked;
  }
  if (!out.model) throw new TypeError(`${what}: the model path is required ({ model: 'model.gguf' })`);
  if (out.imageMinTokens !== null && out.imageMaxTokens !== null && out.imageMinTokens > out.imageMaxTokens) {
    throw new RangeError(`${what}: imageMinTokens (${out.imageMinTokens}) is above imageMaxTokens (${out.imageMaxTokens})`);
  }
  return out;
}

/** The KV cache type the engine is asked for: kvCacheDtype unless 'auto', else dtype. */
export function kvCacheType(o: Pick<EngineOptions, 'dtype' | 'kvCacheDtype'>): KvCacheDtype {
  return o.kvCacheDtype !== 'auto' ? o.kvCacheDtype : o.dtype;
}
