// API-key auth (--api-key, repeatable): every route needs `Authorization: Bearer <key>` or `Authorization: Key
// <key>` except the health checks (`/health`, SGLang's `/health_generate`, as SGLang leaves them open for probes) and
// the web UI's static files (`/`, `/ui/*`: they hold no data, and the app asks the user for the key).
// Invariant: keys are compared in constant time (SHA-256 digests of equal length through timingSafeEqual,
// every configured key checked, no early exit); a missing header, a wrong scheme or a wrong key => 401.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../api-error.js';
import { sharedPlugin } from '../plugin.js';

const OPEN_PATHS = new Set(['/health', '/health_generate']);
const isUiFile = (method: string, path: string): boolean => (method === 'GET' || method === 'HEAD') && (path === '/' || path.startsWith('/ui/'));

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** True when `presented` equals one of `keys`; time does not depend on where they differ. */
export function keyMatches(presented: string, keys: readonly Buffer[]): boolean {
  const d = digest(presented);
  let ok = false;
  for (const k of keys) ok = timingSafeEqual(d, k) || ok;
  return ok;
}

function presentedKey(request: FastifyRequest): string {
  const header = request.headers.authorization;
  if (typeof header !== 'string' || header.length === 0) {
    throw new ApiError(401, 'missing API key: send `Authorization: Bearer <key>`', { code: 'invalid_api_key' });
  }
  const m = /^(Bearer|Key)\s+(\S.*)$/i.exec(header.trim());
  if (!m) throw new ApiError(401, 'the Authorization header must be `Bearer <key>` or `Key <key>`', { code: 'invalid_api_key' });
  return m[2];
}

export const authPlugin = sharedPlugin<{ apiKeys: string[] }>(async (app: FastifyInstance, opts) => {
  if (opts.apiKeys.length === 0) return;
  const keys = opts.apiKeys.map(digest);
  app.addHook('onRequest', async (request) => {
    const path = request.url.split('?')[0];
    if (OPEN_PATHS.has(path) || request.method === 'OPTIONS' || isUiFile(request.method, path)) return;
    if (!keyMatches(presentedKey(request), keys)) throw new ApiError(401, 'invalid API key', { code: 'invalid_api_key' });
  });
}, 'spindle-auth');
