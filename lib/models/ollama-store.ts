// Ollama's own model store (OLLAMA_MODELS, e.g. ~/.ollama/models), read in place so that `spindle serve --ollama`
// serves the models `ollama pull` already downloaded: manifests/<host>/<namespace>/<name>/<tag> are OCI image
// manifests whose layers name blobs/sha256-<hex> by media type (application/vnd.ollama.image.model, .template,
// .system, .params, .messages, .license, .projector, .adapter). registry.ollama.ai names become local names
// ('llama3.2:latest', 'user/model:tag'), hf.co ones hub names ('hf.co/org/repo:Q4_K_M').
// Invariants: nothing here writes, moves or removes anything under that directory (ModelStore refuses to remove
// these names); a manifest that cannot be read, or whose model blob is missing, is skipped, never an error; names are
// matched case-insensitively, as the store's own.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { files, subdirs } from './dir-entries.js';
import type { Manifest, ManifestFile, StoreKey } from './store.js';

/** The Ollama models directory to read: OLLAMA_MODELS when set, else none (Ollama's store is read only when asked). */
export function ollamaModelsDir(env: NodeJS.ProcessEnv = process.env): string | null {
  const v = env.OLLAMA_MODELS?.trim();
  return v ? v : null;
}

/** The media type prefix of an Ollama model's layers (…model, …template, …params, …). */
export const LAYER = 'application/vnd.ollama.image.';

/** A manifest's settings from an Ollama model's text layers: params kept when a JSON object, messages when an array. */
export function ollamaSettings(template: string | null, system: string | null, params: unknown, messages: unknown,
  license: string[]): Pick<Manifest, 'template' | 'system' | 'parameters' | 'messages' | 'license'> {
  return {
    template, system,
    ...(params && typeof params === 'object' && !Array.isArray(params) ? { parameters: params as Manifest['parameters'] } : {}),
    ...(Array.isArray(messages) ? { messages: messages as Manifest['messages'] } : {}),
    ...(license.length > 0 ? { license } : {}),
  };
}
// Our key's host -> Ollama's manifest host directories (hub names pulled as hf.co/... or huggingface.co/...)
const HOSTS: Record<StoreKey['host'], readonly string[]> = { local: ['registry.ollama.ai'], 'hf.co': ['hf.co', 'huggingface.co'] };

interface OciLayer { mediaType?: unknown; digest?: unknown; size?: unknown }

/** A directory entry of `dir` equal to `name` but for case, or null. */
function entry(dir: string, name: string): string | null {
  try {
    const names = readdirSync(dir);
    return names.find((n) => n === name) ?? names.find((n) => n.toLowerCase() === name.toLowerCase()) ?? null;
  } catch {
    return null;
  }
}

/** The name Ollama shows for a manifest path's parts. */
function displayName(host: string, namespace: string, name: string, tag: string): string {
  if (host === 'hf.co' || host === 'huggingface.co') return `hf.co/${namespace}/${name}:${tag}`;
  return namespace === 'library' ? `${name}:${tag}` : `${namespace}/${name}:${tag}`;
}

/** Reads the manifest file at `path` (parts: its host, namespace, name, tag) as the store's Manifest, or null. */
function readAt(dir: string, path: string, parts: [string, string, string, string]): Manifest | null {
  let oci: { layers?: OciLayer[] };
  try {
    oci = JSON.parse(readFileSync(path, 'utf8')) as { layers?: OciLayer[] };
  } catch {
    return null;
  }
  if (!oci || !Array.isArray(oci.layers)) return null;
  const layer = (kind: string): { file: string; size: number } | null => {
    const l = oci.layers!.find((x) => x.mediaType === LAYER + kind);
    if (!l || typeof l.digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(l.digest)) return null;
    const file = join(dir, 'blobs', l.digest.replace(':', '-'));
    return { file, size: typeof l.size === 'number' ? l.size : 0 };
  };
  const text = (kind: string): string | null => {
    const l = layer(kind);
    if (!l) return null;
    try {
      return readFileSync(l.file, 'utf8');
    } catch {
      return null;
    }
  };
  const json = (kind: string): unknown => {
    const t = text(kind);
    try {
      return t === null ? null : JSON.parse(t);
    } catch {
      return null;
    }
  };
  const asFile = (l: { file: string; size: number } | null, name: string): ManifestFile | null =>
    l ? { path: l.file, size: l.size, file: name } : null;
  const modelLayer = layer('model');
  if (!modelLayer || !existsSync(modelLayer.file)) return null;
  const model = asFile(modelLayer, 'model.gguf')!;
  const params = json('params');
  const messages = json('messages');
  // every license layer (llama3.x ships two: the license and the use policy), as Ollama's /api/show joins them
  const licenses = oci.layers.filter((x) => x.mediaType === LAYER + 'license').map((x) => {
    try {
      return typeof x.digest === 'string' && /^sha256:[0-9a-f]{64}$/.test(x.digest) ? readFileSync(join(dir, 'blobs', x.digest.replace(':', '-')), 'utf8') : null;
    } catch {
      return null;
    }
  }).filter((x): x is string => x !== null);
  return {
    schemaVersion: 1,
    name: displayName(...parts),
    createdAt: statSync(path).mtime.toISOString(),
    source: `ollama:${path}`,
    external: 'ollama',
    model,
    mmproj: asFile(layer('projector'), 'mmproj.gguf'),
    adapter: asFile(layer('adapter'), 'adapter.gguf'),
    ...ollamaSettings(text('template'), text('system'), params, messages, licenses),
  };
}

/** The manifest of `k` in Ollama's store `dir`, or null. */
export function readOllama(dir: string, k: StoreKey): Manifest | null {
  for (const host of HOSTS[k.host]) {
    let at = join(dir, 'manifests');
    const parts: string[] = [];
    for (const part of [host, k.namespace, k.name, k.tag]) {
      const found = entry(at, part);
      if (found === null) break;
      at = join(at, found);
      parts.push(found);
    }
    const m = parts.length === 4 ? readAt(dir, at, parts as [string, string, string, string]) : null;
    if (m) return m;
  }
  return null;
}

/** Every readable manifest of Ollama's store `dir`, with its key (lower case, as the store's own keys). */
export function listOllama(dir: string): { key: StoreKey; manifest: Manifest; modifiedAt: Date }[] {
  const out: { key: StoreKey; manifest: Manifest; modifiedAt: Date }[] = [];
  const seen = new Set<string>(); // names differing only by case are one name: the first found
  for (const host of ['local', 'hf.co'] as const) {
    for (const hostDir of HOSTS[host]) {
      const root = join(dir, 'manifests', hostDir);
      for (const namespace of subdirs(root)) {
        for (const name of subdirs(join(root, namespace))) {
          for (const tag of files(join(root, namespace, name))) {
            const key: StoreKey = { host, namespace: namespace.toLowerCase(), name: name.toLowerCase(), tag: tag.toLowerCase() };
            const id = `${host}/${key.namespace}/${key.name}/${key.tag}`;
            if (seen.has(id)) continue;
            const path = join(root, namespace, name, tag);
            const manifest = readAt(dir, path, [hostDir, namespace, name, tag]);
            if (!manifest) continue;
            seen.add(id);
            out.push({ key, manifest, modifiedAt: new Date(manifest.createdAt) });
          }
        }
      }
    }
  }
  return out;
}
