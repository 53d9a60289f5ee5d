// Ollama's model management routes (runner mode, `spindle serve --ollama`): POST /api/pull (pull.ts), POST
// /api/create (create.ts), DELETE /api/delete { model } (the name, and the blobs no other name uses; an engine
// whose file went with it is unloaded once idle), POST /api/copy { source, destination } (a new name, blobs shared).
// In single-model mode these routes answer 404 saying they need runner mode: the one served model is not the store.
// Invariants: an unknown name is a 404 (`model 'x' not found`, as Ollama); an invalid name or a file path is a 400;
// the store is only changed by whole-manifest writes (lib/models/store.ts).
import { existsSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { ModelRefError, parseModelRef } from '../../../models/ref.js';
import { localKey, ReadOnlyModelError, type ModelStore } from '../../../models/store.js';
import { ApiError, badRequest } from '../../api-error.js';
import { keysOf, lookupStoreModel } from '../../store-catalog.js';
import { registerCreate } from './create.js';
import { registerPull } from './pull.js';
import { ollamaCopySchema, ollamaDeleteSchema } from './schemas.js';

function nameOf(body: { model?: string; name?: string }): string {
  const name = body.model || body.name;
  if (!name) throw new ApiError(400, 'model is required', { param: 'model', code: 'missing_required_parameter' });
  return name;
}

/** The store a model management route works on, or (single-model mode) the 404 saying it needs runner mode. */
export function runnerStore(app: FastifyInstance, route: string): ModelStore {
  if (!app.store) {
    throw new ApiError(404, `${route}: model management needs runner mode (spindle serve --ollama); this server serves one model`,
      { code: 'not_found' });
  }
  return app.store;
}

export default async function ollamaManageRoute(app: FastifyInstance): Promise<void> {
  const runnerOnly = (route: string): ModelStore => runnerStore(app, route);
  registerPull(app, runnerOnly);
  registerCreate(app, runnerOnly);

  app.delete('/api/delete', { schema: { body: ollamaDeleteSchema } }, async (request) => {
    const store = runnerOnly('/api/delete');
    const name = nameOf(request.body as { model?: string; name?: string });
    const key = keysOf(name).find((k) => store.read(k) !== null);
    if (!key) throw new ApiError(404, `model '${name}' not found`, { param: 'model', code: 'model_not_found' });
    try {
      store.remove(key);
    } catch (e) {
      if (e instanceof ReadOnlyModelError) throw new ApiError(400, e.message, { param: 'model', code: 'read_only_model' });
      throw e;
    }
    void app.runner?.forgetMissing(existsSync); // unloads (once its requests finish) an engine whose file is gone
    return {};
  });

  app.post('/api/copy', { schema: { body: ollamaCopySchema } }, async (request) => {
    const store = runnerOnly('/api/copy');
    const { source, destination } = request.body as { source: string; destination: string };
    const from = lookupStoreModel(store, source, 'source');
    if (!from) throw new ApiError(404, `model '${source}' not found`, { param: 'source', code: 'model_not_found' });
    let dst;
    try {
      dst = parseModelRef(destination);
    } catch (e) {
      if (e instanceof ModelRefError) throw badRequest(`destination: ${e.message}`, 'destination');
      throw e;
    }
    if (dst.kind !== 'name') throw badRequest(`destination: '${destination}' is not a valid model name (<name>[:<tag>] or <namespace>/<name>[:<tag>])`, 'destination');
    const name = `${dst.namespace ? `${dst.namespace}/` : ''}${dst.name}:${dst.tag}`;
    const { external: _external, ...copied } = from.manifest; // a copy is the store's own, even of Ollama's model
    store.write(localKey(dst.namespace, dst.name, dst.tag), { ...copied, name, createdAt: new Date().toISOString() });
    return {};
  });
}
