// Ollama's clients post JSON whatever the content type says: its documented `curl http://localhost:11434/api/...
// -d '{...}'` sends application/x-www-form-urlencoded. Under /api/ such a body (and a text/plain one) is parsed as
// JSON with Fastify's own JSON parser (same limits, same prototype-poisoning refusal); elsewhere a text/plain body
// stays a string and a form body is refused with 415, as before.
// Invariant: a body that is not JSON is a 400 (invalid JSON), never a 500.
import type { FastifyInstance } from 'fastify';
import { sharedPlugin } from '../plugin.js';

export const ollamaBodyPlugin = sharedPlugin(async (app: FastifyInstance) => {
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser(['application/x-www-form-urlencoded', 'text/plain'], { parseAs: 'string' }, (request, body, done) => {
    if (request.url.startsWith('/api/')) return json(request, body as string, done);
    if ((request.headers['content-type'] ?? '').startsWith('text/plain')) return done(null, body);
    const e = Object.assign(new Error(`Unsupported Media Type: ${request.headers['content-type']}`), { statusCode: 415, code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' });
    return done(e, undefined);
  });
}, 'spindle-ollama-body');
