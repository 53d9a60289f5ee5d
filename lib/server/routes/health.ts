// GET /health: 200 when the model is loaded and the server takes requests; 503 while loading, shutting down,
// when the model failed to load, or once a forward pass has failed (the engine failed that step's requests;
// the process stays up and keeps serving, but a supervisor should replace it). Always open (no API key).
// Runner mode: 200 while the server takes requests (models load on demand), 503 once closing or after a failed
// forward pass of any engine.
import type { FastifyInstance } from 'fastify';

export default async function healthRoute(app: FastifyInstance): Promise<void> {
  app.get('/health', async (_request, reply) => {
    const engine = app.runner ?? app.engine;
    const state = engine.state;
    const failed = state === 'ready' ? engine.failedSteps : 0;
    const body: Record<string, unknown> = { status: state === 'ready' ? (failed > 0 ? 'error' : 'ok') : state };
    if (state === 'failed') body.error = engine.loadError?.message ?? 'the model failed to load';
    if (failed > 0) {
      body.error = `the engine's forward pass failed in ${failed} step${failed === 1 ? '' : 's'}; ` +
        'the requests of those steps failed with a 500 error';
    }
    return reply.code(state === 'ready' && failed === 0 ? 200 : 503).send(body);
  });
}
