// Cached fixture models for tests: fixtureModel(spec) returns the path of a generated GGUF under
// test/.fixtures/, generating it on first use. Invariant: the file name is a hash of the resolved spec, the
// generator's fingerprint (GENERATOR_VERSION, tokenizer package versions) and the generator's source, so a
// changed spec or generator never reuses a stale file; files appear only by rename of a complete temp file,
// so concurrent test processes never see a partial model; a file's mtime is its last use, and files unused
// for CACHE_MAX_AGE_MS are deleted (they are regenerated on demand).
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, utimesSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateModel, generatorFingerprint, resolveSpec, tokenizerGguf, type ModelSpec } from '../tooling/fixtures/index.js';
import { lfm2VlImageTokenIds } from '../tooling/fixtures/image-tokens.js';
import { generateVisionFixture, resolveVisionSpec, type VisionFixtureSpec } from '../tooling/fixtures/lfm2-vl.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const FIXTURE_DIR = join(repoRoot, 'test', '.fixtures');

const tiny = { nEmbd: 256, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 768 } as const;
const llama2Dims = { arch: 'llama', tokenizer: 'llama2', ...tiny, nHeadKv: 4, seed: 4 } as const;

/**
 * Named fixture models. Dimensions are tiny; the vocabulary (128k / 152k / 32k / 262k rows) dominates the size.
 * Families that tie embeddings in their small models (Llama 3.2 1B, Qwen3 0.6B, Qwen2.5 0.5B) tie here too.
 */
export const PRESETS = {
  /** Llama 3 tokenizer (llama-bpe), GQA 4/2, head_dim 64, tied, F16: ~77 MB */
  llama3Tiny: { arch: 'llama', tokenizer: 'llama3', weights: 'F16', ...tiny, tiedEmbeddings: true, seed: 1 },
  /** Qwen3: q/k norms, head_dim 128 (n_head * head_dim = 512 != n_embd), NEOX rope, tied, F16: ~88 MB */
  qwen3Tiny: { arch: 'qwen3', tokenizer: 'qwen3', weights: 'F16', ...tiny, headDim: 128, tiedEmbeddings: true, seed: 2 },
  /** Qwen2 (q/k/v biases) with the Qwen tokenizer, tied, F16: ~87 MB */
  qwen2Tiny: { arch: 'qwen2', tokenizer: 'qwen3', weights: 'F16', ...tiny, tiedEmbeddings: true, seed: 3 },
  /** SentencePiece (llama2-style) tokenizer, MHA, untied output.weight, F16: ~37 MB */
  llama2Tiny: { ...llama2Dims, weights: 'F16' },
  /** The llama2Tiny model in every other weight encoding (same dims and seed, so same underlying values). */
  llama2F32: { ...llama2Dims, weights: 'F32' },
  llama2BF16: { ...llama2Dims, weights: 'BF16' },
  llama2Q8_0: { ...llama2Dims, weights: 'Q8_0' },
  llama2Q4_0: { ...llama2Dims, weights: 'Q4_0' },
  llama2Q6_K: { ...llama2Dims, weights: 'Q6_K' },
  /** 4 layers so the Q4_K_M mix shows: attn_v / ffn_down of layers 2, 3 and output are Q6_K, the rest Q4_K */
  llama2Q4_K_M: { ...llama2Dims, weights: 'Q4_K_M', nLayer: 4 },
  /** Vocabulary-only files (metadata, no tensors) for tokenizer tests: load with vocabOnly */
  llama3Vocab: { arch: 'llama', tokenizer: 'llama3', weights: 'F16', ...tiny, tiedEmbeddings: true, seed: 1, vocabOnly: true },
  qwen3Vocab: { arch: 'qwen3', tokenizer: 'qwen3', weights: 'F16', ...tiny, headDim: 128, tiedEmbeddings: true, seed: 2, vocabOnly: true },
  llama2Vocab: { ...llama2Dims, weights: 'F16', vocabOnly: true },
  /** Gemma 3's SentencePiece vocabulary (262144 tokens, no space prefix) under the llama architecture's keys */
  gemma3Vocab: { arch: 'llama', tokenizer: 'gemma3', weights: 'F16', ...tiny, tiedEmbeddings: true, seed: 5, vocabOnly: true },
  /** Mistral Nemo's tekken tokenizer (BPE, the "tekken" pre-tokenizer), vocabulary only */
  mistralNemoVocab: { arch: 'llama', tokenizer: 'mistral_nemo', weights: 'F16', ...tiny, tiedEmbeddings: true, seed: 6, vocabOnly: true },
} as const satisfies Record<string, ModelSpec>;

