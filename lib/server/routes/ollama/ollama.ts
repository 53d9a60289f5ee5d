// What /api/generate and /api/chat share: Ollama's model names, its `options` mapped onto the one sampling
// normalizer (with Ollama's defaults), the fields this server refuses by name, and the response: NDJSON chunks
// `{ model, created_at, <piece>, done: false }` then a final `done: true` object with done_reason and the
// durations in nanoseconds, or that final object alone (with the whole text) when `stream: false`.
// Invariants: every refusal is a 4xx ApiError (sent as Ollama's `{ error }`); a failure after the stream
// started is one `{ "error": ... }` line; durations are integers in nanoseconds measured on this request.
import type { ParsedToolCall, ToolCallParser, ToolStreamEvent } from '../../../tools/index.js';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { RequestDelta } from '../../../engine-core.js';
import { normalizeSamplingParams, SamplingParamsError, type SamplingParams } from '../../../sampling-params.js';
import type { Tokenizer } from '../../../tokenizer.js';
import { ApiError, badRequest, toApiError } from '../../api-error.js';
import type { Job, JobRequest } from '../../generation.js';
import { chatLogprobs } from '../../logprobs.js';
import { keepAliveOf, requestedModel, useModel } from '../../model-use.js';
import type { ServerEngine } from '../../plugins/engine.js';
import { SseStream } from '../../sse.js';
import { OutputSplitter, type OutputEvent, type RequestReasoning } from '../../reasoning.js';
import { splitReasoning, THINK_LEVELS, thinkTemplateVars } from '../../../reasoning/index.js';
import type { ThinkValue } from '../../../modelfile/index.js';

/** Ollama's api.DefaultOptions() for the sampling fields this server implements (repeat_penalty over the last repeat_last_n tokens). */
export const OLLAMA_DEFAULTS = { temperature: 0.8, top_k: 40, top_p: 0.9, repeat_penalty: 1.1, repeat_last_n: 64 } as const;

export interface OllamaOptions {
  temperature?: number | null;
  top_k?: number | null;
  top_p?: number | null;
  min_p?: number | null;
  typical_p?: number | null;
  tfs_z?: number | null;
  repeat_penalty?: number | null;
  repeat_last_n?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  mirostat?: number | null;
  num_predict?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  ignore_eos?: boolean | null;
  num_ctx?: number | null;
  [other: string]: unknown;
}

/** Fields /api/generate and /api/chat have in common. */
export interface OllamaBody {
  model: string;
  stream?: boolean | null;
  format?: string | Record<string, unknown> | null;
  keep_alive?: string | number | null;
  think?: boolean | string | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  options?: OllamaOptions | null;
}

/** The request's model name (any, or under --strict-model-name a served one, `name:latest` too); 404 `model 'x' not found` otherwise. */
export function ollamaModel(engine: ServerEngine, model: string): string {
  if (engine.acceptsModel(model) || engine.loraFor(model) !== null) return model;
  throw new ApiError(404, `model '${model}' not found (this server serves ${engine.modelNames.map((n) => `'${n}'`).join(', ')})`,
    { param: 'model', code: 'model_not_found' });
}

/** keep_alive 0 (or "0", "0s", ...) asks Ollama to unload the model. */
function isZeroDuration(v: string | number | null | undefined): boolean {
  if (typeof v === 'number') return v === 0;
  return typeof v === 'string' && /^\s*0+(\.0*)?\s*(ns|us|µs|ms|s|m|h)?\s*$/.test(v);
}

/** Single-model mode's "load" answer to an empty prompt / message list (the model is always loaded); an unload request is refused. */
export function loadAnswer(body: OllamaBody): Record<string, unknown> {
  if (isZeroDuration(body.keep_alive)) {
    throw badRequest('keep_alive: this server keeps its one model loaded for its whole life; it cannot unload it (stop the server instead)',
      'keep_alive', 'unsupported_parameter');
  }
  return { model: body.model, created_at: new Date().toISOString(), done: true, done_reason: 'load' };
}

