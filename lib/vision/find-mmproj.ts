// An mmproj (vision projector GGUF) beside a model: `mmproj*.gguf` in the model's directory, as llama.cpp's
// hub downloads and Ollama-style layouts place it. Only a file that loads as an mmproj whose output width
// matches the text model's embedding width counts, so a directory shared by several models picks the right one.
// Invariant: never throws; returns null when there is no single matching candidate.
import { readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { loadNative } from '../native.js';

export interface MmprojSearch {
  path: string | null;
  candidates: string[]; // every mmproj*.gguf seen
  matching: string[]; // those that load and fit the model
}

/** textEmbd: the model's embedding width (called only when there are candidates; <= 0: not checked). */
export function findMmproj(modelPath: string, textEmbd: () => number): MmprojSearch {
  const dir = dirname(modelPath);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return { path: null, candidates: [], matching: [] };
  }
  const candidates = names.filter((n) => /^mmproj.*\.gguf$/i.test(n) && n !== basename(modelPath)).sort().map((n) => join(dir, n));
  if (candidates.length === 0) return { path: null, candidates, matching: [] };
  let width = 0;
  try {
    width = textEmbd();
  } catch {
    width = 0;
  }
  const matching = candidates.filter((p) => {
    try {
      return width <= 0 || loadNative().mmprojInfo(p).nEmbdOut === width;
    } catch {
      return false;
    }
  });
  return { path: matching.length === 1 ? matching[0] : null, candidates, matching };
}