export type PresetName = keyof typeof PRESETS;

let generatorKey: string | undefined;

/**
 * The generator part of every cache key: its declared version and tokenizer packages, plus a hash of its own
 * source (lib/random-model, lib/gguf, test/tooling), so even an edit that forgets to bump GENERATOR_VERSION
 * invalidates the cache.
 */
export function generatorCacheKey(): string {
  if (generatorKey) return generatorKey;
  const h = createHash('sha256').update(generatorFingerprint());
  for (const dir of ['lib/random-model', 'lib/gguf', 'test/tooling/fixtures', 'test/tooling/gguf']) {
    for (const f of readdirSync(join(repoRoot, dir)).filter((n) => n.endsWith('.ts')).sort()) {
      h.update('\0').update(f).update('\0').update(readFileSync(join(repoRoot, dir, f)));
    }
  }
  generatorKey = h.digest('hex');
  return generatorKey;
}

/** Cache file name for a spec: <arch>-<tokenizer>-<weights>[-vocab]-<hash16>.gguf (throws on an invalid spec) */
export function fixtureFileName(spec: ModelSpec, generatorKey = generatorCacheKey()): string {
  const r = resolveSpec(spec);
  const key = createHash('sha256').update(JSON.stringify(r)).update('\0').update(generatorKey).digest('hex');
  return `${r.arch}-${r.tokenizer}-${r.weights}${r.vocabOnly ? '-vocab' : ''}-${key.slice(0, 16)}.gguf`;
}

/** Temp files older than this are left over from killed runs. */
const STALE_TEMP_MS = 60 * 60 * 1000;
/** Cached models not used for this long are deleted (old generator versions, specs no test uses any more). */
export const CACHE_MAX_AGE_MS = 2 * 24 * 60 * 60 * 1000;

/** Deletes stale temp files and cached models unused for CACHE_MAX_AGE_MS. */
function pruneCache(): void {
  const now = Date.now();
  for (const f of readdirSync(FIXTURE_DIR)) {
    const maxAge = f.endsWith('.tmp') ? STALE_TEMP_MS : f.endsWith('.gguf') ? CACHE_MAX_AGE_MS : Infinity;
    const p = join(FIXTURE_DIR, f);
    try {
      if (now - statSync(p).mtimeMs > maxAge) unlinkSync(p);
    } catch {
      // another process removed or renamed it first
    }
  }
}

/** Marks a cached file as used now; false if it does not exist. */
function touch(path: string): boolean {
  try {
    const now = new Date();
    utimesSync(path, now, now);
    return true;
  } catch {
    return false;
  }
}

const inFlight = new Map<string, Promise<string>>();

/** Path of the fixture model for `spec` (a preset name or a spec), generated and cached on first use. */
export function fixtureModel(spec: ModelSpec | PresetName): Promise<string> {
  const s: ModelSpec = typeof spec === 'string' ? PRESETS[spec] : spec;
  if (!s) return Promise.reject(new Error(`unknown fixture preset ${String(spec)}`));
  let name: string;
  try {
    name = fixtureFileName(s);
  } catch (err) {
    return Promise.reject(err);
  }
  const path = join(FIXTURE_DIR, name);
  const pending = inFlight.get(path);
  if (pending) return pending;
  const p = (async () => {
    if (touch(path)) return path;
    mkdirSync(FIXTURE_DIR, { recursive: true });
    pruneCache();
    const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    await generateModel(s, tmp);
    renameSync(tmp, path); // atomic; a concurrent writer of the same name wrote identical bytes
    return path;
  })();
  inFlight.set(path, p);
  p.catch(() => inFlight.delete(path));
  return p;
}

/**
 * Options for node-llama-cpp contexts in tests. threads: 1 matters: on a shared 2-core machine llama.cpp's
 * spinning worker threads make a 2-thread context ~25x slower (32 tokens: 0.5 s with 1 thread, 12 s with 2).
 */
export const REFERENCE_CONTEXT_OPTIONS = { contextSize: 512, flashAttention: false, threads: 1 } as const;

let llamaPromise: Promise<import('node-llama-cpp').Llama> | undefined;

