// Request ids: each request gets one, taken from the client's `X-Request-Id` header when it is a plain token
// (letters, digits and `-_.:@`, at most 128 characters, as proxies and platforms send) or else a fresh UUID. The id
// is the `reqId` of the request's log lines (--log-format json) and comes back in the `x-request-id` response header.
// Invariant: nothing a client sends reaches a header or a log line unless it matches the token pattern.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const TOKEN = /^[A-Za-z0-9_.:@-]{1,128}$/;

export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && TOKEN.test(given) ? given : randomUUID();
}
