// Image bytes -> RGB pixels for the vision encoder, with sharp (prebuilt libvips; no install script): JPEG,
// PNG, WebP and GIF (first frame), EXIF orientation applied, alpha dropped (not composited, as llama.cpp's
// stb_image load and PIL's convert("RGB") do), grey expanded to RGB, 8 bits per channel.
// Invariant: every failure is an ImageError whose message names the problem (too many bytes or pixels, a
// format that is not supported, data that does not decode) and whose `code` says which; the one other error is
// sharp itself failing to load (a server fault, not the request's: a plain Error). sharp loads on the first
// image, so text-only use never loads libvips.
import type sharpFn from 'sharp';

export interface RgbImage {
  width: number;
  height: number;
  data: Buffer; // [height][width][3] u8
}

export interface DecodeLimits {
  maxBytes: number; // encoded size
  maxPixels: number; // width * height of the decoded image
}

export const DEFAULT_DECODE_LIMITS: DecodeLimits = { maxBytes: 20 * 1024 * 1024, maxPixels: 50_000_000 };

export type ImageErrorCode = 'too_many_bytes' | 'too_many_pixels' | 'unsupported_format' | 'corrupt';

export class ImageError extends Error {
  readonly code: ImageErrorCode;
  constructor(code: ImageErrorCode, message: string) {
    super(message);
    this.name = 'ImageError';
    this.code = code;
  }
}

const FORMATS = new Set(['jpeg', 'png', 'webp', 'gif']);

let sharpLoad: Promise<typeof sharpFn> | undefined;
function loadSharp(): Promise<typeof sharpFn> {
  sharpLoad ??= import('sharp').then(
    (m) => m.default,
    (e: Error) => {
      sharpLoad = undefined; // a later image tries again
      throw new Error(`images cannot be decoded here: the 'sharp' package did not load (${e.message})`);
    },
  );
  return sharpLoad;
}

export async function decodeImage(bytes: Uint8Array, limits: DecodeLimits = DEFAULT_DECODE_LIMITS): Promise<RgbImage> {
  if (bytes.length > limits.maxBytes) {
    throw new ImageError('too_many_bytes', `the image is ${bytes.length} bytes; at most ${limits.maxBytes} are accepted`);
  }
  const sharp = await loadSharp();
  let format: string | undefined;
  let width = 0, height = 0;
  try {
    const meta = await sharp(bytes, { failOn: 'error', limitInputPixels: false }).metadata();
    format = meta.format;
    width = meta.width ?? 0;
    height = meta.height ?? 0;
  } catch (e) {
    throw new ImageError('corrupt', `the image could not be read: ${(e as Error).message}`);
  }
  if (format === undefined || !FORMATS.has(format)) {
    throw new ImageError('unsupported_format', `image format '${format ?? 'unknown'}' is not supported (supported: JPEG, PNG, WebP, GIF)`);
  }
  if (width * height > limits.maxPixels) {
    throw new ImageError('too_many_pixels', `the image is ${width}x${height} (${width * height} pixels); at most ${limits.maxPixels} pixels are accepted`);
  }
  try {
    const { data, info } = await sharp(bytes, { failOn: 'error', limitInputPixels: limits.maxPixels, animated: false })
      .rotate() // EXIF orientation
      .removeAlpha()
      .toColourspace('srgb')
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`decoded to ${info.channels} channels`);
    return { width: info.width, height: info.height, data };
  } catch (e) {
    throw new ImageError('corrupt', `the image could not be decoded: ${(e as Error).message}`);
  }
}
