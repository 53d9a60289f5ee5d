// CORS, off unless --cors-origins lists origins ('*' allows any; an entry with * elsewhere is a pattern, each *
// standing for any run of characters, as Ollama's OLLAMA_ORIGINS: 'http://localhost:*', 'chrome-extension://*').
// Preflight OPTIONS requests from an allowed origin are answered 204 before auth (browsers send them without
// credentials).
// Invariant: no CORS header is ever sent for an origin that is not allowed.
import type { FastifyInstance } from 'fastify';
import { sharedPlugin } from '../plugin.js';

export const corsPlugin = sharedPlugin<{ origins: string[] }>(async (app: FastifyInstance, opts) => {
  if (opts.origins.length === 0) return;
  const any = opts.origins.includes('*');
  const allowed = new Set(opts.origins.filter((o) => !o.includes('*')));
  const patterns = opts.origins.filter((o) => o !== '*' && o.includes('*'))
    .map((o) => new RegExp(`^${o.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\/]/g, '\\$&')).join('.*')}$`, 'i'));
  app.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin;
    if (typeof origin !== 'string' || !(any || allowed.has(origin) || patterns.some((p) => p.test(origin)))) return;
    reply.header('access-control-allow-origin', any ? '*' : origin);
    reply.header('vary', 'Origin');
    if (request.method === 'OPTIONS') {
      reply.header('access-control-allow-methods', 'GET, POST, OPTIONS');
      reply.header('access-control-allow-headers', request.headers['access-control-request-headers'] ?? 'authorization, content-type');
      reply.header('access-control-max-age', '600');
      return reply.code(204).send();
    }
  });
  // Preflight requests need a route to reach the hook above.
  app.options('*', async (_request, reply) => reply.code(204).send());
}, 'spindle-cors');
