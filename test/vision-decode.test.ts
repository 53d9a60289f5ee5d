// Image decoding for the vision path: each supported format round-trips (PNG exactly), EXIF orientation is
// applied, alpha and grey become RGB, GIF gives its first frame, and every bad input is an ImageError with
// its code: too many bytes or pixels, an unsupported format, corrupt data.
import t from 'tap';
import sharp from 'sharp';
import { decodeImage, ImageError } from '../lib/vision/decode.js';

const W = 40, H = 30;
const rgb = Buffer.alloc(W * H * 3);
for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) for (let c = 0; c < 3; c++) rgb[(y * W + x) * 3 + c] = (x * 6 + y * 8 + c * 80) & 255;
const raw = { raw: { width: W, height: H, channels: 3 as const } };

t.test('PNG decodes exactly; JPEG / WebP / GIF decode to the right size', async (t) => {
  const png = await decodeImage(await sharp(rgb, raw).png().toBuffer());
  t.same([png.width, png.height], [W, H]);
  t.ok(png.data.equals(rgb), 'PNG pixels are exact');
  for (const fmt of ['jpeg', 'webp', 'gif'] as const) {
    const img = await decodeImage(await sharp(rgb, raw).toFormat(fmt).toBuffer());
    t.same([img.width, img.height, img.data.length], [W, H, W * H * 3], fmt);
  }
});

t.test('EXIF orientation is applied; alpha is dropped; grey becomes RGB', async (t) => {
  const rotated = await decodeImage(await sharp(rgb, raw).jpeg().withMetadata({ orientation: 6 }).toBuffer());
  t.same([rotated.width, rotated.height], [H, W], 'orientation 6: a quarter turn');
  const rgba = Buffer.alloc(W * H * 4, 0);
  for (let i = 0; i < W * H; i++) { rgba[i * 4] = 200; rgba[i * 4 + 1] = 100; rgba[i * 4 + 2] = 50; rgba[i * 4 + 3] = i % 2 ? 0 : 255; }
  const noAlpha = await decodeImage(await sharp(rgba, { raw: { width: W, height: H, channels: 4 } }).png().toBuffer());
  t.same([...noAlpha.data.subarray(0, 6)], [200, 100, 50, 200, 100, 50], 'colour kept where alpha was 0');
  const grey = await decodeImage(await sharp(Buffer.alloc(W * H, 77), { raw: { width: W, height: H, channels: 1 } }).png().toBuffer());
  t.same([...grey.data.subarray(0, 3)], [77, 77, 77]);
});

t.test('bad inputs are ImageErrors naming the problem', async (t) => {
  await t.rejects(decodeImage(Buffer.from('not an image at all')), { name: 'ImageError', code: 'corrupt' });
  const png = await sharp(rgb, raw).png().toBuffer();
  await t.rejects(decodeImage(png.subarray(0, 60)), { name: 'ImageError', code: 'corrupt' });
  await t.rejects(decodeImage(await sharp(rgb, raw).tiff().toBuffer()), { code: 'unsupported_format', message: /'tiff' is not supported/ });
  await t.rejects(decodeImage(png, { maxBytes: 10, maxPixels: 1e9 }), { code: 'too_many_bytes' });
  await t.rejects(decodeImage(png, { maxBytes: 1e9, maxPixels: 100 }), { code: 'too_many_pixels', message: /40x30/ });
  t.ok(new ImageError('corrupt', 'x') instanceof Error);
});
