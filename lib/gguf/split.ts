// Split GGUF models: llama.cpp's gguf-split writes a model as N files named <prefix>-00001-of-0000N.gguf ...
// (llama_split_path), each with split.no (0-based) and split.count, the first one holding the metadata too. A model
// is named by its first file; the others are found beside it by name, as llama.cpp and Spindle's native loader
// (native/gguf/gguf_split.cpp) find them.
// Invariant: splitSiblings returns the N paths in file order, the first being the one given, or throws a
// ModelFileError naming the problem; names follow llama_split_path exactly.
import { ModelFileError } from './model-file-error.js';

/** A split file name: prefix, 1-based number, count (5 digits each, as llama.cpp formats them; .gguf in any case). */
export const SPLIT_FILE = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** llama_split_path: the name of file `no` (0-based) of `count`. */
export function splitPath(prefix: string, no: number, count: number): string {
  return `${prefix}-${String(no + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.gguf`;
}

/**
 * The paths of the split model whose file `path` says split.no `no` and split.count `count`: every file, first to
 * last (just `path` when count is 1). Only the first file names the model: any other is an error saying which one to
 * load instead; so is a first file not named as a split.
 */
export function splitSiblings(path: string, no: number, count: number): string[] {
  if (count <= 1) return [path];
  const m = SPLIT_FILE.exec(path);
  if (no !== 0) {
    const first = m && Number(m[2]) === no + 1 && Number(m[3]) === count ? `: load the first one, ${splitPath(m[1], 0, count)}` : ': load its first file';
    throw new ModelFileError(`this is file ${no + 1} of a model split into ${count} files${first}`);
  }
  if (!m || Number(m[2]) !== 1 || Number(m[3]) !== count) {
    throw new ModelFileError(`the first file of a model split into ${count} files must be named <name>${splitPath('', 0, count)} (llama.cpp's split naming), so that its other files can be found beside it`);
  }
  return Array.from({ length: count }, (_, k) => splitPath(m[1], k, count));
}