/**
 * The answer to an empty prompt / message list. Runner mode, as Ollama: the model is loaded (done_reason 'load',
 * kept for keep_alive), or with keep_alive 0 unloaded (done_reason 'unload'); single-model mode: loadAnswer.
 */
export async function loadOrUnload(app: FastifyInstance, reply: FastifyReply, body: OllamaBody): Promise<Record<string, unknown>> {
  if (!app.runner) {
    ollamaModel(app.engine, body.model);
    return loadAnswer(body);
  }
  const head = { model: body.model, created_at: new Date().toISOString(), done: true };
  if (keepAliveOf(body.keep_alive) === 0) {
    await app.runner.expire(requestedModel(app, body.model));
    return { ...head, done_reason: 'unload' };
  }
  await useModel(app, reply, body.model, { single: () => body.model, adapters: true, keepAlive: body.keep_alive, numCtx: body.options?.num_ctx });
  return { ...head, done_reason: 'load' };
}

/**
 * Ollama's `think` as chat template variables: false turns thinking off (`enable_thinking: false`, which Qwen3's
 * template reads; any model may be asked); true or a level needs a model that reasons (a reasoning parser: given
 * or detected from its template), else a 400 as Ollama's "does not support thinking"; a level is also passed as
 * `reasoning_effort`. Unset: the template's default (Qwen3 thinks), as Ollama enables thinking by default.
 */
export function thinkKwargs(body: OllamaBody, reasons: boolean): Record<string, unknown> | undefined {
  const think = body.think;
  if (think === undefined || think === null) return undefined;
  if (typeof think === 'string' && !(THINK_LEVELS as readonly string[]).includes(think)) {
    throw badRequest(`think must be true, false or one of ${THINK_LEVELS.map((l) => `"${l}"`).join(', ')} (got "${think}")`, 'think');
  }
  if (think !== false && !reasons) throw badRequest(`think: "${body.model}" does not support thinking`, 'think', 'unsupported_parameter');
  return thinkTemplateVars(think as ThinkValue);
}

function refuseOption(name: string, why: string): never {
  throw badRequest(`options.${name}: ${why}`, `options.${name}`, 'unsupported_parameter');
}

/** Options this server cannot honour, refused unless they hold their neutral value. */
function refuseOptions(o: OllamaOptions, maxModelLen: number): void {
  if (o.mirostat != null && o.mirostat !== 0) refuseOption('mirostat', 'Mirostat sampling is not supported (use 0)');
  if (o.typical_p != null && o.typical_p !== 1) refuseOption('typical_p', 'locally typical sampling is not supported (use 1)');
  if (o.tfs_z != null && o.tfs_z !== 1) refuseOption('tfs_z', 'tail-free sampling is not supported (use 1)');
  if (o.num_ctx != null && o.num_ctx > maxModelLen) {
    refuseOption('num_ctx', `${o.num_ctx} exceeds this server's context length ${maxModelLen} (set with --max-model-len)`);
  }
}

/**
 * Ollama `options` (+ logprobs) -> SamplingParams with Ollama's defaults; num_predict <= 0 = until the context is
 * full. repeat_penalty (default 1.1) looks at the last repeat_last_n (default 64) tokens of prompt + output,
 * -1 = the whole context; 0 turns every penalty off (llama.cpp's rule). presence / frequency penalties count
 * the output tokens (OpenAI semantics).
 */
