// GET /v1/models and /v1/models/:model: the served model, in OpenAI's list shape plus vLLM's max_model_len, the
// device it runs on ('cpu' or 'cuda') and Ollama's capability names ('completion', 'vision', 'tools', 'thinking').
// LoRA adapters (--lora-modules) are listed after the model, with their path as root and the model as parent.
// Runner mode: the store's models (Ollama's card: id, object, created, owned_by), loaded or not.
// Invariant: the built-in demo model says that its weights are random (random_weights, description).
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../api-error.js';
import { reasoningParserOf } from '../../reasoning.js';
import { modelCapabilities } from '../../model-facts.js';
import type { ServerEngine } from '../../plugins/engine.js';
import { lookupStoreModel } from '../../store-catalog.js';
import { storeModelCards } from '../ollama/store-models.js';

async function modelCard(engine: ServerEngine, id: string): Promise<Record<string, unknown>> {
  const { info } = await engine.ready();
  const card: Record<string, unknown> = {
    id, object: 'model', created: engine.created, owned_by: 'spindle', root: engine.modelName, parent: null,
    max_model_len: info.maxModelLen, device: info.device, capabilities: modelCapabilities(info, reasoningParserOf(engine, info.chatTemplate) !== null),
  };
  if (engine.randomWeights) {
    card.random_weights = true;
    card.description = 'built-in demo model: random weights (its output is fluent-looking nonsense); pass a .gguf file for real answers';
  }
  return card;
}

// A LoRA adapter's card, as vLLM lists one: its path as root, the served model as parent.
async function adapterCard(engine: ServerEngine, name: string): Promise<Record<string, unknown>> {
  const module = engine.core.loraModules.find((m) => m.name === name)!;
  return { ...await modelCard(engine, name), root: module.path, parent: engine.modelName };
}

export default async function modelsRoute(app: FastifyInstance): Promise<void> {
  app.get('/v1/models', async () => ({
    object: 'list',
    data: app.store ? storeModelCards(app.store)
      : await Promise.all([
        ...app.engine.servedModelNames.map((name) => modelCard(app.engine, name)),
        ...app.engine.core.loraModules.map((m) => adapterCard(app.engine, m.name)),
      ]),
  }));
  // '*': store names may hold slashes (hf.co/org/repo:Q4_K_M, namespace/name)
  app.get<{ Params: { '*': string } }>('/v1/models/*', async (request) => {
    const name = request.params['*'];
    if (app.store) {
      const m = lookupStoreModel(app.store, name);
      const card = m && storeModelCards(app.store).find((c) => c.id === m.name);
      if (card) return { ...card, id: name };
      throw new ApiError(404, `the model '${name}' does not exist`, { param: 'model', code: 'model_not_found' });
    }
    if (app.engine.loraFor(name) !== null) return adapterCard(app.engine, name);
    if (!app.engine.servedModelNames.includes(name)) {
      throw new ApiError(404, `the model '${name}' does not exist`, { param: 'model', code: 'model_not_found' });
    }
    return modelCard(app.engine, name);
  });
}
