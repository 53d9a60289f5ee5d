// The built-in demo model of `spindle serve` without a model argument (the README's "run it" command): a small
// Llama with the real Llama 3 tokenizer and chat template, Q8_0, random weights (fluent-looking nonsense),
// generated deterministically by the project's own GGUF writer on first use and cached.
// Invariants: the cache file name carries a hash of the resolved spec and the generator's fingerprint, so a
// changed generator never reuses a stale file; the file appears only by rename of a complete temp file.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, unlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { generateModel, generatorFingerprint, resolveSpec, type ModelSpec } from './fixtures/index.js';

export const DEMO_MODEL_NAME = 'spindle-demo';

export const DEMO_SPEC: ModelSpec = {
  arch: 'llama', tokenizer: 'llama3', weights: 'Q8_0', seed: 7, tiedEmbeddings: true,
  nEmbd: 512, nLayer: 4, nHead: 8, nHeadKv: 4, nFf: 1536, name: DEMO_MODEL_NAME,
};

/** $SPINDLE_CACHE_DIR, else ~/.cache/spindle. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.SPINDLE_CACHE_DIR && env.SPINDLE_CACHE_DIR.length > 0 ? env.SPINDLE_CACHE_DIR : join(homedir(), '.cache', 'spindle');
}

/** Where the demo model lives (whether or not it exists yet). */
export function demoModelPath(env: NodeJS.ProcessEnv = process.env): string {
  const key = createHash('sha256').update(JSON.stringify(resolveSpec(DEMO_SPEC))).update('\0').update(generatorFingerprint()).digest('hex');
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
    await generateModel(DEMO_SPEC, tmp);
    renameSync(tmp, path);
  } catch (e) {
    try { unlinkSync(tmp); } catch { /* never written */ }
    throw e;
  }
  return path;
}
