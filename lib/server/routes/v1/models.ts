// GET /v1/models and /v1/models/:model: the served model, in OpenAI's list shape plus vLLM's max_model_len and
// the device it runs on ('cpu' or 'cuda').
// Invariant: the built-in demo model says that its weights are random (random_weights, description).
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../api-error.js';
import type { ServerEngine } from '../../plugins/engine.js';

async function modelCard(engine: ServerEngine, id: string): Promise<Record<string, unknown>> {
  const { info } = await engine.ready();
  const card: Record<string, unknown> = {
    id, object: 'model', created: engine.created, owned_by: 'spindle', root: engine.modelName, parent: null,
    max_model_len: info.maxModelLen, device: info.device,
  };
  if (engine.randomWeights) {
    card.random_weights = true;
    card.description = 'built-in demo model: random weights (its output is fluent-looking nonsense); pass a .gguf file for real answers';
  }
  return card;
}

export default async function modelsRoute(app: FastifyInstance): Promise<void> {
  app.get('/v1/models', async () => ({
    object: 'list',
    data: await Promise.all(app.engine.servedModelNames.map((name) => modelCard(app.engine, name))),
  }));
  app.get<{ Params: { model: string } }>('/v1/models/:model', async (request) => {
    const name = request.params.model;
    if (!app.engine.servedModelNames.includes(name)) {
      throw new ApiError(404, `the model '${name}' does not exist`, { param: 'model', code: 'model_not_found' });
    }
    return modelCard(app.engine, name);
  });
}
