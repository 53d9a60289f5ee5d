// The one error type every route throws: an HTTP status and the OpenAI error body fields.
// Invariant: anything the client got wrong is a 4xx ApiError; toBody() is exactly
// `{ error: { message, type, param, code } }`. Errors from the normalizer, the chat template and the native
// submit (which validates what the client sent) become 400s here.
import { ChatTemplateError } from '../chat/template.js';
import { EmbeddingInputError } from '../embeddings.js';
import { SamplingParamsError } from '../sampling-params.js';
import { ImageInputError } from '../vision/image-input.js';

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  404: 'not_found_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'internal_server_error',
  503: 'service_unavailable',
};

export class ApiError extends Error {
  readonly statusCode: number;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;
  readonly headers: Record<string, string>;

  constructor(statusCode: number, message: string,
    opts: { param?: string | null; code?: string | null; type?: string; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = 'ApiError';
    this.statusCode = statusCode;
    this.type = opts.type ?? TYPES[statusCode] ?? (statusCode < 500 ? 'invalid_request_error' : 'internal_server_error');
    this.param = opts.param ?? null;
    this.code = opts.code ?? null;
    this.headers = opts.headers ?? {};
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export function badRequest(message: string, param: string | null = null, code: string | null = null): ApiError {
  return new ApiError(400, message, { param, code });
}

/** Maps what request handling can throw to an ApiError (unknown errors stay 500s and keep their message). */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof SamplingParamsError) return badRequest(e.message, e.param);
  if (e instanceof EmbeddingInputError) return badRequest(e.message, e.param);
  if (e instanceof ChatTemplateError) return badRequest(e.message, 'messages');
  if (e instanceof ImageInputError) return badRequest(e.message, 'messages', e.code);
  const err = e instanceof Error ? e : new Error(String(e));
  return new ApiError(500, err.message);
}
