// The error plugin: every error leaves as `{ error: { message, type, param, code } }` (Ollama routes under
// /api/: `{ error: message }`, as Ollama answers). Fastify's own errors (bad JSON, body too large, schema
// validation, unsupported content type) are mapped to their 4xx.
// Invariant: a client mistake is never a 500; a 5xx keeps its message but is logged.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, toApiError } from '../api-error.js';
import { sharedPlugin } from '../plugin.js';

interface ValidationItem {
  instancePath?: string;
  keyword?: string;
  params?: Record<string, unknown>;
  message?: string;
}

/** `/messages/0/role` -> `messages[0].role`; a missing property names the property. */
function paramOf(v: ValidationItem): string | null {
  const parts = (v.instancePath ?? '').split('/').filter(Boolean);
  if (v.keyword === 'required' && typeof v.params?.missingProperty === 'string') parts.push(v.params.missingProperty);
  if (v.keyword === 'additionalProperties' && typeof v.params?.additionalProperty === 'string') parts.push(v.params.additionalProperty);
  if (parts.length === 0) return null;
  return parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

function validationError(e: FastifyError): ApiError {
  const v = (e.validation?.[0] ?? {}) as ValidationItem;
  const param = paramOf(v);
  let message = `${param ?? 'the request body'} ${v.message ?? 'is invalid'}`;
  if (v.keyword === 'additionalProperties') message = `${param} is not a supported field here`;
  if (v.keyword === 'required') message = `${param} is required`;
  if (v.keyword === 'type') {
    const types = ([] as unknown[]).concat(v.params?.type ?? []).filter((t) => t !== 'null');
    message = `${param ?? 'the request body'} must be ${types.map((t) => (t === 'object' || t === 'array' || t === 'integer' ? `an ${t}` : `a ${String(t)}`)).join(' or ')}`;
  }
  return new ApiError(400, message, { param, code: v.keyword === 'required' ? 'missing_required_parameter' : 'invalid_value' });
}

/** Fastify framework errors (by code) to their 4xx. */
function frameworkError(e: FastifyError): ApiError | null {
  if (e.validation) return validationError(e);
  switch (e.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(400, `invalid JSON body: ${e.message}`, { code: 'invalid_json' });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, e.message, { code: 'request_too_large' });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError(e.statusCode === 415 ? 415 : 400, e.message, { code: 'invalid_content_type' });
  }
  if (e instanceof SyntaxError) return new ApiError(400, `invalid JSON body: ${e.message}`, { code: 'invalid_json' });
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new ApiError(e.statusCode, e.message, { code: e.code ?? null });
  }
  return null;
}

export function sendError(request: FastifyRequest, reply: FastifyReply, err: ApiError): FastifyReply {
  reply.code(err.statusCode).headers(err.headers);
  if (request.url.startsWith('/api/')) return reply.send({ error: err.message });
  return reply.send(err.toBody());
}

export const errorsPlugin = sharedPlugin(async (app: FastifyInstance) => {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const err = error instanceof ApiError ? error : frameworkError(error) ?? toApiError(error);
    if (err.statusCode >= 500) request.log.error({ err: error }, 'request failed');
    return sendError(request, reply, err);
  });
  app.setNotFoundHandler((request, reply) => {
    const err = new ApiError(404, `no route ${request.method} ${request.url.split('?')[0]}`, { code: 'not_found' });
    return sendError(request, reply, err);
  });
}, 'spindle-errors');
