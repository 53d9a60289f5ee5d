// Writes a random-weight GGUF model: metadata, a real tokenizer, and tensors drawn from per-tensor random
// streams. Used by the demo model (lib/demo-model.ts) and the test fixtures (test/tooling/fixtures).
// Invariant: the file depends only on its content description (same description -> same bytes); tensor values
// come from a per-tensor random stream, generated and encoded a few rows at a time, so memory stays bounded.
import { GgufValueType, type GgmlType } from '../gguf/constants.js';
import { quantize } from '../gguf/quantize.js';
import { GgufWriter } from '../gguf/writer.js';
import type { TensorPlan } from './dense.js';
import { Rng } from './random.js';
import { tokenizerPackageVersions, type MetadataEntry, type TokenizerGguf } from './tokenizer.js';

/**
 * Version of the generator's output: bump it whenever the same description would produce different bytes
 * (weights, scales, metadata, tokenizer conversion), so every cache keyed by generatorFingerprint() is invalidated.
 */
export const GENERATOR_VERSION = 1;

/** GENERATOR_VERSION plus the versions of the tokenizer packages the files are built from. */
export function generatorFingerprint(): string {
  return [`spindle-fixtures/${GENERATOR_VERSION}`, ...tokenizerPackageVersions()].join(' ');
}

/** Everything a generated file holds. */
export interface ModelContent {
  arch: string; // general.architecture
  name: string; // general.name
  seed: number; // of every tensor's random stream (recorded as spindle.fixture.seed)
  metadata: MetadataEntry[]; // {arch}.* keys and general.file_type
  tokenizer: TokenizerGguf;
  plan: TensorPlan[]; // empty for a vocabulary-only file
}

/** Encodes whole rows of float32 values as a ggml type. */
export type Encoder = (type: GgmlType, x: Float32Array) => Uint8Array;

const CHUNK_VALUES = 1 << 18; // values generated and encoded per step

/** Metadata and tensor table of the file, without any tensor data. */
export function modelWriter(m: ModelContent): GgufWriter {
  const writer = new GgufWriter();
  writer.addString('general.architecture', m.arch);
  writer.addString('general.type', 'model');
  writer.addString('general.name', m.name);
  for (const e of m.metadata) writer.add(e.key, e.type, e.value);
  for (const e of m.tokenizer.entries) writer.add(e.key, e.type, e.value);
  writer.add('spindle.fixture.seed', GgufValueType.UINT32, m.seed);
  for (const t of m.plan) writer.addTensor(t.name, t.ne, t.type);
  return writer;
}

/** Yields the encoded bytes of one tensor, a whole number of rows at a time. */
export function* tensorChunks(t: TensorPlan, seed: number, encode: Encoder = quantize): Generator<Uint8Array> {
  const rng = new Rng(seed, t.name);
  const rowLen = t.ne[0];
  const rows = t.ne.slice(1).reduce((a, b) => a * b, 1);
  const rowsPerChunk = Math.max(1, Math.floor(CHUNK_VALUES / rowLen));
  const buf = new Float32Array(Math.min(rows, rowsPerChunk) * rowLen);
  for (let r = 0; r < rows; r += rowsPerChunk) {
    const n = Math.min(rowsPerChunk, rows - r) * rowLen;
    const x = n === buf.length ? buf : buf.subarray(0, n);
    rng.fillNormal(x, t.std, t.mean);
    yield encode(t.type, x);
  }
}

/** Writes the file to `outPath` (streamed; a failed write leaves no file); returns its size in bytes. */
export async function writeModel(m: ModelContent, outPath: string, encode: Encoder = quantize): Promise<number> {
  return modelWriter(m).writeFile(outPath, (_info, i) => tensorChunks(m.plan[i], m.seed, encode));
}
