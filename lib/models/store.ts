// The local model store (SPINDLE_HOME, default ~/.spindle): manifests by name and tag under
// models/manifests/<host>/<namespace>/<name>/<tag> (JSON), content-addressed blobs under
// models/blobs/sha256-<hex>, shared by every name that uses them (Ollama's layout).
// Hosts: 'hf.co' for hub pulls (namespace = org, name = repo, tag = quantization), 'local' for names made here
// ('library' is the namespace of names without one). Keys are lower case: names and tags are case-insensitive.
// With OLLAMA_MODELS set, Ollama's own store is read beside this one (ollama-store.ts): its names the store lacks
// are listed and served in place, read-only (remove() refuses them; prune() never looks there).
// A split model's files (llama.cpp's <name>-0000k-of-0000N.gguf) are blobs like any other; modelPath() gives the
// loaders a directory of links named as the files (models/split/<hash of the files' digests>/), where they find each
// other.
// Invariants: a manifest or blob appears only complete (written to a temporary name, then renamed); a blob is
// named by the sha256 of its bytes; removing a name removes only the blobs no other manifest uses; two
// processes may read and write the store at once (the last manifest write of a name wins, whole).
import { randomBytes } from 'node:crypto';
import { createHash } from 'node:crypto';
import { copyFileSync, createReadStream, existsSync, linkSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { SPLIT_FILE, splitPath } from '../gguf/split.js';
import { files, subdirs } from './dir-entries.js';
import { listOllama, ollamaModelsDir, readOllama } from './ollama-store.js';

/** The user's store: SPINDLE_HOME, with Ollama's store beside it when OLLAMA_MODELS is set. */
export function userStore(env: NodeJS.ProcessEnv = process.env): ModelStore {
  return new ModelStore(spindleHome(env), ollamaModelsDir(env));
}

/** Every file of a manifest: the model (a split model's files in order), the mmproj, the adapter. */
export function manifestFiles(m: Manifest): ManifestFile[] {
  return [m.model, ...(m.parts ?? []), m.mmproj, m.adapter ?? null].filter((f): f is ManifestFile => f !== null);
}

/** A file of a model: a blob of the store, or (files found in the Hugging Face cache) a path used in place. */
export type ManifestFile = { digest: string; size: number; file: string } | { path: string; size: number; file: string };

export interface Manifest {
  schemaVersion: 1;
  name: string; // as shown: 'hf.co/org/repo:Q4_K_M', 'mymodel:latest'
  createdAt: string;
  source: string; // where it came from: 'hf.co/org/repo@<file>', a path, or 'FROM <ref>' of a Modelfile
  model: ManifestFile; // a split model: its first file
  parts?: ManifestFile[]; // a split model's files 2..N, in order (absent: a whole file)
  mmproj: ManifestFile | null;
  adapter?: ManifestFile | null; // a Modelfile's ADAPTER: a LoRA adapter (llama.cpp's GGUF format) every request runs with
  // Modelfile settings (create); absent: the model file's own
  template?: string | null;
  system?: string | null;
  parameters?: Record<string, number | string | string[]>;
  messages?: { role: string; content: string }[];
  license?: string[];
  external?: 'ollama'; // a model of Ollama's own store (OLLAMA_MODELS), read in place and never changed
}

export interface StoreKey {
  host: 'hf.co' | 'local';
  namespace: string;
  name: string;
  tag: string;
}

export function spindleHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.SPINDLE_HOME || join(homedir(), '.spindle');
}

export function localKey(namespace: string | null, name: string, tag: string): StoreKey {
  return { host: 'local', namespace: namespace ?? 'library', name, tag };
}

export function hubKey(repo: string, quant: string | null): StoreKey {
  const [namespace, name] = repo.split('/');
  return { host: 'hf.co', namespace, name, tag: quant ? quant.toUpperCase() : 'latest' };
}

/** remove() of a model that belongs to Ollama's store. */
export class ReadOnlyModelError extends Error {
  override name = 'ReadOnlyModelError';
}

export class ModelStore {
  readonly home: string;
  readonly blobs: string;
  readonly manifests: string;
  /** Ollama's models directory read beside the store (OLLAMA_MODELS), or null. */
  readonly ollamaModels: string | null;

  constructor(home: string = spindleHome(), ollamaModels: string | null = null) {
    this.home = home;
    this.blobs = join(home, 'models', 'blobs');
    this.manifests = join(home, 'models', 'manifests');
    this.ollamaModels = ollamaModels;
  }

