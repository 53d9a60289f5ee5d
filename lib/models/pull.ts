// Pulling a hub repository's model into the store: the Hugging Face cache first (files used in place, no
// request), else the hub's file list -> the GGUF of the quantization (+ the mmproj) -> verified blobs -> the
// manifest hf.co/<org>/<repo>:<QUANT> (and :latest when no quantization was asked).
// Invariant: the manifest is written only after every file is a verified blob (or a cache file), so a failed
// pull leaves the store as it was (apart from a resumable -partial file).
import { statSync } from 'node:fs';
import { ensureBlob, type Progress } from './download.js';
import { findInHfCache } from './hf-cache.js';
import { HubError, listRepoFiles, resolveUrl, type HubConfig, type HubFile } from './hub-client.js';
import { quantOf, selectFiles } from './hub-select.js';
import { hubKey, ModelStore, type Manifest, type ManifestFile } from './store.js';

export interface PullOptions {
  cfg: HubConfig;
  env?: NodeJS.ProcessEnv;
  onProgress?: Progress;
  signal?: AbortSignal;
  freeBytes?: (dir: string) => number;
  useHfCache?: boolean; // default true
}

/** A split model's other files as the manifest holds them (absent for a whole file). */
const partsOf = (parts: ManifestFile[]): { parts?: ManifestFile[] } => (parts.length ? { parts } : {});

export async function pullHub(store: ModelStore, repo: string, quant: string | null, opts: PullOptions): Promise<Manifest> {
  const now = new Date().toISOString();
  const writeFor = (m: Manifest, q: string | null): Manifest => {
    store.write(hubKey(repo, q), m);
    const stated = quantOf(m.model.file);
    if (q === null && stated) store.write(hubKey(repo, stated), { ...m, name: `hf.co/${repo}:${stated}` });
    return m;
  };
  if (opts.useHfCache !== false) {
    const hit = findInHfCache(repo, quant, opts.env);
    if (hit) {
      const ext = (f: HubFile & { abs: string }): ManifestFile => ({ path: f.abs, size: statSync(f.abs).size, file: f.path });
      return writeFor({
        schemaVersion: 1, name: `hf.co/${repo}:${quant?.toUpperCase() ?? 'latest'}`, createdAt: now,
        source: `hf.co/${repo}@${hit.commit} (Hugging Face cache)`, model: ext(hit.model), ...partsOf(hit.parts.map(ext)),
        mmproj: hit.mmproj ? ext(hit.mmproj) : null,
      }, quant);
    }
  }
  const files = await listRepoFiles(repo, opts.cfg);
  const picked = selectFiles(repo, files, quant);
  const blob = async (f: HubFile): Promise<ManifestFile> => {
    if (!f.sha256) throw new HubError('bad_response', `hf.co/${repo}: ${f.path} has no sha256 in the hub's file list (not an LFS file), so it cannot be verified`);
    await ensureBlob(store.blobs, resolveUrl(repo, f.path, opts.cfg), f.path, f.size, f.sha256, { cfg: opts.cfg, onProgress: opts.onProgress, signal: opts.signal, freeBytes: opts.freeBytes });
    return { digest: `sha256-${f.sha256}`, size: f.size, file: f.path };
  };
  const model = await blob(picked.model);
  const parts: ManifestFile[] = [];
  for (const p of picked.parts) parts.push(await blob(p));
  const mmproj = picked.mmproj ? await blob(picked.mmproj) : null;
  return writeFor({
    schemaVersion: 1, name: `hf.co/${repo}:${quant?.toUpperCase() ?? 'latest'}`, createdAt: now,
    source: `hf.co/${repo}@${picked.model.path}`, model, ...partsOf(parts), mmproj,
  }, quant);
}
