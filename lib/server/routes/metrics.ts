// GET /metrics: the app's Prometheus registry (lib/server/plugins/metrics.ts) in the text exposition format.
// Needs the API key when one is set, as vLLM does (auth plugin).
import type { FastifyInstance } from 'fastify';

export default async function metricsRoute(app: FastifyInstance): Promise<void> {
  app.get('/metrics', async (_request, reply) => {
    const text = await app.metrics.registry.metrics();
    return reply.type(app.metrics.registry.contentType).send(text);
  });
}