export function ollamaSampling(options: OllamaOptions | null | undefined, maxModelLen: number, logprobs: number | null,
  format?: OllamaBody['format']): SamplingParams {
  const o = options ?? {};
  const lastN = o.repeat_last_n ?? OLLAMA_DEFAULTS.repeat_last_n;
  const penaltyOff = lastN === 0;
  refuseOptions(o, maxModelLen);
  const input: Record<string, unknown> = {
    temperature: o.temperature ?? OLLAMA_DEFAULTS.temperature,
    top_k: o.top_k ?? OLLAMA_DEFAULTS.top_k,
    top_p: o.top_p ?? OLLAMA_DEFAULTS.top_p,
    min_p: o.min_p,
    repeat_penalty: penaltyOff ? null : o.repeat_penalty ?? OLLAMA_DEFAULTS.repeat_penalty,
    repeat_last_n: lastN,
    presence_penalty: penaltyOff ? null : o.presence_penalty,
    frequency_penalty: penaltyOff ? null : o.frequency_penalty,
    max_tokens: o.num_predict != null && o.num_predict > 0 ? o.num_predict : null,
    seed: o.seed != null && o.seed >= 0 ? o.seed : null, // Ollama: -1 = random
    stop: o.stop,
    ignore_eos: o.ignore_eos,
    logprobs,
    format: format === '' ? null : format, // structured outputs: "json" or a JSON Schema
  };
  try {
    return normalizeSamplingParams(input, { defaultMaxTokens: null });
  } catch (e) {
    if (!(e instanceof SamplingParamsError)) throw e;
    if (e.param === 'format') throw badRequest(e.message, 'format');
    const name = e.param === 'max_tokens' ? 'num_predict' : e.param;
    throw badRequest(`options.${e.message.replace(/^max_tokens/, 'num_predict')}`, `options.${name}`);
  }
}

/** Ollama's logprobs: `[{ token, logprob, bytes, top_logprobs? }]`, one per generated token. */
function ollamaLogprobs(d: Pick<RequestDelta, 'logprobs'>, tokenizer: Tokenizer): unknown[] {
  return chatLogprobs(d.logprobs, tokenizer).content.map((lp) => (lp.top_logprobs.length > 0 ? lp : { token: lp.token, logprob: lp.logprob, bytes: lp.bytes }));
}

const ns = (ms: number): number => Math.max(0, Math.round(ms * 1e6));

/** Ollama's metrics of one request, in nanoseconds; times are performance.now() milliseconds. Prompt evaluation and
 * generation are the engine's prefill and decode phases (llama.cpp's prompt and generation timings, which Ollama
 * reports), or where the engine gave none (a failed request) the server's view: admission to first token, first
 * token to the end. */
function durations(job: Job, r: JobRequest, requestStart: number, loaded: number, generated: number): Record<string, number> {
  const end = r.finishedAt ?? performance.now();
  const first = r.firstTokenAt ?? end;
  const prefillMs = r.phases.prefillSeconds !== undefined ? r.phases.prefillSeconds * 1000 : first - job.started;
  const decodeMs = r.phases.decodeSeconds !== undefined ? r.phases.decodeSeconds * 1000 : end - first;
  return {
    total_duration: ns(end - requestStart),
    load_duration: ns(loaded - requestStart),
    prompt_eval_count: job.promptTokens[0],
    prompt_eval_duration: ns(prefillMs),
    eval_count: generated,
    eval_duration: ns(decodeMs),
  };
}

/** How a route shapes its pieces: generate `{ response }`, chat `{ message: { role, content } }`. */
export interface OllamaShape {
  piece(text: string): Record<string, unknown>;
  /** A piece of reasoning: generate `{ response: '', thinking }`, chat `{ message: { role, content: '', thinking } }`. */
  thinking(text: string): Record<string, unknown>;
  /** Extra fields of the final object (generate: `context`, the prompt and output token ids). */
  final(outputIds: number[]): Record<string, unknown>;
}

/** Ollama's tool calls: `[{ function: { name, arguments: {...} } }]` (arguments as an object). */
function ollamaToolCalls(calls: ParsedToolCall[]): unknown[] {
  return calls.map((c) => ({ function: { name: c.name, arguments: JSON.parse(c.arguments) as unknown } }));
}

export interface OllamaRun {
  /** Chat with tools: the parser that splits the output into content and tool calls. */
  toolParser?: ToolCallParser | null;
  /** A reasoning model's request: its reasoning goes to `thinking`, the rest is the answer. */
  reasoning?: RequestReasoning | null;
  model: string; // as the client named it
  stream: boolean;
  wantLogprobs: boolean;
  tokenizer: Tokenizer;
  requestStart: number; // performance.now() ms at the handler's start
  loaded: number; // performance.now() ms once the model was ready
}

