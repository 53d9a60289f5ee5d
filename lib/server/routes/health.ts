// GET /health: 200 when the model is loaded and the server takes requests; 503 while loading, shutting down,
// or when the model failed to load. Always open (no API key).
import type { FastifyInstance } from 'fastify';

export default async function healthRoute(app: FastifyInstance): Promise<void> {
  app.get('/health', async (_request, reply) => {
    const state = app.engine.state;
    const body: Record<string, unknown> = { status: state === 'ready' ? 'ok' : state };
    if (state === 'failed') body.error = app.engine.loadError?.message ?? 'the model failed to load';
    return reply.code(state === 'ready' ? 200 : 503).send(body);
  });
}
