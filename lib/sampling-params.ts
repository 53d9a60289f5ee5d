// The one sampling-parameter normalizer shared by every surface (offline LLM / Engine, HTTP).
// Invariant: normalizeSamplingParams either returns a complete, range-checked SamplingParams or throws a
// SamplingParamsError naming the field (as the user spelled it) and the allowed range. Every name is accepted
// in camelCase and snake_case, plus the aliases users bring from vLLM / SGLang / OpenAI / llama.cpp / Ollama.
// The ranges, counts and their wording come from the engine's limits table (native/engine/limits.h, the addon's
// `limits` export), which the engine checks again with the same entries: the numbers live in one place.
// Output constraints (structured outputs, guided decoding, SGLang's json_schema / regex / ebnf) are compiled
// to a grammar here (lib/constraints.ts); at most one per request.
import { CONSTRAINT_FIELDS, compileConstraintField, StructuredOutputError, type OutputGrammar } from './constraints.js';
import { limitRefusal, nativeLimits, type NativeSubmitSpec } from './native.js';

export interface SamplingParamsInput {
  temperature?: number | null;
  topP?: number | null;
  topK?: number | null;
  minP?: number | null;
  repetitionPenalty?: number | null;
  repeatPenalty?: number | null;
  repeatLastN?: number | null;
  presencePenalty?: number | null;
  frequencyPenalty?: number | null;
  maxTokens?: number | null;
  maxNewTokens?: number | null;
  maxCompletionTokens?: number | null;
  minTokens?: number | null;
  minNewTokens?: number | null;
  stop?: string | readonly string[] | null;
  stopTokenIds?: readonly number[] | null;
  ignoreEos?: boolean | null;
  seed?: number | null;
  sampling_seed?: number | null; // SGLang's name for seed
  n?: number | null;
  logprobs?: number | null;
  promptLogprobs?: number | null; // vLLM's prompt_logprobs
  logitBias?: Record<string, number> | readonly (readonly [number, number])[] | null;
  skipSpecialTokens?: boolean | null;
  structuredOutputs?: Record<string, unknown> | null; // vLLM: { json | regex | choice | grammar | json_object }
  jsonSchema?: unknown; // SGLang (object or JSON text)
  regex?: string | null;
  ebnf?: string | null;
  grammar?: string | null; // llama.cpp: GBNF
  // Speculative decoding: the output expected back (OpenAI's Predicted Outputs: { type: 'content', content }, or
  // the text itself, or { tokenIds }), verified as draft tokens; speculative: false turns drafting off.
  prediction?: PredictionInput | null;
  speculative?: boolean | null;
  // snake_case spellings
  top_p?: number | null;
  top_k?: number | null;
  min_p?: number | null;
  repetition_penalty?: number | null;
  repeat_penalty?: number | null;
  repeat_last_n?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  max_tokens?: number | null;
  max_new_tokens?: number | null;
  max_completion_tokens?: number | null;
  min_tokens?: number | null;
  min_new_tokens?: number | null;
  stop_token_ids?: readonly number[] | null;
  ignore_eos?: boolean | null;
  logit_bias?: Record<string, number> | readonly (readonly [number, number])[] | null;
  skip_special_tokens?: boolean | null;
  structured_outputs?: Record<string, unknown> | null;
  json_schema?: unknown;
}

export interface SamplingParams {
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  repetitionPenalty: number;
  repeatLastN: number; // tokens the repetition penalty looks back: -1 all of prompt + output, 0 none, N the last N
  presencePenalty: number;
  frequencyPenalty: number;
  maxTokens: number | null; // null: until the context is full
  minTokens: number;
  stop: string[];
  stopTokenIds: number[];
  ignoreEos: boolean;
  seed: number | null; // null: a random seed per request
  n: number;
  logprobs: number | null; // null: none
  promptLogprobs: number | null; // null: none; else the prompt tokens' logprobs with this many alternatives each
  logitBias: [number, number][]; // [tokenId, bias]: added to the logit before sampling (OpenAI logit_bias)
  skipSpecialTokens: boolean; // control tokens add no text (default true)
  grammar: OutputGrammar | null; // the output constraint; null: free text
  prediction: Prediction | null; // the output expected back (speculative drafts); null: none
  speculative: boolean; // false: no drafts of any kind (default true)
}

/** What a request may say it expects back: OpenAI's Predicted Outputs, the text itself, or token ids. */
export type PredictionInput =
  | string
  | { type: 'content'; content: string | readonly { type: 'text'; text: string }[] }
  | { tokenIds: readonly number[] }
  | { token_ids: readonly number[] };
export type Prediction = { text: string } | { tokenIds: number[] };

