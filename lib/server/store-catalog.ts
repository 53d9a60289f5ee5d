// The store's models as the server names them (runner mode and the management routes): a request's model name ->
// the store model (a local name before the hub pull of <org>/<repo>, as resolveModel and the CLI look them up),
// never pulled on demand, never a file path.
// Invariant: an unknown or incomplete name is a 404 with Ollama's message (`model "x" not found, try pulling it
// first`); a path or an invalid name is a 400 naming the problem; nothing here touches the network.
import { createHash } from 'node:crypto';
import { storeKeys } from '../cli/models/common.js';
import { ModelRefError, parseModelRef } from '../models/ref.js';
import { manifestFiles, type Manifest, type ManifestFile, type ModelStore, type StoreKey } from '../models/store.js';
import { ApiError } from './api-error.js';

export interface StoreModel {
  name: string; // the manifest's name: 'tiny:latest', 'hf.co/org/repo:Q4_K_M'
  key: StoreKey;
  manifest: Manifest;
  file: string; // the GGUF's path
  mmproj: string | null; // the projector's path
  adapter: string | null; // the Modelfile ADAPTER's path (a LoRA adapter every request runs with)
  size: number; // bytes of the model, its projector and its adapter
  digest: string; // 64 hex digits: the model blob's sha256 (a file of the Hugging Face cache: sha256 of its path)
}

export function notFound(name: string): ApiError {
  return new ApiError(404, `model ${JSON.stringify(name)} not found, try pulling it first`, { param: 'model', code: 'model_not_found' });
}

function digestOf(f: ManifestFile): string {
  if ('digest' in f) return f.digest.slice('sha256-'.length);
  const blob = /(?:^|[\\/])sha256-([0-9a-f]{64})$/.exec(f.path); // a blob of Ollama's store: its name is its digest
  return blob ? blob[1] : createHash('sha256').update(f.path).digest('hex');
}

export function storeModel(store: ModelStore, key: StoreKey, manifest: Manifest): StoreModel {
  return {
    name: manifest.name, key, manifest, file: store.modelPath(manifest),
    mmproj: manifest.mmproj ? store.filePath(manifest.mmproj) : null,
    adapter: manifest.adapter ? store.filePath(manifest.adapter) : null,
    size: manifestFiles(manifest).reduce((n, f) => n + f.size, 0), digest: digestOf(manifest.model),
  };
}

/** The store keys `name` may mean, or a 400 for a path or an invalid name (param: the request field). */
export function keysOf(name: string, param = 'model'): StoreKey[] {
  try {
    if (parseModelRef(name).kind === 'path') {
      throw new ApiError(400, `${param}: '${name}' is a file path; this server serves the models of its store by name ` +
        '(spindle pull / spindle create make them)', { param, code: 'invalid_value' });
    }
    return storeKeys(name);
  } catch (e) {
    if (e instanceof ModelRefError) throw new ApiError(400, `${param}: ${e.message}`, { param, code: 'invalid_value' });
    throw e;
  }
}

/** The store model a request names (the first key that holds a manifest), or null. */
export function lookupStoreModel(store: ModelStore, name: string, param = 'model'): StoreModel | null {
  for (const key of keysOf(name, param)) {
    const m = store.read(key);
    if (m) return storeModel(store, key, m);
  }
  return null;
}

/** The store model a request names, with every file present, or Ollama's 404. */
export function findStoreModel(store: ModelStore, name: string, param = 'model'): StoreModel {
  const found = lookupStoreModel(store, name, param);
  if (!found || !store.complete(found.manifest)) throw notFound(name);
  return found;
}
