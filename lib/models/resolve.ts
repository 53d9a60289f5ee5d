// A model reference (ref.ts) -> the files to load: a path as it is; a store name through its manifest, else (a name
// without a slash) pulled from Ollama's registry as `ollama run` does (ollama-registry.ts); a hub reference from the
// store when pulled before, else from the Hugging Face cache (no request), else pulled (pull.ts). The one entry point
// of serve, run, LLM and Engine.
// Invariant: throws a ModelRefError / HubError / DownloadError naming the reference and the problem; never
// returns a path whose file is missing.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { hubConfig, type HubConfig } from './hub-client.js';
import type { Progress } from './download.js';
import { pullOllama, RegistryManifestError } from './ollama-registry.js';
import { pullHub } from './pull.js';
import { ModelRefError, parseModelRef, pullTargetOf } from './ref.js';
import { hubKey, localKey, userStore, type ModelStore, type Manifest } from './store.js';

export interface ResolvedModel {
  model: string; // GGUF path
  mmproj: string | null; // the vision projector the reference brings (null: none, or a plain path: auto-detect)
  adapter: string | null; // a store model's Modelfile ADAPTER (a LoRA adapter every request runs with); null: none
  name: string; // the store name, or the path
  manifest: Manifest | null;
}

export interface ResolveOptions {
  store?: ModelStore;
  hub?: HubConfig;
  env?: NodeJS.ProcessEnv;
  pull?: boolean; // default true: pull hub references that are not local yet
  onProgress?: Progress;
  signal?: AbortSignal;
}

function fromManifest(store: ModelStore, m: Manifest): ResolvedModel {
  return { model: store.modelPath(m), mmproj: m.mmproj ? store.filePath(m.mmproj) : null,
    adapter: m.adapter ? store.filePath(m.adapter) : null, name: m.name, manifest: m };
}

export async function resolveModel(ref: string, opts: ResolveOptions = {}): Promise<ResolvedModel> {
  const r = parseModelRef(ref);
  const store = opts.store ?? userStore();
  if (r.kind === 'path') {
    const path = r.path.startsWith('~/') ? homedir() + r.path.slice(1) : r.path;
    if (!existsSync(path)) throw new ModelRefError(`model file not found: ${r.path}`);
    return { model: path, mmproj: null, adapter: null, name: path, manifest: null };
  }
  if (r.kind === 'name') {
    const m = store.read(localKey(r.namespace, r.name, r.tag));
    if (m && store.complete(m)) return fromManifest(store, m);
  }
  const target = pullTargetOf(r);
  if (target.kind === 'ollama') {
    const missing = (why: string): ModelRefError =>
      new ModelRefError(`model '${ref}' is not in the store (${store.home})${why}; pull it, create it from a Modelfile, or give a .gguf path`);
    if (opts.pull === false) throw missing('');
    try {
      return fromManifest(store, await pullOllama(store, target.namespace, target.name, target.tag, { env: opts.env, onProgress: opts.onProgress, signal: opts.signal }));
    } catch (e) {
      if (e instanceof RegistryManifestError) {
        throw missing(e.code === 'not_found' ? ` nor in Ollama's registry (${e.message})` : `, and ${e.message}`);
      }
      throw e;
    }
  }
  const { repo, quant } = target;
  const pulled = store.read(hubKey(repo, quant));
  if (pulled && store.complete(pulled)) return fromManifest(store, pulled);
  if (opts.pull === false) throw new ModelRefError(`model '${ref}' has not been pulled (spindle pull ${ref})`);
  const m = await pullHub(store, repo, quant, { cfg: opts.hub ?? hubConfig(opts.env), env: opts.env, onProgress: opts.onProgress, signal: opts.signal });
  return fromManifest(store, m);
}
