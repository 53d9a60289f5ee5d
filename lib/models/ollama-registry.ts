// Pulling a model by its Ollama name ('llama3.2', 'llama3.2:1b'; the callers send names with a namespace to the
// Hugging Face hub, as ref.ts reads 'org/repo') from Ollama's registry, as
// `ollama pull` does: GET <registry>/v2/<namespace>/<name>/manifests/<tag> (an OCI image manifest, namespace
// 'library' for bare names), then each layer's blob from /v2/<namespace>/<name>/blobs/sha256:<hex> (redirects
// followed): the model, projector and adapter layers become verified blobs of the store; the template, system,
// params, messages and license layers (small JSON or text, sha256-checked too) become the manifest's settings, as
// ollama-store.ts reads them from Ollama's own store. OLLAMA_REGISTRY sets the registry (a URL, or a host[:port] as
// Ollama writes them, read as https; default https://registry.ollama.ai; tests point it at a local server).
// Invariant: the manifest is written only after every layer is verified, so a failed pull leaves the store as it was
// (apart from a resumable -partial file); every failure is a HubError (not_found, network, http, bad_response) or a
// DownloadError naming the model; the failures of reading the manifest (the name unknown, the registry unreachable)
// are RegistryManifestErrors, so callers can tell them from a download's.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { ensureBlob, type Progress } from './download.js';
import { HubError, hubFetch, type HubConfig } from './hub-client.js';
import { LAYER, ollamaSettings } from './ollama-store.js';
import { localKey, ModelStore, type Manifest, type ManifestFile } from './store.js';

export interface OllamaPullOptions {
  env?: NodeJS.ProcessEnv;
  onProgress?: Progress;
  /** Called once the manifest is read: every layer about to be pulled (display name, sha256), for progress lines;
   * each gets onProgress events, a layer already in the store (or a small text one) one 'done' event. */
  onFiles?: (files: { file: string; sha256: string }[]) => void;
  signal?: AbortSignal;
  freeBytes?: (dir: string) => number;
}

/** The registry's base URL: OLLAMA_REGISTRY (https:// when it names no scheme), else Ollama's own. */
export function ollamaRegistry(env: NodeJS.ProcessEnv = process.env): string {
  const v = env.OLLAMA_REGISTRY?.trim() || 'https://registry.ollama.ai';
  return (v.includes('://') ? v : `https://${v}`).replace(/\/+$/, '');
}

/** The manifest could not be had: the name is not in the registry (not_found), or the registry is unreachable. */
export class RegistryManifestError extends HubError {}

interface Layer { mediaType: string; digest: string; size: number }

const BLOBS: Record<string, string> = { model: 'model.gguf', projector: 'mmproj.gguf', adapter: 'adapter.gguf' };

function layersOf(body: unknown, what: string): Layer[] {
  const layers = (body as { layers?: unknown } | null)?.layers;
  if (!Array.isArray(layers)) throw new HubError('bad_response', `${what}: the registry's manifest has no layers`);
  return layers.map((l: { mediaType?: unknown; digest?: unknown; size?: unknown }, i) => {
    if (typeof l?.mediaType !== 'string' || typeof l.digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(l.digest) ||
      typeof l.size !== 'number' || !Number.isSafeInteger(l.size) || l.size < 0) {
      throw new HubError('bad_response', `${what}: layer ${i} of the registry's manifest has no valid mediaType, sha256 digest and size`);
    }
    return { mediaType: l.mediaType, digest: l.digest, size: l.size };
  });
}

