// Marks a Fastify plugin as shared (what the fastify-plugin package does): its decorators and hooks apply to
// the parent scope, so routes registered beside it see them.
// Invariant: only the two well-known symbols Fastify reads are set; the function is returned unchanged.
import type { FastifyPluginAsync } from 'fastify';

export function sharedPlugin<T extends Record<string, unknown>>(fn: FastifyPluginAsync<T>, name: string): FastifyPluginAsync<T> {
  const f = fn as FastifyPluginAsync<T> & Record<symbol, unknown>;
  f[Symbol.for('skip-override')] = true;
  f[Symbol.for('fastify.display-name')] = name;
  return fn;
}
