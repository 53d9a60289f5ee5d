// Files already in the Hugging Face cache (huggingface_hub's layout: <cache>/models--<org>--<repo>/refs/main holds
// the commit, snapshots/<commit>/<path> the files), found without any network request. The cache directory is
// HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
// Invariant: returns null (never throws) when the repository, the commit or the wanted file is not there.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { HubFile } from './hub-client.js';
import { selectFiles } from './hub-select.js';

export function hfCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  return join(env.HF_HOME || join(homedir(), '.cache', 'huggingface'), 'hub');
}

function walk(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...walk(join(dir, e.name), rel));
    else out.push(rel);
  }
  return out;
}

type CachedFile = HubFile & { abs: string };

/** The files of `repo`'s model in the cache (a split model's every file, side by side in its snapshot), or null. */
export function findInHfCache(repo: string, quant: string | null, env: NodeJS.ProcessEnv = process.env): { model: CachedFile; parts: CachedFile[]; mmproj: CachedFile | null; commit: string } | null {
  try {
    const base = join(hfCacheDir(env), `models--${repo.replace('/', '--')}`);
    const refMain = join(base, 'refs', 'main');
    const snapshots = join(base, 'snapshots');
    const commits = existsSync(refMain) ? [readFileSync(refMain, 'utf8').trim()]
      : readdirSync(snapshots).sort((a, b) => statSync(join(snapshots, b)).mtimeMs - statSync(join(snapshots, a)).mtimeMs);
    for (const commit of commits) {
      const dir = join(snapshots, commit);
      if (!existsSync(dir)) continue;
      const files: HubFile[] = walk(dir).filter((p) => /\.gguf$/i.test(p)).map((p) => ({ path: p, size: statSync(join(dir, p)).size, sha256: null }));
      let picked;
      try {
        picked = selectFiles(repo, files, quant);
      } catch {
        continue;
      }
      const abs = (f: HubFile) => ({ ...f, abs: join(dir, f.path) });
      return { model: abs(picked.model), parts: picked.parts.map(abs), mmproj: picked.mmproj ? abs(picked.mmproj) : null, commit };
    }
  } catch {
    // no cache, or not this repository
  }
  return null;
}