  blobPath(digest: string): string {
    if (!/^sha256-[0-9a-f]{64}$/.test(digest)) throw new Error(`not a blob digest: ${digest}`);
    return join(this.blobs, digest);
  }

  /** The path of a manifest file's bytes (a blob, or the external path). */
  filePath(f: ManifestFile): string {
    return 'digest' in f ? this.blobPath(f.digest) : f.path;
  }

  /**
   * The path to load a manifest's model from: its file, or for a split model of blobs the first of the links in
   * models/split/<key>/ (key: the hash of its files' digests) named as llama.cpp's loader derives them from the first
   * (<name>-0000k-of-0000N.gguf), made here when missing, so that the loader finds the others beside it (files of the
   * Hugging Face cache sit side by side under their names already). A store it cannot write leaves the links
   * missing: the loader then names the one it cannot open.
   */
  modelPath(m: Manifest): string {
    if (!m.parts?.length || !('digest' in m.model)) return this.filePath(m.model);
    const files = [m.model, ...m.parts];
    const dir = join(this.home, 'models', 'split', splitKey(m)!);
    const first = SPLIT_FILE.exec(basename(m.model.file));
    const names = files.map((f, k) => (first ? splitPath(first[1], k, files.length) : basename(f.file)));
    try {
      mkdirSync(dir, { recursive: true });
      files.forEach((f, k) => linkTo(resolve(this.filePath(f)), join(dir, names[k])));
    } catch {
      // read-only store
    }
    return join(dir, names[0]);
  }

