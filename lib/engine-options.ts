// Engine options shared by LLM (vLLM spelling) and Engine (SGLang spelling), camelCase or snake_case.
// Invariant: normalizeEngineOptions returns checked values or throws a TypeError / RangeError naming the option;
// unknown options are rejected. The native engine acts on every one of them: maxNumSeqs, maxNumBatchedTokens,
// chunkedPrefillSize and kvCacheMemory drive the scheduler and the paged KV cache; device picks the backend
// ('auto': CUDA when this build has it and a usable GPU and driver are present, else the CPU; 'cuda' without
// them fails the load with "device 'cuda' is not available: ..."). kvCacheMemory on a GPU is vLLM's
// gpu_memory_utilization (fraction of the device's total memory, weights included; default 0.9); on the CPU
// it is the fraction of available memory for the KV cache (default 0.25, at most 2 GiB). dtype is accepted as vLLM
// spells it (auto, float16 or its alias half, bfloat16, float32); this build computes activations and the KV cache
// in float32 whatever it says (weights keep their GGUF types). Ranges and defaults (maxNumSeqs 256, chunked
// prefill on with chunks of 512 tokens as in vLLM V1 / SGLang; -1 turns it off) are the engine's own, read from
// the addon's limits table, so every layer agrees.

import { limitRefusal, nativeLimits } from './native.js';

/** vLLM's --dtype values ('half' is accepted as float16). */
export const DTYPES: readonly string[] = ['auto', 'float16', 'half', 'bfloat16', 'float32'];
export type Dtype = 'auto' | 'float16' | 'bfloat16' | 'float32';

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
}

export interface EngineOptions {
  model: string;
  maxModelLen: number | null; // null: the model's trained context length
  maxNumSeqs: number;
  maxNumBatchedTokens: number | null;
  chunkedPrefillSize: number; // prompt tokens per sequence per step; -1: never split a prompt
  kvCacheMemory: number | null; // bytes (> 1) or a fraction (<= 1; see the header); null: automatic
  threads: number | null; // null: every core (CPU threads)
  dtype: Dtype; // what was asked ('half' reads float16); the CPU and CUDA backends compute in float32 today
  device: 'auto' | 'cpu' | 'cuda';
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
};

// A number allowed by the engine's limits entry `limit` (native/engine/limits.h); the message states its range.
function limited(name: string, limit: string, v: unknown): number {
  const refusal = limitRefusal(limit, v);
  if (refusal !== null) throw new RangeError(`${name} must be ${refusal} (got ${String(v)})`);
  return v as number;
}

function check(key: Key, name: string, v: unknown): EngineOptions[Key] {
  switch (key) {
    case 'model':
      if (typeof v !== 'string' || v.length === 0) throw new TypeError(`${name} must be a non-empty path to a .gguf file`);
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
      if (v === 'half') return 'float16';
      if (v === 'auto' || v === 'float16' || v === 'bfloat16' || v === 'float32') return v;
      throw new RangeError(`${name} must be one of ${DTYPES.join(', ')} (got ${String(v)})`);
    case 'device':
      if (v === 'auto' || v === 'cpu' || v === 'cuda') return v;
      throw new RangeError(`${name} must be 'auto', 'cpu' or 'cuda' (got ${String(v)})`);
  }
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
    chunkedPrefillSize: defaults.chunkedPrefillSize,
    kvCacheMemory: null,
    threads: null,
    dtype: 'auto',
    device: 'auto',
  };
  const seen = new Map<Key, string>();
  for (const [name, value] of Object.entries(input)) {
    const key = Object.prototype.hasOwnProperty.call(ALIASES, name) ? ALIASES[name] : undefined;
    if (!key) throw new TypeError(`${what}: unknown option '${name}' (known: ${Object.keys(ALIASES).join(', ')})`);
    if (value === undefined || value === null) continue;
    const previous = seen.get(key);
    if (previous !== undefined) throw new TypeError(`${what}: ${name} and ${previous} are the same option; give only one`);
    seen.set(key, name);
    (out as unknown as Record<string, unknown>)[key] = check(key, `${what}: ${name}`, value);
  }
  if (!out.model) throw new TypeError(`${what}: the model path is required ({ model: 'model.gguf' })`);
  return out;
}