/** The shared node-llama-cpp instance (CPU prebuilt, never builds, errors-only logging). */
export function referenceLlama(): Promise<import('node-llama-cpp').Llama> {
  llamaPromise ??= import('node-llama-cpp').then(({ getLlama, LlamaLogLevel }) =>
    getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error }));
  return llamaPromise;
}

// ---- Vision fixtures: a text model and its mmproj, side by side in their own directory ----

export { VISION_PRESETS } from '../tooling/fixtures/vision-presets.js';
import { VISION_PRESETS } from '../tooling/fixtures/vision-presets.js';

export type VisionPresetName = keyof typeof VISION_PRESETS;

export interface VisionFixture {
  /** The text model: <dir>/<name>.gguf */
  model: string;
  /** Its mmproj: <dir>/mmproj-<name>.gguf (the only mmproj*.gguf in dir) */
  mmproj: string;
  /** A directory holding just these two files. */
  dir: string;
  /** LFM2-VL image token text -> id in this model's vocabulary (<image>, <|image_start|>, <|img_row_1_col_1|>, ...); {} for gemma3. */
  imageTokenIds: Record<string, number>;
}

const VISION_DIR_PREFIX = 'vision-';
const VISION_TMP_SUFFIX = '.tmpdir';

/** Cache directory name of a vision fixture: vision-<name>-<hash16> (throws on an invalid spec). */
export function visionFixtureDirName(spec: VisionFixtureSpec, generatorKey = generatorCacheKey()): string {
  const r = resolveVisionSpec(spec);
  const key = createHash('sha256').update(JSON.stringify({ name: spec.name, ...r })).update('\0').update(generatorKey).digest('hex');
  return `${VISION_DIR_PREFIX}${spec.name}-${key.slice(0, 16)}`;
}

/** Deletes vision fixture directories unused for CACHE_MAX_AGE_MS and temp directories left by killed runs. */
function pruneVisionCache(): void {
  const now = Date.now();
  for (const f of readdirSync(FIXTURE_DIR)) {
    if (!f.startsWith(VISION_DIR_PREFIX)) continue;
    const p = join(FIXTURE_DIR, f);
    try {
      const maxAge = f.endsWith(VISION_TMP_SUFFIX) ? STALE_TEMP_MS : CACHE_MAX_AGE_MS;
      if (statSync(p).isDirectory() && now - statSync(p).mtimeMs > maxAge) rmSync(p, { recursive: true, force: true });
    } catch {
      // another process removed it first
    }
  }
}

const visionInFlight = new Map<string, Promise<VisionFixture>>();

/**
 * The text model and mmproj of a vision fixture (a VISION_PRESETS name or a spec), generated and cached on first
 * use under test/.fixtures/vision-<name>-<hash>/ (the directory appears by an atomic rename once both files are
 * complete, so concurrent test processes never see half of it). Same cache-key rules as fixtureModel.
 */
export function fixtureVisionModel(spec: VisionFixtureSpec | VisionPresetName): Promise<VisionFixture> {
  const s: VisionFixtureSpec = typeof spec === 'string' ? VISION_PRESETS[spec] : spec;
  if (!s) return Promise.reject(new Error(`unknown vision fixture preset ${String(spec)}`));
  let dir: string;
  try {
    dir = join(FIXTURE_DIR, visionFixtureDirName(s));
  } catch (err) {
    return Promise.reject(err);
  }
  const pending = visionInFlight.get(dir);
  if (pending) return pending;
  const result = (): VisionFixture => ({
    model: join(dir, `${s.name}.gguf`),
    mmproj: join(dir, `mmproj-${s.name}.gguf`),
    dir,
    imageTokenIds: resolveSpec(s.text).imageTokens === 'lfm2-vl' ? lfm2VlImageTokenIds(tokenizerGguf(resolveSpec(s.text).tokenizer)) : {},
  });
  const p = (async () => {
    if (touch(dir)) return result();
    mkdirSync(FIXTURE_DIR, { recursive: true });
    pruneCache();
    pruneVisionCache();
    const tmp = `${dir}.${process.pid}.${randomBytes(4).toString('hex')}${VISION_TMP_SUFFIX}`;
    try {
      await generateVisionFixture(s, tmp);
      renameSync(tmp, dir); // atomic; fails if a concurrent writer renamed its identical copy first
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      if (!touch(dir)) throw err;
    }
    return result();
  })();
  visionInFlight.set(dir, p);
  p.catch(() => visionInFlight.delete(dir));
  return p;
}
