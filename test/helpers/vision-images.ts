// Deterministic test pictures for the vision tests and the llama.cpp goldens (test/fixtures/vision/README.md):
// gradients, a checkerboard and a diagonal, distinct per seed, as raw RGB [h][w][3] (or that image as a PNG).
import { join } from 'node:path';
import sharp from 'sharp';

export function patternRgb(w: number, h: number, seed: number): Buffer {
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = (y * w + x) * 3;
      px[i] = (x * 7 + seed * 31) & 255;
      px[i + 1] = (y * 5 + x * 3 + seed * 17) & 255;
      px[i + 2] = ((x >> 4) ^ (y >> 4)) & 1 ? 230 : 25;
      if (Math.abs(x * h - y * w) < w) px[i] = 255 - px[i]; // the diagonal
    }
  }
  return px;
}

/** The golden cases: an image below the minimum token count (upscaled), 256x256 (as is), 800x600 (shrunk), 1200x900 (tiled). */
export const GOLDEN_IMAGES: readonly [number, number][] = [[40, 30], [256, 256], [800, 600], [1200, 900]];
export const goldenSeed = (w: number, h: number): number => w + h;

/** patternRgb(w, h, seed) as PNG bytes (lossless: a decoder gets the same pixels back). */
export function patternPng(w: number, h: number, seed: number): Promise<Buffer> {
  return sharp(patternRgb(w, h, seed), { raw: { width: w, height: h, channels: 3 } }).png().toBuffer();
}

/** patternRgb(w, h, seed) written as `dir`/img-WxH-seed.png; returns the path. */
export async function patternPngFile(dir: string, w: number, h: number, seed: number): Promise<string> {
  const path = join(dir, `img-${w}x${h}-${seed}.png`);
  await sharp(patternRgb(w, h, seed), { raw: { width: w, height: h, channels: 3 } }).png().toFile(path);
  return path;
}
