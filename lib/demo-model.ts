// The built-in demo model of `spindle serve` without a model argument (the README's "run it" command): a small
// Llama with the real Llama 3 tokenizer and chat template, Q8_0, random weights (fluent-looking nonsense),
// generated deterministically by the project's own GGUF writer (lib/random-model) on first use and cached.
// Q8_0 everywhere (as llama-quantize's Q8_0 file type gives these shapes) needs no K-quant search, which stays
// test tooling; the test fixtures' generator writes the same bytes for the same model (test/demo-model.test.ts).
// Invariants: the cache file name carries a hash of the spec and the generator's fingerprint, so a
// changed generator never reuses a stale file; the file appears only by rename of a complete temp file.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, unlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { GgmlType, LlamaFileType } from './gguf/constants.js';
import { denseMetadata, denseTensorPlan, type DenseSpec } from './random-model/dense.js';
import { generatorFingerprint, writeModel } from './random-model/generate.js';
import { tokenizerGguf } from './random-model/tokenizer.js';

export const DEMO_MODEL_NAME = 'spindle-demo';

/** The demo model's shape (Llama 3.2 style: GQA 8/4, head_dim 64, tied embeddings). */
export const DEMO_SPEC: DenseSpec = {
  arch: 'llama', tokenizer: 'llama3', nEmbd: 512, nLayer: 4, nHead: 8, nHeadKv: 4, nFf: 1536, headDim: 64,
  ropeFreqBase: 500000, rmsNormEps: 1e-5, contextLength: 4096, tiedEmbeddings: true, logitStd: 5,
};
const DEMO_SEED = 7;

/** Writes the demo model to `outPath`: every 2-D weight Q8_0, norms F32. */
export async function writeDemoModel(outPath: string): Promise<number> {
  const tokenizer = tokenizerGguf(DEMO_SPEC.tokenizer);
  return writeModel({
    arch: DEMO_SPEC.arch, name: DEMO_MODEL_NAME, seed: DEMO_SEED, tokenizer,
    metadata: denseMetadata(DEMO_SPEC, tokenizer.nVocab, LlamaFileType.MOSTLY_Q8_0),
    plan: denseTensorPlan(DEMO_SPEC, tokenizer.nVocab, () => GgmlType.Q8_0),
  }, outPath);
}

/** $SPINDLE_CACHE_DIR, else ~/.cache/spindle. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.SPINDLE_CACHE_DIR && env.SPINDLE_CACHE_DIR.length > 0 ? env.SPINDLE_CACHE_DIR : join(homedir(), '.cache', 'spindle');
}

/** Where the demo model lives (whether or not it exists yet). */
export function demoModelPath(env: NodeJS.ProcessEnv = process.env): string {
  const key = createHash('sha256').update(JSON.stringify({ ...DEMO_SPEC, seed: DEMO_SEED })).update('\0').update(generatorFingerprint()).digest('hex');
  return join(cacheDir(env), `${DEMO_MODEL_NAME}-llama3-q8_0-${key.slice(0, 12)}.gguf`);
}

/** Path of the demo model, generating it first when it is not cached; `log` hears about the generation. */
export async function demoModel(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const path = demoModelPath(env);
  if (existsSync(path)) return path;
  mkdirSync(cacheDir(env), { recursive: true });
  log(`generating the built-in demo model at ${path} (random weights, Llama 3 tokenizer, Q8_0; once)...`);
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeDemoModel(tmp);
    renameSync(tmp, path);
  } catch (e) {
    try { unlinkSync(tmp); } catch { /* never written */ }
    throw e;
  }
  return path;
}
