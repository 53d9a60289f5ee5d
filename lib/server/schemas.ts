// JSON schemas for the request bodies (validated by Fastify's Ajv with coercion off). Every field has a type;
// sizes (lengths, counts) are bounded here, while the ranges of sampling parameters are checked only by
// lib/sampling-params.ts (the one normalizer, reading the engine's limits table), so no range is written twice.
// Invariant: unknown fields pass (ignored, as docs/api.md says for HTTP); fields we know but do not support are
// refused by name in the routes (see refuseUnsupported).
import { MAX_N, maxLogprobs } from '../sampling-params.js';

const INT32_MAX = 2 ** 31 - 1;
export const MAX_TEXT = 2 * 1024 * 1024; // characters; the body limit is 2 MiB anyway
export const MAX_MESSAGES = 4096;
export const MAX_PROMPTS = 256; // prompts in one /v1/completions request
export const MAX_PROMPT_IDS = 1 << 20;

const nullable = (s: Record<string, unknown>): Record<string, unknown> => ({ ...s, type: [s.type as string, 'null'] });
const number = () => nullable({ type: 'number' });
const integer = (minimum: number, maximum: number) => nullable({ type: 'integer', minimum, maximum });
const text = (maxLength = MAX_TEXT) => ({ type: 'string', maxLength });
const tokenIdList = (maxItems: number) => ({ type: 'array', maxItems, items: { type: 'integer', minimum: 0, maximum: INT32_MAX } });

/** Sampling fields shared by /v1/chat/completions and /v1/completions (snake_case, as sent). */
const samplingProperties = {
  temperature: number(),
  top_p: number(),
  top_k: number(),
  min_p: number(),
  repetition_penalty: number(),
  repeat_penalty: number(),
  presence_penalty: number(),
  frequency_penalty: number(),
  max_tokens: number(),
  max_completion_tokens: number(),
  min_tokens: number(),
  stop: { anyOf: [text(4096), { type: 'array', maxItems: 256, items: text(4096) }, { type: 'null' }] },
  stop_token_ids: { anyOf: [tokenIdList(1024), { type: 'null' }] },
  ignore_eos: nullable({ type: 'boolean' }),
  prompt_logprobs: number(), // vLLM's; the sampling normalizer checks the range
  seed: integer(-(2 ** 63), 2 ** 64),
  n: integer(1, MAX_N),
  stream: nullable({ type: 'boolean' }),
  stream_options: {
    anyOf: [{
      type: 'object', maxProperties: 16,
      properties: { include_usage: nullable({ type: 'boolean' }), continuous_usage_stats: nullable({ type: 'boolean' }) },
    }, { type: 'null' }],
  },
  user: nullable(text(1024)),
  model: nullable(text(1024)),
  // OpenAI's Predicted Outputs (the sampling normalizer checks the shape): { type: 'content', content }
  prediction: {
    anyOf: [text(), {
      type: 'object', maxProperties: 4,
      properties: {
        type: text(64),
        content: { anyOf: [text(), { type: 'array', maxItems: 4096, items: { type: 'object', maxProperties: 4, properties: { type: text(64), text: text() } } }] },
      },
    }, { type: 'null' }],
  },
  speculative: nullable({ type: 'boolean' }),
} as const;

// image_url.url: an http(s) URL or a data URL (a 20 MiB image is about 27 M characters of base64).
const MAX_IMAGE_URL = 32 * 1024 * 1024;
const contentPart = {
  type: 'object',
  required: ['type'],
  maxProperties: 16,
  properties: {
    type: text(64),
    text: text(),
    image_url: {
      anyOf: [text(MAX_IMAGE_URL), {
        type: 'object', required: ['url'], maxProperties: 8,
        properties: { url: text(MAX_IMAGE_URL), detail: nullable(text(16)) },
      }],
    },
  },
};

const message = {
  type: 'object',
  required: ['role'],
  maxProperties: 64,
  properties: {
    role: { type: 'string', maxLength: 64 },
    content: { anyOf: [text(), { type: 'array', maxItems: 1024, items: contentPart }, { type: 'null' }] },
    name: nullable(text(1024)),
    tool_calls: nullable({ type: 'array', maxItems: 1024 }),
    tool_call_id: nullable(text(1024)),
  },
};

export const chatCompletionSchema = {
  type: 'object',
  required: ['messages'],
  properties: {
    ...samplingProperties,
    messages: { type: 'array', minItems: 1, maxItems: MAX_MESSAGES, items: message },
    logprobs: nullable({ type: 'boolean' }),
    top_logprobs: integer(0, maxLogprobs()),
    add_generation_prompt: nullable({ type: 'boolean' }),
    continue_final_message: nullable({ type: 'boolean' }),
    chat_template_kwargs: nullable({ type: 'object', maxProperties: 64 }),
    reasoning_effort: nullable({ type: 'string', maxLength: 16 }),
    response_format: nullable({ type: 'object', maxProperties: 8, properties: { type: text(64) } }),
    tools: nullable({ type: 'array', maxItems: 1024 }),
    logit_bias: nullable({ type: 'object', maxProperties: 1024 }),
  },
} as const;