export class SamplingParamsError extends Error {
  readonly param: string;
  constructor(param: string, message: string) {
    super(message);
    this.name = 'SamplingParamsError';
    this.param = param;
  }
}

export interface NormalizeOptions {
  /** maxTokens when none is given; null = until the context is full. Default 256 (offline). */
  defaultMaxTokens?: number | null;
}

/** Samples per prompt (n): submitted as separate requests by the TypeScript layer, so its limit lives here. OpenAI's
 * limit; the samples of one prompt compute it once (the scheduler's in-batch prefix sharing). */
export const MAX_N = 128;
/** The engine's alternatives-per-token limit (native/engine/limits.h). */
export function maxLogprobs(): number { return nativeLimits().maxLogprobs; }

type Field = keyof SamplingParams;

// Every accepted spelling, mapped to its field.
const ALIASES: Record<string, Field> = {
  temperature: 'temperature',
  topP: 'topP', top_p: 'topP',
  topK: 'topK', top_k: 'topK',
  minP: 'minP', min_p: 'minP',
  repetitionPenalty: 'repetitionPenalty', repetition_penalty: 'repetitionPenalty',
  repeatPenalty: 'repetitionPenalty', repeat_penalty: 'repetitionPenalty',
  repeatLastN: 'repeatLastN', repeat_last_n: 'repeatLastN',
  presencePenalty: 'presencePenalty', presence_penalty: 'presencePenalty',
  frequencyPenalty: 'frequencyPenalty', frequency_penalty: 'frequencyPenalty',
  maxTokens: 'maxTokens', max_tokens: 'maxTokens',
  maxNewTokens: 'maxTokens', max_new_tokens: 'maxTokens',
  maxCompletionTokens: 'maxTokens', max_completion_tokens: 'maxTokens',
  minTokens: 'minTokens', min_tokens: 'minTokens',
  minNewTokens: 'minTokens', min_new_tokens: 'minTokens',
  stop: 'stop',
  stopTokenIds: 'stopTokenIds', stop_token_ids: 'stopTokenIds',
  ignoreEos: 'ignoreEos', ignore_eos: 'ignoreEos',
  seed: 'seed', sampling_seed: 'seed', // SGLang's name
  n: 'n',
  logprobs: 'logprobs',
  promptLogprobs: 'promptLogprobs', prompt_logprobs: 'promptLogprobs',
  logitBias: 'logitBias', logit_bias: 'logitBias',
  skipSpecialTokens: 'skipSpecialTokens', skip_special_tokens: 'skipSpecialTokens',
  prediction: 'prediction',
  speculative: 'speculative',
};

/**
 * input with each default whose parameter input does not give (under any spelling, null counting as not given)
 * added under the default's own name: model defaults (the GGUF's general.sampling.*, Modelfile PARAMETERs) under
 * a request's fields.
 */
export function withSamplingDefaults(input: Record<string, unknown>, defaults: Record<string, unknown>): Record<string, unknown> {
  const given = new Set<string>();
  for (const [k, v] of Object.entries(input)) if (v !== undefined && v !== null) given.add(ALIASES[k] ?? k);
  const out = { ...input };
  for (const [k, v] of Object.entries(defaults)) if (!given.has(ALIASES[k] ?? k)) out[k] = v;
  return out;
}

function fail(param: string, message: string): never {
  throw new SamplingParamsError(param, message);
}

function describe(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v);
  if (Array.isArray(v)) return 'an array';
  if (v === null) return 'null';
  return typeof v === 'object' ? 'an object' : String(v);
}

// A number allowed by the engine's limits entry `limit` (its name in native/engine/limits.h); the message uses
// the user's spelling and the entry's own range text.
function limited(name: string, limit: string, v: unknown): number {
  const refusal = limitRefusal(limit, v);
  if (refusal !== null) fail(name, `${name} must be ${refusal} (got ${describe(v)})`);
  return v as number;
}

function int(name: string, v: unknown, lo: number, hi: number, range?: string): number {
  const ok = typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;
  if (!ok) fail(name, `${name} must be ${range ?? `an integer in [${lo}, ${hi}]`} (got ${describe(v)})`);
  return v as number;
}

function stopStrings(name: string, v: unknown): string[] {
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list)) fail(name, `${name} must be a string or an array of strings (got ${describe(v)})`);
  const { maxStopStrings, maxStopStringBytes } = nativeLimits();
  if (list.length > maxStopStrings) {
    fail(name, `${name} must hold at most ${maxStopStrings} strings (got ${list.length})`);
  }
  return list.map((s, i) => {
    if (typeof s !== 'string') fail(name, `${name}[${i}] must be a string (got ${describe(s)})`);
    if (s.length === 0) fail(name, `${name}[${i}] must not be empty`);
    const bytes = Buffer.byteLength(s, 'utf8');
    if (bytes > maxStopStringBytes) {
      fail(name, `${name}[${i}] must be at most ${maxStopStringBytes} bytes (got ${bytes})`);
    }
    return s;
  });
}

