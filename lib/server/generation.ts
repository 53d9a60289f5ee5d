// What every generating route shares: model-name check, sampling params through the one normalizer, the
// context-length check, admission + submit of n samples per prompt, abort on client disconnect, and the
// timing of every request (first token, inter-token gaps, end to end) reported to a GenerationObserver.
// Invariants: a Job's admission slot is released exactly once, when all its requests have settled; a client
// that goes away (response closed before it finished) aborts every request of its Job; submit either queues
// every request of the Job or none (a failure aborts those already queued and throws a 400); every request
// is submitted streaming and its deltas are read exactly once (by the route's stream, or by results()), so
// streamed and non-streamed requests are timed the same way.
import type { FastifyReply } from 'fastify';
import type { CorePrompt, RequestDelta, RequestHandle, RequestPhases, RequestResult, Submission, SubmitTarget } from '../engine-core.js';
import type { FinishReason } from '../native.js';
import { normalizeSamplingParams, withSamplingDefaults, type SamplingParams } from '../sampling-params.js';
import { ApiError, badRequest } from './api-error.js';
import type { ServerEngine } from './plugins/engine.js';

/** Sequences one HTTP request may run (prompts x n): each holds its sampler's tables while it waits, so a single
 * request stays bounded whatever its n and prompt count. */
export const MAX_REQUEST_SEQUENCES = 2048;

/** Body fields that are sampling parameters, under the spelling the client used. */
export const SAMPLING_KEYS = [
  'temperature', 'top_p', 'top_k', 'min_p', 'repetition_penalty', 'repeat_penalty', 'presence_penalty',
  'frequency_penalty', 'max_tokens', 'max_completion_tokens', 'min_tokens', 'stop', 'stop_token_ids', 'ignore_eos',
  'seed', 'n', 'logit_bias', 'skip_special_tokens', 'prediction', 'speculative', 'prompt_logprobs',
  // output constraints (lib/constraints.ts): vLLM, its older guided_* names, SGLang
  'structured_outputs', 'guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'regex', 'ebnf', 'json_schema',
] as const;

/**
 * Normalizes the sampling fields of `body` (+ `extra`, already in normalizer spelling), over `defaults` (a store
 * model's Modelfile parameters in snake_case; a field the request gives wins); HTTP default maxTokens: rest of the
 * context.
 */
export function samplingFrom(body: Record<string, unknown>, extra: Record<string, unknown> = {},
  defaults: Record<string, unknown> = {}): SamplingParams {
  const input: Record<string, unknown> = {};
  for (const k of SAMPLING_KEYS) if (body[k] !== undefined && body[k] !== null) input[k] = body[k];
  return normalizeSamplingParams(withSamplingDefaults({ ...input, ...extra }, defaults), { defaultMaxTokens: null });
}

/**
 * The request's model name (absent = the served one); 404 for a name not served under --strict-model-name. A LoRA
 * adapter's name (--lora-modules) is always served.
 */
export function checkModel(engine: ServerEngine, model: unknown): string {
  if (model === undefined || model === null || model === '') return engine.modelName;
  const name = String(model);
  if (engine.acceptsModel(name) || engine.loraFor(name) !== null) return name;
  throw new ApiError(404, `the model '${name}' does not exist (served: ${engine.modelNames.join(', ')})`,
    { param: 'model', code: 'model_not_found' });
}

/** vLLM's cache_salt: a non-empty string (null / absent: none), or a 400. */
export function cacheSaltOf(body: object): string | null {
  const v = (body as { cache_salt?: unknown }).cache_salt;
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v === '') throw badRequest('cache_salt must be a non-empty string', 'cache_salt');
  return v;
}

