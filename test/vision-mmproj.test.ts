// The random-weight LFM2-VL mmproj fixture writer against the native loader: what test/tooling/fixtures/mmproj.ts
// writes loads with the hyperparameters it was given, and a broken file is refused naming the problem.
import t from 'tap';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadNative } from '../lib/native.js';
import { writeMmproj, type MmprojSpec } from './tooling/fixtures/mmproj.js';

const dir = mkdtempSync(join(tmpdir(), 'spindle-mmproj-'));
const spec: MmprojSpec = { nEmbd: 32, nHead: 4, nFf: 64, nLayer: 2, patchSize: 16, posGrid: 16, scaleFactor: 2, projHidden: 48, textEmbd: 64, seed: 5 };

t.test('a written mmproj loads with its hyperparameters; same seed, same bytes', async (t) => {
  const a = join(dir, 'a.gguf'), b = join(dir, 'b.gguf');
  await writeMmproj(a, spec);
  await writeMmproj(b, spec);
  t.ok(readFileSync(a).equals(readFileSync(b)), 'deterministic');
  t.match(loadNative().mmprojInfo(a), {
    projector: 'lfm2', nEmbd: 32, nHead: 4, nFf: 64, nLayer: 2, patchSize: 16, scaleFactor: 2, posGrid: 16,
    projHidden: 48, nEmbdOut: 64, useGelu: true, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5],
  });
  const noNorm = join(dir, 'c.gguf');
  await writeMmproj(noNorm, { ...spec, projectorNorm: false });
  t.equal(loadNative().mmprojInfo(noNorm).nEmbdOut, 64, 'the projector LayerNorm is optional');
});

t.test('a truncated or wrong file is refused with a message', async (t) => {
  const a = join(dir, 'a.gguf');
  const bad = join(dir, 'truncated.gguf');
  writeFileSync(bad, readFileSync(a).subarray(0, 4000));
  t.throws(() => loadNative().mmprojInfo(bad), /truncated|past the end|size/i);
  t.throws(() => loadNative().mmprojInfo(join(dir, 'missing.gguf')), /missing\.gguf/);
});