function tokenIds(name: string, v: unknown): number[] {
  if (!Array.isArray(v)) fail(name, `${name} must be an array of token ids (got ${describe(v)})`);
  const { maxStopTokenIds } = nativeLimits();
  if (v.length > maxStopTokenIds) fail(name, `${name} must hold at most ${maxStopTokenIds} ids (got ${v.length})`);
  return v.map((id, i) => int(`${name}[${i}]`, id, 0, 2 ** 31 - 1, 'a non-negative integer token id'));
}

// Checks one field's value; `name` is the spelling the user wrote.
function checkField(field: Field, name: string, v: unknown): SamplingParams[Field] {
  switch (field) {
    case 'temperature':
    case 'topP':
    case 'topK':
    case 'minP':
    case 'repetitionPenalty':
    case 'repeatLastN':
    case 'presencePenalty':
    case 'frequencyPenalty':
    case 'maxTokens':
    case 'minTokens':
    case 'seed':
    case 'logprobs':
    case 'promptLogprobs': return limited(name, field, v);
    case 'stop': return stopStrings(name, v);
    case 'stopTokenIds': return tokenIds(name, v);
    case 'prediction': return prediction(name, v);
    case 'ignoreEos':
    case 'skipSpecialTokens':
    case 'speculative':
      if (typeof v !== 'boolean') fail(name, `${name} must be a boolean (got ${describe(v)})`);
      return v;
    case 'n': return int(name, v, 1, MAX_N);
    case 'logitBias': return logitBias(name, v);
    case 'grammar': return fail(name, `${name} is set through a constraint field`);
  }
}

// OpenAI's { type: 'content', content: string | [{ type: 'text', text }] }, a plain string, or { tokenIds }.
function prediction(name: string, v: unknown): Prediction {
  if (typeof v === 'string') return { text: v };
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    fail(name, `${name} must be { type: 'content', content: string }, a string or { tokenIds: number[] } (got ${describe(v)})`);
  }
  const o = v as Record<string, unknown>;
  const ids = o.tokenIds ?? o.token_ids;
  if (ids !== undefined) {
    const at = o.tokenIds !== undefined ? `${name}.tokenIds` : `${name}.token_ids`;
    if (!Array.isArray(ids)) fail(at, `${at} must be an array of token ids (got ${describe(ids)})`);
    const max = nativeLimits().maxPredictionTokens;
    if (ids.length > max) fail(at, `${at} must hold at most ${max} ids (got ${ids.length})`);
    return { tokenIds: ids.map((id, i) => int(`${at}[${i}]`, id, 0, 2 ** 31 - 1, 'a non-negative integer token id')) };
  }
  if (o.type !== 'content') fail(`${name}.type`, `${name}.type must be 'content' (got ${describe(o.type)})`);
  const content = o.content;
  if (typeof content === 'string') return { text: content };
  if (!Array.isArray(content)) fail(`${name}.content`, `${name}.content must be a string or an array of text parts (got ${describe(content)})`);
  return {
    text: content.map((part: unknown, i: number) => {
      const p = part as Record<string, unknown> | null;
      if (typeof p !== 'object' || p === null || p.type !== 'text' || typeof p.text !== 'string') {
        fail(`${name}.content[${i}]`, `${name}.content[${i}] must be { type: 'text', text: string }`);
      }
      return p.text as string;
    }).join(''),
  };
}

// OpenAI: { "tokenId": bias }; also [[tokenId, bias], ...]. Ids are checked against the vocabulary by the engine.
function logitBias(name: string, v: unknown): [number, number][] {
  const entries: [unknown, unknown][] = Array.isArray(v) ? v.map((e: unknown, i: number) => {
    if (!Array.isArray(e) || e.length !== 2) fail(name, `${name}[${i}] must be a [tokenId, bias] pair`);
    return [e[0], e[1]];
  }) : typeof v === 'object' && v !== null ? Object.entries(v) : fail(name, `${name} must be an object mapping token ids to biases (got ${describe(v)})`);
  if (entries.length > 1024) fail(name, `${name} must hold at most 1024 entries (got ${entries.length})`);
  return entries.map(([k, b]) => {
    const id = typeof k === 'string' && /^\d+$/.test(k) ? Number(k) : k;
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 2 ** 31 - 1) {
      fail(name, `${name}: ${describe(k)} is not a token id (a non-negative integer)`);
    }
    const refusal = limitRefusal('logitBias', b);
    if (refusal !== null) fail(name, `${name}[${String(k)}] must be ${refusal} (got ${describe(b)})`);
    return [id as number, b as number];
  });
}

