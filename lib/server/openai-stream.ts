// The streaming tail shared by /v1/chat/completions and /v1/completions: for each choice an optional opening
// chunk (chat: the role; completions: the echoed prompt), one chunk per delta that carries text (or wanted
// logprobs), one finish chunk; then the `choices: []` usage chunk when asked, then `data: [DONE]`.
// Invariants: a failure after the stream started is one `data: {"error": ...}` frame and aborts every
// request of the job; every chunk carries the same id, object, created and model; with include_usage every
// choice chunk carries `usage: null` (as OpenAI does).
import type { FastifyReply } from 'fastify';
import type { RequestDelta } from '../engine-core.js';
import { toApiError } from './api-error.js';
import { jobUsage, type Job, type JobRequest } from './generation.js';
import { SseStream } from './sse.js';

/** How one route shapes the fields of its choices (everything but index and finish_reason). */
export interface ChoiceFormat {
  object: string; // 'chat.completion.chunk' | 'text_completion'
  /** Fields of the chunk sent before a choice's first token, or null for none. */
  opening(r: JobRequest): Record<string, unknown> | null;
  /** Fields of the chunk(s) for one delta that carries text or wanted logprobs (chat with tools: zero or more). */
  content(r: JobRequest, d: RequestDelta): Record<string, unknown> | Record<string, unknown>[];
  /** Fields of the finish chunk. */
  closing(r: JobRequest): Record<string, unknown>;
  /** At a choice's end: chunks still held back (tool-call parsing) and the finish reason to report. */
  finish?(r: JobRequest, reason: string): { chunks: Record<string, unknown>[]; reason: string };
  /** Sees every delta's token ids, text or not (held-back stop text, a split UTF-8 character, the end token). */
  tokens?(r: JobRequest, tokenIds: readonly number[]): void;
  /** Extra usage.completion_tokens_details of the finished job (chat with reasoning: reasoning_tokens). */
  completionDetails?(): Record<string, number>;
}

export interface StreamHead {
  id: string;
  created: number; // unix seconds
  model: string;
}

export async function streamChoices(reply: FastifyReply, job: Job, head: StreamHead, format: ChoiceFormat,
  opts: { includeUsage: boolean; wantLogprobs: boolean }): Promise<void> {
  const sse = new SseStream(reply);
  const base = { id: head.id, object: format.object, created: head.created, model: head.model };
  const usage = opts.includeUsage ? { usage: null } : {};
  const send = (r: JobRequest, fields: Record<string, unknown>, finish: string | null): void =>
    sse.send({ ...base, choices: [{ index: r.index, ...fields, finish_reason: finish }], ...usage });
  let completion = 0; // tokens over every choice
  try {
    await Promise.all(job.requests.map(async (r) => {
      const opening = format.opening(r);
      if (opening) send(r, opening, null);
      for await (const d of job.deltas(r)) {
        completion += d.tokenIds.length;
        format.tokens?.(r, d.tokenIds);
        if (d.text.length > 0 || (opts.wantLogprobs && d.tokenIds.length > 0)) {
          const fields = format.content(r, d);
          for (const f of Array.isArray(fields) ? fields : [fields]) send(r, f, null);
        }
        if (d.finishReason !== null) {
          const end = format.finish ? format.finish(r, d.finishReason) : { chunks: [], reason: d.finishReason };
          for (const f of end.chunks) send(r, f, null);
          send(r, format.closing(r), end.reason);
        }
      }
    }));
    if (opts.includeUsage) {
      const usage = jobUsage(job, completion);
      const details = format.completionDetails?.();
      if (details) usage.completion_tokens_details = { ...usage.completion_tokens_details, ...details };
      sse.send({ ...base, choices: [], usage });
    }
  } catch (e) {
    job.abort();
    sse.send(toApiError(e).toBody());
  }
  sse.end();
}
