// Which files of a hub repository a reference means: the GGUF of the asked quantization (case-insensitive,
// Q4_K_M when none is given, as llama.cpp's -hf and Ollama's hf.co pulls default), and the repository's mmproj
// when it has one (F16 preferred, as llama.cpp picks). A model split into files (llama.cpp's -00001-of-0000N.gguf
// naming) is its first file plus the others, in order (`parts`); a whole file is preferred when both exist.
// Invariant: an unknown quantization is a HubError listing the quantizations the repository has; a split model
// missing one of its files is a HubError naming it.
import { SPLIT_FILE, splitPath } from '../gguf/split.js';
import { HubError, type HubFile } from './hub-client.js';

export const DEFAULT_QUANT = 'Q4_K_M';

const QUANT = /(?:^|[-_.])((?:IQ|Q)\d[A-Z0-9_]*?|BF16|F16|F32|MXFP4(?:_MOE)?)(?=\.gguf$|-\d{5}-of-\d{5}\.gguf$)/i;

/** The quantization a GGUF file name states ('Llama-3.2-1B-Q4_K_M.gguf' -> 'Q4_K_M'), or null. */
export function quantOf(path: string): string | null {
  const name = path.split('/').pop() ?? path;
  const m = QUANT.exec(name);
  return m ? m[1].toUpperCase() : null;
}

const isMmproj = (p: string) => /(^|\/)mmproj[^/]*\.gguf$/i.test(p) || /mmproj/i.test(p.split('/').pop() ?? '');

/** The files a reference means: the model (a split model's first file), a split model's other files, the mmproj. */
export interface Selected {
  model: HubFile;
  parts: HubFile[]; // a split model's files 2..N, in order; [] for a whole file
  mmproj: HubFile | null;
}

export function selectFiles(repo: string, files: HubFile[], quant: string | null): Selected {
  const ggufs = files.filter((f) => /\.gguf$/i.test(f.path));
  const models = ggufs.filter((f) => !isMmproj(f.path));
  if (models.length === 0) throw new HubError('no_file', `hf.co/${repo} has no GGUF model files`);
  const want = (quant ?? DEFAULT_QUANT).toUpperCase();
  const matches = models.filter((f) => quantOf(f.path) === want || (f.path.split('/').pop() ?? '').toUpperCase().includes(`-${want}.GGUF`));
  const available = [...new Set(models.map((f) => quantOf(f.path)).filter((q): q is string => q !== null))].sort();
  if (matches.length === 0) {
    if (quant === null && models.length === 1) return { model: models[0], parts: [], mmproj: pickMmproj(ggufs) };
    throw new HubError('no_file', `hf.co/${repo} has no ${want} GGUF; it has: ${available.length ? available.join(', ') : models.map((f) => f.path).join(', ')}`);
  }
  const single = matches.filter((f) => !SPLIT_FILE.test(f.path));
  if (single.length === 0) return { ...splitModel(repo, matches), mmproj: pickMmproj(ggufs) };
  single.sort((a, b) => a.path.length - b.path.length || a.path.localeCompare(b.path));
  return { model: single[0], parts: [], mmproj: pickMmproj(ggufs) };
}

/** The split model among `matches` (all split files; the shortest name's set when there are several): every file. */
function splitModel(repo: string, matches: HubFile[]): { model: HubFile; parts: HubFile[] } {
  const firsts = matches.filter((f) => SPLIT_FILE.exec(f.path)?.[2] === '00001')
    .sort((a, b) => a.path.length - b.path.length || a.path.localeCompare(b.path));
  if (firsts.length === 0) throw new HubError('no_file', `hf.co/${repo}: ${matches[0].path} is a file of a split model whose first file (-00001-of-...) the repository lacks`);
  const [, prefix, , count] = SPLIT_FILE.exec(firsts[0].path)!;
  // splitPath writes `.gguf`; a repository may name its files `.GGUF`
  const byPath = new Map(matches.map((f) => [f.path.toLowerCase(), f]));
  const all = Array.from({ length: Number(count) }, (_, k) => {
    const path = splitPath(prefix, k, Number(count));
    const f = byPath.get(path.toLowerCase());
    if (!f) throw new HubError('no_file', `hf.co/${repo}: the split model ${firsts[0].path} lacks its file ${path}`);
    return f;
  });
  return { model: all[0], parts: all.slice(1) };
}

function pickMmproj(ggufs: HubFile[]): HubFile | null {
  const mm = ggufs.filter((f) => isMmproj(f.path));
  if (mm.length === 0) return null;
  return mm.find((f) => /f16/i.test(f.path)) ?? mm.sort((a, b) => a.path.localeCompare(b.path))[0];
}