function constraint(name: string, value: unknown): OutputGrammar {
  try {
    return compileConstraintField(name, value);
  } catch (e) {
    if (e instanceof StructuredOutputError) fail(name, e.message.startsWith(name) ? e.message : `${name}: ${e.message}`);
    throw e;
  }
}

/** Normalizes user sampling parameters (any accepted spelling) into a complete SamplingParams. */
export function normalizeSamplingParams(
  input: SamplingParamsInput | Record<string, unknown> | null | undefined,
  options: NormalizeOptions = {},
): SamplingParams {
  const out: SamplingParams = {
    temperature: 1.0,
    topP: 1.0,
    topK: -1,
    minP: 0,
    repetitionPenalty: 1.0,
    repeatLastN: -1,
    presencePenalty: 0,
    frequencyPenalty: 0,
    maxTokens: options.defaultMaxTokens === undefined ? 256 : options.defaultMaxTokens,
    minTokens: 0,
    stop: [],
    stopTokenIds: [],
    ignoreEos: false,
    seed: null,
    n: 1,
    logprobs: null,
    promptLogprobs: null,
    logitBias: [],
    skipSpecialTokens: true,
    grammar: null,
    prediction: null,
    speculative: true,
  };
  if (input === undefined || input === null) return out;
  if (typeof input !== 'object' || Array.isArray(input)) {
    fail('samplingParams', `sampling parameters must be an object (got ${describe(input)})`);
  }
  const seen = new Map<Field, string>(); // field -> the spelling that set it
  for (const [name, value] of Object.entries(input)) {
    if (Object.prototype.hasOwnProperty.call(CONSTRAINT_FIELDS, name)) {
      if (value === undefined || value === null) continue;
      const previous = seen.get('grammar');
      if (previous !== undefined) fail(name, `${name} and ${previous} are both output constraints; give only one`);
      seen.set('grammar', name);
      out.grammar = constraint(name, value);
      continue;
    }
    const field = Object.prototype.hasOwnProperty.call(ALIASES, name) ? ALIASES[name] : undefined;
    if (!field) {
      fail(name, `unknown sampling parameter '${name}' (known: ${[...new Set(Object.values(ALIASES))].join(', ')}, ` +
        `and the output constraints ${Object.keys(CONSTRAINT_FIELDS).filter((k) => !/[_.]/.test(k)).join(', ')})`);
    }
    if (value === undefined || value === null) continue;
    const previous = seen.get(field);
    if (previous !== undefined) fail(name, `${name} and ${previous} are the same parameter; give only one`);
    seen.set(field, name);
    (out as unknown as Record<string, unknown>)[field] = checkField(field, name, value);
  }
  if (out.maxTokens !== null && out.minTokens > out.maxTokens) {
    fail(seen.get('minTokens') ?? 'minTokens',
      `${seen.get('minTokens') ?? 'minTokens'} (${out.minTokens}) must not exceed ${seen.get('maxTokens') ?? 'maxTokens'} (${out.maxTokens})`);
  }
  return out;
}

/** Sample `j` of a request with these params as the native submit spec (seed + j: distinct, reproducible). */
export function toNativeSpec(ids: readonly number[], p: SamplingParams, j = 0): NativeSubmitSpec {
  return {
    promptTokenIds: Int32Array.from(ids),
    temperature: p.temperature,
    topP: p.topP,
    topK: p.topK,
    minP: p.minP,
    repetitionPenalty: p.repetitionPenalty,
    repeatLastN: p.repeatLastN,
    presencePenalty: p.presencePenalty,
    frequencyPenalty: p.frequencyPenalty,
    maxTokens: p.maxTokens ?? undefined,
    minTokens: p.minTokens,
    stop: p.stop,
    stopTokenIds: p.stopTokenIds,
    ignoreEos: p.ignoreEos,
    seed: p.seed === null ? undefined : (p.seed + j) >>> 0,
    logprobs: p.logprobs ?? undefined,
    promptLogprobs: p.promptLogprobs ?? undefined,
    skipSpecialTokens: p.skipSpecialTokens,
    grammar: p.grammar?.gbnf,
    grammarTriggers: p.grammar?.triggers,
    grammarReasoning: p.grammar?.reasoning,
    logitBias: p.logitBias.length > 0 ? p.logitBias : undefined,
    speculative: p.speculative,
  };
}