/** Runs the Job's one request and answers in Ollama's shape (NDJSON stream, or one JSON object). */
export async function answerOllama(reply: FastifyReply, job: Job, shape: OllamaShape, run: OllamaRun): Promise<unknown> {
  const r = job.requests[0];
  const head = (): Record<string, unknown> => ({ model: run.model, created_at: new Date().toISOString() });
  const done = (text: string, ids: number[], reason: string, logprobs: unknown[] | null): Record<string, unknown> => ({
    ...head(), ...shape.piece(text), done: true, done_reason: reason, ...shape.final(ids),
    ...durations(job, r, run.requestStart, run.loaded, ids.length), ...(logprobs ? { logprobs } : {}),
  });
  const parser = run.toolParser ?? null;
  const reasoning = run.reasoning ?? null;
  if (!run.stream) {
    const [result] = await job.results();
    const logprobs = run.wantLogprobs ? ollamaLogprobs(result, run.tokenizer) : null;
    const split = reasoning ? splitReasoning(reasoning.parser, reasoning.start, result.text) : null;
    const parsed = parser ? parser.parse(split ? split.content : result.text) : { content: split ? split.content : result.text, toolCalls: [] };
    let answer = done(parsed.content, result.tokenIds, result.finishReason, logprobs);
    if (split?.reasoning) answer = withThinking(answer, shape.thinking(split.reasoning));
    if (parsed.toolCalls.length > 0) (answer.message as Record<string, unknown>).tool_calls = ollamaToolCalls(parsed.toolCalls);
    return answer;
  }
  const out = new SseStream(reply, { contentType: 'application/x-ndjson', keepAlive: false });
  const ids: number[] = [];
  const output = new OutputSplitter(reasoning, parser);
  const calls: { name: string; args: string }[] = [];
  /** The chunks of some output events: thinking and answer text (calls are gathered for the last chunk). */
  const pieces = (events: OutputEvent[]): Record<string, unknown>[] => {
    const out: Record<string, unknown>[] = [];
    for (const e of events) {
      if (e.type === 'reasoning') out.push(shape.thinking(e.text));
      else if (e.type === 'content') out.push(shape.piece(e.text));
      else if (e.type === 'tool_call') calls[e.index] = { name: e.name, args: '' };
      else calls[e.index].args += e.fragment;
    }
    return out;
  };
  try {
    for await (const d of job.deltas(r)) {
      ids.push(...d.tokenIds);
      const lines = pieces(output.push(d.text));
      const lp = run.wantLogprobs && d.tokenIds.length > 0 ? { logprobs: ollamaLogprobs(d, run.tokenizer) } : null;
      if (lines.length === 0 && lp) lines.push(shape.piece(''));
      lines.forEach((piece, i) => out.line({ ...head(), ...piece, done: false, ...(i === 0 && lp ? lp : {}) }));
      if (d.finishReason !== null) {
        for (const piece of pieces(output.finish())) out.line({ ...head(), ...piece, done: false });
        if (calls.length > 0) {  // the whole calls, in one chunk before the final object (a call is never half-sent)
          const piece = shape.piece('');
          (piece.message as Record<string, unknown>).tool_calls = ollamaToolCalls(calls.map((c) => ({ name: c.name, arguments: c.args })));
          out.line({ ...head(), ...piece, done: false });
        }
        out.line(done('', ids, d.finishReason, null));
      }
    }
  } catch (e) {
    job.abort();
    out.line({ error: toApiError(e).message });
  }
  out.end(false);
  return undefined;
}

/** The final object with the reasoning added where Ollama puts it: chat `message.thinking`, generate `thinking`
 * after `response`. */
function withThinking(answer: Record<string, unknown>, thinking: Record<string, unknown>): Record<string, unknown> {
  if (answer.message) return { ...answer, message: { ...(answer.message as object), thinking: (thinking.message as Record<string, unknown>).thinking } };
  return Object.fromEntries(Object.entries(answer).flatMap(([k, v]) => (k === 'response' ? [[k, v], ['thinking', thinking.thinking]] : [[k, v]])));
}

/** An Ollama `images` entry (base64 bytes, or a data URL as some clients send) as an image URL. */
export function ollamaImageUrl(image: string): string {
  return image.startsWith('data:') ? image : `data:application/octet-stream;base64,${image}`;
}