/** Pulls `[namespace/]name:tag` from Ollama's registry into the store; returns the manifest written. */
export async function pullOllama(store: ModelStore, namespace: string | null, name: string, tag: string,
  opts: OllamaPullOptions = {}): Promise<Manifest> {
  const base = ollamaRegistry(opts.env);
  const ns = namespace ?? 'library';
  const shown = `${ns === 'library' ? '' : `${ns}/`}${name}:${tag}`;
  const cfg: HubConfig = { endpoint: base, token: null, timeoutMs: 30_000 };
  const repo = `${base}/v2/${ns}/${name}`;
  // the request's own signal and the per-request timeout (hubFetch applies it only without a signal)
  const signal = (): AbortSignal => AbortSignal.any([AbortSignal.timeout(cfg.timeoutMs), ...(opts.signal ? [opts.signal] : [])]);
  let res: Response;
  try {
    res = await hubFetch(`${repo}/manifests/${encodeURIComponent(tag)}`, cfg, {
      headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' }, signal: signal(),
    });
  } catch (e) {
    if (e instanceof HubError) throw new RegistryManifestError(e.code, `Ollama's registry: ${e.message}`);
    throw e;
  }
  if (res.status === 404) throw new RegistryManifestError('not_found', `${shown} was not found in Ollama's registry (${new URL(base).host}); check the name and tag`);
  if (!res.ok) throw new HubError('http', `${shown}: Ollama's registry answered HTTP ${res.status}`);
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    throw new HubError('bad_response', `${shown}: the registry's manifest is not JSON`);
  }
  const layers = layersOf(body, shown);
  const of = (kind: string): Layer[] => layers.filter((l) => l.mediaType === LAYER + kind);
  if (of('model').length !== 1) throw new HubError('bad_response', `${shown}: the registry's manifest has ${of('model').length} model layers (one is needed)`);
  const hex = (l: Layer): string => l.digest.slice('sha256:'.length);
  const blobLayers = Object.keys(BLOBS).flatMap((k) => of(k).slice(0, 1).map((l) => ({ kind: k, layer: l })));
  const textLayers = [...['template', 'system', 'params', 'messages'].map((k) => of(k)[0]), ...of('license')]
    .filter((l): l is Layer => l !== undefined);
  const textName = (l: Layer): string => `${l.mediaType.slice(LAYER.length)} ${hex(l).slice(0, 12)}`;
  opts.onFiles?.([...blobLayers.map(({ kind, layer }) => ({ file: BLOBS[kind], sha256: hex(layer) })),
    ...textLayers.map((l) => ({ file: textName(l), sha256: hex(l) }))]);
  const blob = async (kind: string): Promise<ManifestFile | null> => {
    const l = of(kind)[0];
    if (!l) return null;
    const had = existsSync(store.blobPath(`sha256-${hex(l)}`));
    await ensureBlob(store.blobs, `${repo}/blobs/${l.digest}`, BLOBS[kind], l.size, hex(l),
      { cfg, onProgress: opts.onProgress, signal: opts.signal, freeBytes: opts.freeBytes });
    if (had) opts.onProgress?.({ file: BLOBS[kind], done: l.size, total: l.size, phase: 'done' });
    return { digest: `sha256-${hex(l)}`, size: l.size, file: BLOBS[kind] };
  };
  const text = async (l: Layer): Promise<string> => {
    if (l.size > 1 << 20) throw new HubError('bad_response', `${shown}: its ${l.mediaType.slice(LAYER.length)} layer is ${l.size} bytes (at most 1 MiB)`);
    const r = await hubFetch(`${repo}/blobs/${l.digest}`, cfg, { signal: signal() });
    if (!r.ok) throw new HubError('http', `${shown}: Ollama's registry answered HTTP ${r.status} for its ${l.mediaType.slice(LAYER.length)} layer`);
    const bytes = Buffer.from(await r.arrayBuffer());
    if (createHash('sha256').update(bytes).digest('hex') !== hex(l)) {
      throw new HubError('bad_response', `${shown}: its ${l.mediaType.slice(LAYER.length)} layer does not match its sha256 digest`);
    }
    opts.onProgress?.({ file: textName(l), done: l.size, total: l.size, phase: 'done' });
    return bytes.toString('utf8');
  };
  const json = async (kind: string): Promise<unknown> => {
    const l = of(kind)[0];
    if (!l) return undefined;
    try {
      return JSON.parse(await text(l));
    } catch (e) {
      if (e instanceof HubError) throw e;
      throw new HubError('bad_response', `${shown}: its ${kind} layer is not JSON`);
    }
  };
  const textOf = async (kind: string): Promise<string | null> => (of(kind)[0] ? text(of(kind)[0]) : null);
  const settings = ollamaSettings(await textOf('template'), await textOf('system'), await json('params'), await json('messages'),
    await Promise.all(of('license').map(text)));
  const model = (await blob('model'))!;
  const mmproj = await blob('projector');
  const adapter = await blob('adapter');
  const manifest: Manifest = {
    schemaVersion: 1, name: shown, createdAt: new Date().toISOString(), source: `ollama:${new URL(base).host}/${ns}/${name}:${tag}`,
    model, mmproj, ...(adapter ? { adapter } : {}), ...settings,
  };
  store.write(localKey(ns === 'library' ? null : ns, name, tag), manifest);
  return manifest;
}