  #manifestPath(k: StoreKey): string {
    return join(this.manifests, k.host, k.namespace.toLowerCase(), k.name.toLowerCase(), k.tag.toLowerCase());
  }

  /** The manifest of `k`: the store's own, else (with ollamaModels) Ollama's, else null. */
  read(k: StoreKey): Manifest | null {
    return this.#readOwn(k) ?? (this.ollamaModels === null ? null : readOllama(this.ollamaModels, k));
  }

  #readOwn(k: StoreKey): Manifest | null {
    try {
      const m = JSON.parse(readFileSync(this.#manifestPath(k), 'utf8')) as Manifest;
      return m && m.schemaVersion === 1 && m.model ? m : null;
    } catch {
      return null;
    }
  }

  /** Whether every file of `m` is present (blobs complete, external paths still there). */
  complete(m: Manifest): boolean {
    return manifestFiles(m).every((f) => existsSync(this.filePath(f)));
  }

  write(k: StoreKey, m: Manifest): void {
    const path = this.#manifestPath(k);
    mkdirSync(dirname(path), { recursive: true });
    const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(m, null, 2)}\n`);
    renameSync(tmp, path);
  }

  /** Every manifest (the store's own, then Ollama's names the store lacks): its key, content and files' bytes. */
  list(): { key: StoreKey; manifest: Manifest; size: number; modifiedAt: Date }[] {
    const out: { key: StoreKey; manifest: Manifest; size: number; modifiedAt: Date }[] = [];
    const sizeOf = (m: Manifest) => manifestFiles(m).reduce((n, f) => n + f.size, 0);
    for (const host of ['hf.co', 'local'] as const) {
      for (const namespace of subdirs(join(this.manifests, host))) {
        for (const name of subdirs(join(this.manifests, host, namespace))) {
          const dir = join(this.manifests, host, namespace, name);
          for (const tag of files(dir)) {
            const key: StoreKey = { host, namespace, name, tag };
            const manifest = this.#readOwn(key);
            if (!manifest) continue;
            out.push({ key, manifest, size: sizeOf(manifest), modifiedAt: statSync(join(dir, tag)).mtime });
          }
        }
      }
    }
    if (this.ollamaModels !== null) {
      const own = new Set(out.map((e) => keyString(e.key)));
      for (const e of listOllama(this.ollamaModels)) {
        if (!own.has(keyString(e.key))) out.push({ ...e, size: sizeOf(e.manifest) });
      }
    }
    return out.sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime());
  }

  /**
   * A local file as a blob (hashed, then hard-linked into the store when it is on the same file system, else
   * copied to a temporary name and renamed). Returns its manifest entry.
   */
  async importFile(path: string, file: string): Promise<ManifestFile> {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
    const digest = `sha256-${hash.digest('hex')}`;
    const blob = this.blobPath(digest);
    const size = statSync(path).size;
    if (!existsSync(blob)) {
      mkdirSync(this.blobs, { recursive: true });
      const tmp = `${blob}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
      try {
        linkSync(path, tmp);
      } catch {
        copyFileSync(path, tmp);
      }
      renameSync(tmp, blob);
    }
    return { digest, size, file };
  }

  /**
   * The blobs some manifest names: by digest, or by path when the path is a blob of this store (Ollama's store in
   * the same directory, OLLAMA_MODELS = SPINDLE_HOME/models: its blobs are this store's too, never pruned).
   */
  #usedDigests(): Set<string> {
    const blobs = resolve(this.blobs);
    const used = new Set<string>();
    for (const { manifest } of this.list()) {
      for (const f of manifestFiles(manifest)) {
        if ('digest' in f) used.add(f.digest);
        else if (resolve(dirname(f.path)) === blobs) used.add(basename(f.path));
      }
    }
    return used;
  }

  /**
   * What Ollama's server does at start: removes the blobs no manifest uses (uploads never created into a model, a
   * model's files after a crash between its blob and its manifest) and temporary files older than `tmpAgeMs` (an
   * interrupted download or upload; newer ones may belong to one still running). Returns what went.
   */
  prune(tmpAgeMs = 24 * 3600_000): { blobs: number; bytes: number; tmp: number } {
    const out = { blobs: 0, bytes: 0, tmp: 0 };
    const used = this.#usedDigests();
    this.#pruneSplitLinks();
    let entries: string[];
    try {
      entries = readdirSync(this.blobs);
    } catch {
      return out; // no store yet
    }
    const now = Date.now();
    for (const name of entries) {
      const path = join(this.blobs, name);
      try {
        const st = statSync(path);
        if (!st.isFile()) continue;
        if (name.endsWith('.tmp')) {
          if (now - st.mtimeMs < tmpAgeMs) continue;
          rmSync(path, { force: true });
          out.tmp++;
        } else if (/^sha256-[0-9a-f]{64}$/.test(name) && !used.has(name)) {
          rmSync(path, { force: true });
          out.blobs++;
          out.bytes += st.size;
        }
      } catch {
        // gone meanwhile
      }
    }
    return out;
  }

  /** Removes a name; then every blob of it that no other manifest uses. Returns false when the name is unknown. */
  remove(k: StoreKey): boolean {
    const m = this.#readOwn(k);
    if (!m) {
      const theirs = this.ollamaModels === null ? null : readOllama(this.ollamaModels, k);
      if (theirs) {
        throw new ReadOnlyModelError(`'${theirs.name}' belongs to Ollama's store (OLLAMA_MODELS=${this.ollamaModels}), which Spindle reads without changing it; remove it with \`ollama rm\``);
      }
      return false;
    }
    rmSync(this.#manifestPath(k), { force: true });
    const used = this.#usedDigests();
    for (const f of manifestFiles(m)) {
      if ('digest' in f && !used.has(f.digest)) rmSync(this.blobPath(f.digest), { force: true });
    }
    this.#pruneSplitLinks();
    return true;
  }

  /** Removes the split models' link directories (modelPath) no manifest has any more. */
  #pruneSplitLinks(): void {
    const keys = new Set(this.list().map((e) => splitKey(e.manifest)));
    const dir = join(this.home, 'models', 'split');
    for (const name of subdirs(dir)) {
      if (!keys.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
    }
  }
}

/** A split model's link directory name (modelPath): the hash of its files' digests; null for other models. */
function splitKey(m: Manifest): string | null {
  if (!m.parts?.length) return null;
  const digests = [m.model, ...m.parts].map((f) => ('digest' in f ? f.digest : f.path));
  return `sha256-${createHash('sha256').update(digests.join('\n')).digest('hex')}`;
}

/** A symlink at `link` to `target`, replaced whole (a temporary name, then renamed) unless it is there already. */
function linkTo(target: string, link: string): void {
  try {
    if (readlinkSync(link) === target) return;
  } catch {
    // not there yet
  }
  const tmp = `${link}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  symlinkSync(target, tmp);
  renameSync(tmp, link);
}

function keyString(k: StoreKey): string {
  return [k.host, k.namespace, k.name, k.tag].join('/').toLowerCase();
}
