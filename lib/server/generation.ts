// What every generating route shares: model-name check, sampling params through the one normalizer, the
// context-length check, admission + submit of n samples per prompt, abort on client disconnect.
// Invariants: a Job's admission slot is released exactly once, when all its requests have settled; a client
// that goes away (response closed before it finished) aborts every request of its Job; submit either queues
// every request of the Job or none (a failure aborts those already queued and throws a 400).
import type { FastifyReply } from 'fastify';
import type { RequestHandle, RequestResult } from '../engine-core.js';
import { toNativeSpec } from '../llm.js';
import { normalizeSamplingParams, type SamplingParams } from '../sampling-params.js';
import { ApiError, badRequest } from './api-error.js';
import type { ServerEngine } from './plugins/engine.js';

/** Body fields that are sampling parameters, under the spelling the client used. */
export const SAMPLING_KEYS = [
  'temperature', 'top_p', 'top_k', 'min_p', 'repetition_penalty', 'repeat_penalty', 'presence_penalty',
  'frequency_penalty', 'max_tokens', 'max_completion_tokens', 'min_tokens', 'stop', 'stop_token_ids', 'ignore_eos',
  'seed', 'n',
] as const;

/** Normalizes the sampling fields of `body` (+ `extra`, already in normalizer spelling); HTTP default maxTokens: rest of the context. */
export function samplingFrom(body: Record<string, unknown>, extra: Record<string, unknown> = {}): SamplingParams {
  const input: Record<string, unknown> = {};
  for (const k of SAMPLING_KEYS) if (body[k] !== undefined && body[k] !== null) input[k] = body[k];
  return normalizeSamplingParams({ ...input, ...extra }, { defaultMaxTokens: null });
}

/** 404 for a model this server does not serve (absent = the served one). Ollama-style ':latest' tags match too. */
export function checkModel(engine: ServerEngine, model: unknown): string {
  if (model === undefined || model === null || model === '') return engine.modelName;
  const name = String(model);
  const bare = name.endsWith(':latest') ? name.slice(0, -':latest'.length) : name;
  if (engine.servedModelNames.includes(name) || engine.servedModelNames.includes(bare)) return name;
  throw new ApiError(404, `the model '${name}' does not exist (served: ${engine.servedModelNames.join(', ')})`,
    { param: 'model', code: 'model_not_found' });
}

/** 400s for prompts the engine cannot take: empty, out-of-vocabulary ids, prompt + max_tokens over the context. */
export function checkPrompt(ids: readonly number[], params: SamplingParams, maxModelLen: number, vocab: number,
  param: string, maxTokensParam = 'max_tokens'): void {
  if (ids.length === 0) throw badRequest(`${param} is empty (0 tokens)`, param);
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] < 0 || ids[i] >= vocab) throw badRequest(`${param}: token id ${ids[i]} at position ${i} is outside the vocabulary [0, ${vocab})`, param, 'invalid_token_id');
  }
  const wanted = params.maxTokens ?? 1;
  if (ids.length + wanted > maxModelLen) {
    const asked = params.maxTokens === null ? 'and at least 1 token must be generated'
      : `and ${params.maxTokens} in the completion (${ids.length + params.maxTokens} in all)`;
    throw new ApiError(400, `This model's maximum context length is ${maxModelLen} tokens. However, the prompt has ` +
      `${ids.length} tokens ${asked}. Please reduce the length of the prompt or ${maxTokensParam}.`,
    { param: params.maxTokens === null ? param : maxTokensParam, code: 'context_length_exceeded' });
  }
  for (const id of params.stopTokenIds) {
    if (id >= vocab) throw badRequest(`stop_token_ids: ${id} is outside the vocabulary [0, ${vocab})`, 'stop_token_ids', 'invalid_token_id');
  }
}

export interface JobRequest {
  handle: RequestHandle;
  prompt: number; // index of the prompt
  index: number; // choice index: prompt * n + sample
}

export class Job {
  readonly requests: JobRequest[] = [];
  readonly promptTokens: number[];
  readonly started = performance.now();
  firstTokenAt: number | null = null;
  #release: () => void;

  /** Reserves admission for every sample of every prompt, then queues them all (or none). */
  constructor(engine: ServerEngine, prompts: number[][], params: SamplingParams, stream: boolean) {
    this.promptTokens = prompts.map((p) => p.length);
    this.#release = engine.begin(prompts.length * params.n);
    try {
      prompts.forEach((ids, p) => {
        for (let j = 0; j < params.n; j++) {
          const handle = engine.core.submit(toNativeSpec(ids, params, j), stream);
          this.requests.push({ handle, prompt: p, index: p * params.n + j });
        }
      });
    } catch (e) {
      this.abort();
      this.#release();
      throw badRequest((e as Error).message);
    }
    void Promise.allSettled(this.requests.map((r) => r.handle.result)).then(() => this.#release());
  }

  abort(): void {
    for (const r of this.requests) r.handle.abort();
  }

  /** Aborts the job when the client goes away before the response has been sent completely. */
  bindToReply(reply: FastifyReply): void {
    const res = reply.raw;
    res.once('close', () => { if (!res.writableFinished) this.abort(); });
  }

  /** All results in choice order; a failed generation rejects. */
  results(): Promise<RequestResult[]> {
    return Promise.all(this.requests.map((r) => r.handle.result));
  }
}

export function usageOf(promptTokens: number, completionTokens: number): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** Prompt tokens counted once per prompt (as OpenAI does for n > 1), completion tokens over every choice. */
export function jobUsage(job: Job, completionTokens: number): ReturnType<typeof usageOf> {
  return usageOf(job.promptTokens.reduce((a, b) => a + b, 0), completionTokens);
}

/** Random request id suffix (OpenAI ids look like `chatcmpl-<24+ chars>`). */
export function requestId(prefix: string): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return `${prefix}-${Buffer.from(bytes).toString('hex')}`;
}
