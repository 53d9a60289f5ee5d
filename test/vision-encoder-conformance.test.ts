// The plain-loop LFM2-VL encoder against llama.cpp's clip encoder (tools/mtmd, bundled llama.cpp de3ff815, CPU,
// flash attention off) on the same random-weight mmproj (test/tooling/fixtures/mmproj.ts, seed 5) and the same
// deterministic image entries: a 64x32 entry (position grid shrunk 16 -> 4 x 2, antialiased), a 256x256 entry
// (grid used as stored) and a 512x512 tile (grid enlarged 16 -> 32). The llama.cpp outputs were produced by a
// harness calling clip_image_encode and are stored in test/fixtures/vision/*.f32. llama.cpp rounds pixels to
// f16 for the patch embedding (im2col) and evaluates GELU through an f16 table, so the outputs agree to about
// 1e-3 of their scale, not bit for bit.
import t from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeMmproj } from './tooling/fixtures/mmproj.js';
import { debugAddon } from './helpers/debug-addon.js';

const fixtures = fileURLToPath(new URL('./fixtures/vision/', import.meta.url));
const path = join(mkdtempSync(join(tmpdir(), 'spindle-enc-')), 'mm.gguf');
await writeMmproj(path, { nEmbd: 32, nHead: 4, nFf: 64, nLayer: 2, patchSize: 16, posGrid: 16, scaleFactor: 2, projHidden: 48, textEmbd: 64, seed: 5 });

function pixels(w: number, h: number): Float32Array {
  const px = new Float32Array(3 * w * h);
  for (let i = 0; i < px.length; i++) px[i] = ((i * 37) % 255) / 127.5 - 1; // planar [c][y][x]
  return px;
}

for (const [w, h] of [[64, 32], [256, 256], [512, 512]]) {
  t.test(`${w}x${h}: embeddings match llama.cpp within 2e-3 of their scale (plain loops and the backend encoder)`, async (t) => {
    const ref = new Float32Array(Uint8Array.from(readFileSync(join(fixtures, `lfm2-mm-seed5-${w}x${h}.f32`))).buffer);
    const encoders = {
      reference: debugAddon().mmprojEncodeReference(path, pixels(w, h), w, h),
      backend: debugAddon().mmprojEncode(path, pixels(w, h), w, h, 2),
    };
    for (const [name, ours] of Object.entries(encoders)) {
      t.equal(ours.length, ref.length, `${name}: ${ours.length / 64} tokens of 64`);
      let scale = 0, worst = 0;
      for (let i = 0; i < ref.length; i++) {
        scale = Math.max(scale, Math.abs(ref[i]));
        worst = Math.max(worst, Math.abs(ref[i] - ours[i]));
      }
      t.ok(worst <= 2e-3 * scale, `${name}: max |diff| ${worst.toExponential(2)} vs max |value| ${scale.toFixed(3)}`);
    }
  });
}