/** 400s for prompts the engine cannot take: empty, out-of-vocabulary ids, prompt + max_tokens over the context. */
export function checkPrompt(ids: readonly number[], params: SamplingParams, maxModelLen: number, vocab: number,
  param: string, maxTokensParam = 'max_tokens', hasImages = false): void {
  if (ids.length === 0) throw badRequest(`${param} is empty (0 tokens)`, param);
  for (let i = 0; i < ids.length; i++) {
    if (hasImages && ids[i] === -1) continue; // an image embedding's place (the engine checks the layout)
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

/** Receives the timing of every request (the metrics plugin). Times in seconds. */
export interface GenerationObserver {
  /** A request's first token arrived `seconds` after the Job was admitted. */
  firstToken(seconds: number): void;
  /** A later delta with `tokens` tokens arrived `seconds` after the previous one. */
  interToken(seconds: number, tokens: number): void;
  /** A request settled: its finish reason ('error' when it failed) and admission-to-finish time. */
  finished(reason: FinishReason | 'error', e2eSeconds: number): void;
  /** The engine settled some of a request's phases (queue and prefill with its first token, decode with its finish). */
  phases?(p: RequestPhases): void;
}

export interface JobRequest {
  handle: RequestHandle;
  prompt: number; // index of the prompt
  index: number; // choice index: prompt * n + sample (samples of earlier prompts before it)
  firstTokenAt: number | null; // performance.now() ms of the first delta with tokens
  lastTokenAt: number | null; // performance.now() ms of the latest delta with tokens
  finishedAt: number | null; // performance.now() ms of the finishing delta (or the failure)
  read: boolean; // its deltas have been handed out (by deltas())
  phases: RequestPhases; // the engine's phases of it, as they come (queue and prefill with the first token, decode at the end)
}

export class Job {
  readonly requests: JobRequest[] = [];
  readonly promptTokens: number[];
  readonly started = performance.now(); // ms
  readonly #observer: GenerationObserver | null;
  #release: () => void;

  /**
   * Reserves admission for every sample of every prompt, then queues them all (or none). params: one for every
   * prompt, or one per prompt (SGLang's sampling_params list).
   */
  constructor(engine: ServerEngine, prompts: CorePrompt[], params: SamplingParams | readonly SamplingParams[],
    observer: GenerationObserver | null = null, target: SubmitTarget = {}) {
    this.promptTokens = prompts.map((p) => ('tokenIds' in p ? p.tokenIds.length : (p as readonly number[]).length));
    this.#observer = observer;
    const perPrompt = Array.isArray(params) ? params as readonly SamplingParams[] : prompts.map(() => params as SamplingParams);
    const sequences = perPrompt.reduce((a, p) => a + p.n, 0);
    if (sequences > MAX_REQUEST_SEQUENCES) {
      throw badRequest(`a request may run at most ${MAX_REQUEST_SEQUENCES} sequences (prompts x n); this one asks for ${sequences}`, 'n');
    }
    this.#release = engine.begin(sequences);
    let submission: Submission;
    try {
      submission = engine.core.submitMany(prompts, perPrompt, { stream: true, ...target });
    } catch (e) {
      this.#release();
      throw badRequest((e as Error).message);
    }
    let index = 0;
    submission.handles.forEach((row, p) => row.forEach((handle) => {
      this.requests.push({
        handle, prompt: p, index: index++, firstTokenAt: null, lastTokenAt: null, finishedAt: null, read: false, phases: {},
      });
    }));
    void Promise.allSettled(this.requests.map((r) => r.handle.result)).then(() => this.#release());
  }

  abort(): void {
    for (const r of this.requests) r.handle.abort();
  }

  /** Aborts the job when the client goes away before the response has been sent completely (or went already). */
  bindToReply(reply: FastifyReply): void {
    const res = reply.raw;
    if (res.destroyed) {
      this.abort();
      return;
    }
    res.once('close', () => { if (!res.writableFinished) this.abort(); });
  }

  /** The deltas of one request, in order, timed for the observer; ends after the finishing delta, throws on failure. */
  async *deltas(r: JobRequest): AsyncGenerator<RequestDelta> {
    if (r.read) throw new Error(`the deltas of request ${r.index} were already read`);
    r.read = true;
    try {
      for await (const d of r.handle.deltas!) {
        this.#time(r, d);
        yield d;
      }
    } catch (e) {
      if (r.finishedAt === null) {
        r.finishedAt = performance.now();
        this.#observer?.finished('error', (r.finishedAt - this.started) / 1000);
      }
      throw e;
    }
  }

  #time(r: JobRequest, d: RequestDelta): void {
    const now = performance.now();
    if (d.phases) {
      for (const [k, v] of Object.entries(d.phases) as [keyof RequestPhases, number | undefined][]) if (v !== undefined) r.phases[k] = v;
      this.#observer?.phases?.(d.phases);
    }
    if (d.tokenIds.length > 0) {
      if (r.lastTokenAt === null) {
        r.firstTokenAt = now;
        this.#observer?.firstToken((now - this.started) / 1000);
      } else {
        this.#observer?.interToken((now - r.lastTokenAt) / 1000, d.tokenIds.length);
      }
      r.lastTokenAt = now;
    }
    if (d.finishReason !== null && r.finishedAt === null) {
      r.finishedAt = now;
      this.#observer?.finished(d.finishReason, (now - this.started) / 1000);
    }
  }

  /** All results in choice order (reading the deltas no stream has read); a failed generation aborts the rest and rejects. */
  async results(): Promise<RequestResult[]> {
    try {
      await Promise.all(this.requests.map(async (r) => {
        if (r.read) return;
        const it = this.deltas(r);
        while (!(await it.next()).done);
      }));
      return await Promise.all(this.requests.map((r) => r.handle.result));
    } catch (e) {
      this.abort();
      throw e;
    }
  }
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number }; // prompt tokens served from the prefix cache
  // speculative draft tokens (from `prediction`, or the server's n-gram drafts) the model accepted / rejected
  completion_tokens_details: { accepted_prediction_tokens: number; rejected_prediction_tokens: number; reasoning_tokens?: number };
}

export function usageOf(promptTokens: number, completionTokens: number, cachedTokens = 0, draftTokens = 0,
  acceptedDraftTokens = 0): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
    completion_tokens_details: {
      accepted_prediction_tokens: acceptedDraftTokens,
      rejected_prediction_tokens: draftTokens - acceptedDraftTokens,
    },
  };
}

/** Prompt tokens counted once per prompt (as OpenAI does for n > 1), completion tokens over every choice; the
 * cached tokens of a prompt are the most any of its choices found in the prefix cache. */
export function jobUsage(job: Job, completionTokens: number): Usage {
  const cached = job.promptTokens.map(() => 0);
  for (const r of job.requests) cached[r.prompt] = Math.max(cached[r.prompt], r.handle.cachedTokens);
  const sum = (f: (r: JobRequest) => number): number => job.requests.reduce((a, r) => a + f(r), 0);
  return usageOf(job.promptTokens.reduce((a, b) => a + b, 0), completionTokens, cached.reduce((a, b) => a + b, 0),
    sum((r) => r.handle.draftTokens), sum((r) => r.handle.acceptedDraftTokens));
}

/** Random request id suffix (OpenAI ids look like `chatcmpl-<24+ chars>`). */
/** `bytes` random bytes as hex: the body of every id the server makes up (requests, tool calls, responses). */
export function randomHex(bytes: number): string {
  const b = new Uint8Array(bytes);
  crypto.getRandomValues(b);
  return Buffer.from(b).toString('hex');
}

export function requestId(prefix: string): string {
  return `${prefix}-${randomHex(12)}`;
}
