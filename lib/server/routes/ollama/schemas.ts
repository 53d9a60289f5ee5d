// JSON schemas of the Ollama request bodies (/api/generate, /api/chat, /api/show), validated by Fastify's
// Ajv with coercion off. Every field has a type and outer bounds; the fine sampling ranges stay in
// lib/sampling-params.ts. Invariant: unknown fields and unknown `options` keys pass (Ollama ignores them too);
// fields Ollama knows but this server does not implement are refused by name in ollama.ts.
import { maxLogprobs } from '../../../sampling-params.js';
import { MAX_MESSAGES, MAX_PROMPT_IDS, MAX_TEXT } from '../../schemas.js';

const INT32_MAX = 2 ** 31 - 1;
const text = (maxLength = MAX_TEXT) => ({ type: 'string', maxLength });
const number = (minimum: number, maximum: number) => ({ type: ['number', 'null'], minimum, maximum });
const integer = (minimum: number, maximum: number) => ({ type: ['integer', 'null'], minimum, maximum });
const boolean = { type: ['boolean', 'null'] };

/** Ollama's `options` (Modelfile parameters): sampling ones are used, load-time ones checked or ignored. */
const options = {
  type: ['object', 'null'],
  maxProperties: 64,
  properties: {
    temperature: number(0, 1000),
    top_k: integer(-1, INT32_MAX),
    top_p: number(0, 1),
    min_p: number(0, 1),
    typical_p: number(0, 1),
    tfs_z: number(0, 1000),
    repeat_penalty: number(0, 1000),
    repeat_last_n: integer(-1, INT32_MAX),
    presence_penalty: number(-1000, 1000),
    frequency_penalty: number(-1000, 1000),
    mirostat: integer(0, 2),
    mirostat_tau: number(0, 1000),
    mirostat_eta: number(0, 1000),
    penalize_newline: boolean,
    num_predict: integer(-2, INT32_MAX),
    seed: integer(-(2 ** 63), 2 ** 64),
    stop: { anyOf: [text(4096), { type: 'array', maxItems: 256, items: text(4096) }, { type: 'null' }] },
    ignore_eos: boolean, // Spindle extension (spindle bench sends it)
    num_ctx: integer(1, INT32_MAX),
    num_keep: integer(-1, INT32_MAX),
    num_batch: integer(0, INT32_MAX),
    num_gpu: integer(-1, INT32_MAX),
    main_gpu: integer(0, INT32_MAX),
    num_thread: integer(0, INT32_MAX),
  },
};

const common = {
  model: text(1024),
  stream: boolean,
  format: { anyOf: [text(64), { type: 'object' }, { type: 'null' }] },
  keep_alive: { anyOf: [text(64), { type: 'number' }, { type: 'null' }] },
  think: { anyOf: [{ type: 'boolean' }, text(16), { type: 'null' }] },
  logprobs: boolean,
  top_logprobs: integer(0, maxLogprobs()),
  options,
};

export const ollamaGenerateSchema = {
  type: 'object',
  required: ['model'],
  properties: {
    ...common,
    prompt: text(),
    suffix: text(),
    system: text(),
    template: text(),
    raw: boolean,
    images: { type: ['array', 'null'], maxItems: 64, items: { type: 'string' } },
    context: { type: ['array', 'null'], maxItems: MAX_PROMPT_IDS, items: { type: 'integer', minimum: 0, maximum: INT32_MAX } },
  },
} as const;

const ollamaMessage = {
  type: 'object',
  required: ['role'],
  maxProperties: 16,
  properties: {
    role: text(64),
    content: { type: ['string', 'null'], maxLength: MAX_TEXT },
    images: { type: ['array', 'null'], maxItems: 64, items: { type: 'string' } },
    tool_calls: { type: ['array', 'null'], maxItems: 1024 },
    tool_name: { type: ['string', 'null'], maxLength: 1024 },
    thinking: { type: ['string', 'null'], maxLength: MAX_TEXT },
  },
};

export const ollamaChatSchema = {
  type: 'object',
  required: ['model'],
  properties: {
    ...common,
    messages: { type: ['array', 'null'], maxItems: MAX_MESSAGES, items: ollamaMessage },
    tools: { type: ['array', 'null'], maxItems: 1024 },
  },
} as const;

// /api/embed (input: a string or strings) and the older /api/embeddings (prompt: one string).
export const ollamaEmbedSchema = {
  type: 'object',
  required: ['model'],
  properties: {
    model: text(1024),
    input: { anyOf: [text(), { type: 'array', maxItems: 2048, items: text() }, { type: 'null' }] },
    truncate: boolean,
    dimensions: integer(1, INT32_MAX),
    keep_alive: common.keep_alive,
    options,
  },
} as const;

export const ollamaEmbeddingsSchema = {
  type: 'object',
  required: ['model'],
  properties: { model: text(1024), prompt: text(), keep_alive: common.keep_alive, options },
} as const;

export const ollamaShowSchema = {
  type: 'object',
  properties: { model: text(1024), name: text(1024), verbose: boolean },
} as const;

// Model management (runner mode): the model's name as `model`, or `name` as older clients (and the ollama npm
// client's pull and delete) send it.
const named = { model: text(1024), name: text(1024) };

export const ollamaPullSchema = {
  type: 'object',
  properties: { ...named, stream: boolean, insecure: boolean },
} as const;

export const ollamaDeleteSchema = {
  type: 'object',
  properties: named,
} as const;

export const ollamaCopySchema = {
  type: 'object',
  required: ['source', 'destination'],
  properties: { source: text(1024), destination: text(1024) },
} as const;

export const ollamaCreateSchema = {
  type: 'object',
  properties: {
    ...named,
    from: text(1024),
    modelfile: text(),
    template: text(),
    system: text(),
    parameters: { type: ['object', 'null'], maxProperties: 64 },
    messages: {
      type: ['array', 'null'], maxItems: MAX_MESSAGES,
      items: { type: 'object', required: ['role', 'content'], properties: { role: text(64), content: text() } },
    },
    license: { anyOf: [text(), { type: 'array', maxItems: 64, items: text() }, { type: 'null' }] },
    stream: boolean,
    quantize: { type: ['string', 'null'], maxLength: 64 },
    files: { type: ['object', 'null'] },
    adapters: { type: ['object', 'null'] },
  },
} as const;