export const completionSchema = {
  type: 'object',
  required: ['prompt'],
  properties: {
    ...samplingProperties,
    prompt: {
      anyOf: [
        text(),
        { type: 'array', minItems: 1, maxItems: MAX_PROMPTS, items: text() },
        { ...tokenIdList(MAX_PROMPT_IDS), minItems: 1 },
        { type: 'array', minItems: 1, maxItems: MAX_PROMPTS, items: { ...tokenIdList(MAX_PROMPT_IDS), minItems: 1 } },
      ],
    },
    echo: nullable({ type: 'boolean' }),
    logprobs: integer(0, maxLogprobs()),
    best_of: integer(1, MAX_N),
    suffix: nullable(text()),
    response_format: nullable({ type: 'object', maxProperties: 8, properties: { type: text(64) } }),
    logit_bias: nullable({ type: 'object', maxProperties: 1024 }),
  },
} as const;

// The Responses API: outer bounds only; items, tools and text.format are checked where they are converted
// (responses/input.ts), with errors naming them.
export const responsesSchema = {
  type: 'object',
  required: ['input'],
  properties: {
    ...samplingProperties,
    model: nullable(text(1024)),
    input: { anyOf: [text(), { type: 'array', maxItems: MAX_MESSAGES, items: { type: 'object' } }] },
    instructions: nullable(text()),
    previous_response_id: nullable(text(256)),
    store: nullable({ type: 'boolean' }),
    stream: nullable({ type: 'boolean' }),
    background: nullable({ type: 'boolean' }),
    max_output_tokens: integer(1, INT32_MAX),
    top_logprobs: integer(0, maxLogprobs()),
    include: nullable({ type: 'array', maxItems: 64 }),
    tools: nullable({ type: 'array', maxItems: 1024, items: { type: 'object' } }),
    parallel_tool_calls: nullable({ type: 'boolean' }),
    text: nullable({ type: 'object' }),
    metadata: nullable({ type: 'object', maxProperties: 16 }),
    user: nullable(text(1024)),
  },
} as const;

export const MAX_EMBEDDING_INPUTS = 2048; // inputs in one /v1/embeddings request (OpenAI's limit)

export const embeddingSchema = {
  type: 'object',
  required: ['input'],
  properties: {
    model: nullable(text(1024)),
    input: {
      anyOf: [
        text(),
        { type: 'array', minItems: 1, maxItems: MAX_EMBEDDING_INPUTS, items: text() },
        { ...tokenIdList(MAX_PROMPT_IDS), minItems: 1 },
        { type: 'array', minItems: 1, maxItems: MAX_EMBEDDING_INPUTS, items: { ...tokenIdList(MAX_PROMPT_IDS), minItems: 1 } },
      ],
    },
    encoding_format: nullable(text(16)),
    dimensions: integer(1, INT32_MAX),
    user: nullable(text(1024)),
    normalize: nullable({ type: 'boolean' }),
    truncate_prompt_tokens: integer(-1, INT32_MAX),
  },
} as const;

const MAX_DOCUMENTS = 2048;

export const rerankSchema = {
  type: 'object',
  required: ['query'],
  properties: {
    model: nullable(text(1024)),
    query: text(),
    documents: nullable({ type: 'array', maxItems: MAX_DOCUMENTS, items: { anyOf: [text(), { type: 'object', required: ['text'], properties: { text: text() } }] } }),
    texts: nullable({ type: 'array', maxItems: MAX_DOCUMENTS, items: text() }),
    top_n: integer(0, INT32_MAX),
    return_documents: nullable({ type: 'boolean' }),
    return_text: nullable({ type: 'boolean' }),
  },
} as const;

export const scoreSchema = {
  type: 'object',
  required: ['text_1', 'text_2'],
  properties: {
    model: nullable(text(1024)),
    text_1: { anyOf: [text(), { type: 'array', maxItems: MAX_DOCUMENTS, items: text() }] },
    text_2: { anyOf: [text(), { type: 'array', maxItems: MAX_DOCUMENTS, items: text() }] },
  },
} as const;

export const tokenizeSchema = {
  type: 'object',
  properties: {
    model: nullable(text(1024)),
    prompt: text(),
    messages: { type: 'array', minItems: 1, maxItems: MAX_MESSAGES, items: message },
    add_special_tokens: nullable({ type: 'boolean' }),
    add_generation_prompt: nullable({ type: 'boolean' }),
    continue_final_message: nullable({ type: 'boolean' }),
  },
} as const;

export const detokenizeSchema = {
  type: 'object',
  required: ['tokens'],
  properties: { model: nullable(text(1024)), tokens: tokenIdList(MAX_PROMPT_IDS) },
} as const;
