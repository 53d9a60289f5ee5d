// What the Ollama routes say about a model file without loading it: its GGUF header facts (readModelFileInfo),
// its size and modification time, and Ollama's `details` object (format, family, parameter_size,
// quantization_level).
// Invariant: a file's header (and, when asked, its tokenizer) is read once per (path, size, mtime), never its
// weights; the cache is bounded.
import { statSync } from 'node:fs';
import { readModelFileInfo, type ModelFileInfo } from '../gguf/file-info.js';
import { loadNative, type NativeModelInfo } from '../native.js';

/** llama_ftype -> Ollama's quantization_level spelling. */
const QUANT_LEVELS: Record<number, string> = {
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 10: 'Q2_K', 11: 'Q3_K_S', 12: 'Q3_K_M',
  13: 'Q3_K_L', 14: 'Q4_K_S', 15: 'Q4_K_M', 16: 'Q5_K_S', 17: 'Q5_K_M', 18: 'Q6_K', 32: 'BF16',
};

/**
 * What a loaded model can do, in Ollama's capability names (/api/show; the /v1/models cards carry them too, for
 * the web UI): 'completion' always, 'vision' with a vision projector loaded, 'tools' when the chat template takes
 * a tool list (Ollama's test: the template uses its tools); as Ollama, 'embedding' instead of 'completion' when
 * the file has a pooling type (an embedding model; every model still answers both kinds of routes here);
 * 'thinking' for a reasoning model (a reasoning parser, given or detected from the chat template).
 */
export function modelCapabilities(info: Pick<NativeModelInfo, 'mmproj' | 'chatTemplate'> & Partial<Pick<NativeModelInfo, 'pooling'>>,
  thinking = false): string[] {
  const embedding = info.pooling != null;
  return [embedding ? 'embedding' : 'completion', ...(info.mmproj ? ['vision'] : []),
    ...(info.chatTemplate && /\btools\b/.test(info.chatTemplate) ? ['tools'] : []), ...(thinking ? ['thinking'] : [])];
}

/** Ollama's format.HumanNumber: 8030261248 -> '8.0B', 494032768 -> '494.03M'. */
export function humanNumber(n: number): string {
  const scaled = (unit: number, suffix: string, decimals: number): string => {
    const v = n / unit;
    return Number.isInteger(v) ? `${v}${suffix}` : `${v.toFixed(decimals)}${suffix}`;
  };
  if (n >= 1e9) return scaled(1e9, 'B', 1);
  if (n >= 1e6) return scaled(1e6, 'M', 2);
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`;
  return String(n);
}

/** Ollama's `details` of a model file. */
export function ollamaDetails(f: ModelFileInfo): Record<string, unknown> {
  return {
    parent_model: '', format: 'gguf', family: f.arch, families: [f.arch],
    parameter_size: humanNumber(f.nParams),
    quantization_level: f.fileType === null ? 'unknown' : QUANT_LEVELS[f.fileType & ~1024] ?? f.fileTypeName ?? 'unknown',
  };
}

export interface FileFacts {
  info: ModelFileInfo;
  size: number; // bytes
  modifiedAt: Date; // the file's mtime
  /** The tokenizer side (vocabulary size, special tokens, chat template), read by the addon on first use. */
  model(): NativeModelInfo;
}

const cache = new Map<string, FileFacts>(); // `${path}\0${size}\0${mtimeMs}` -> facts
const CACHE_LIMIT = 256;

/** The header facts of a GGUF file (throws a ModelFileError / ENOENT naming the file when it cannot be read). */
export function fileFacts(path: string): FileFacts {
  const st = statSync(path);
  const key = `${path}\0${st.size}\0${st.mtimeMs}`;
  let f = cache.get(key);
  if (!f) {
    let native: NativeModelInfo | undefined;
    const info = readModelFileInfo(path);
    f = {
      info, size: info.fileBytes, modifiedAt: st.mtime,  // a split model: every file's bytes
      model: () => (native ??= loadNative().NativeEngine.inspect(path).info),
    };
    if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
    cache.set(key, f);
  }
  return f;
}
