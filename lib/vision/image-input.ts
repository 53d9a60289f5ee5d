// One image as a user gives it (an http(s) URL, a data URL, a file path or file:// URL, or the bytes) -> RGB
// pixels: fetched within the media limits (fetch.ts), decoded within the pixel limits (decode.ts).
// Invariant: every failure is an ImageInputError (MediaFetchError or ImageError inside) whose message names the
// image and the problem; callers map it to a 400.
import { decodeImage, DEFAULT_DECODE_LIMITS, ImageError, type DecodeLimits, type RgbImage } from './decode.js';
import { loadMediaBytes, MediaFetchError, type MediaFetchOptions } from './fetch.js';

export type ImageSource = string | Uint8Array;

export interface ImageInputOptions {
  fetch?: Partial<MediaFetchOptions>;
  decode?: DecodeLimits;
}

export class ImageInputError extends Error {
  readonly code: string;
  constructor(message: string, code: string) {
    super(message);
    this.name = 'ImageInputError';
    this.code = code;
  }
}

export async function loadImage(src: ImageSource, what: string, options: ImageInputOptions = {}): Promise<RgbImage> {
  if (typeof src !== 'string' && !(src instanceof Uint8Array)) {
    throw new ImageInputError(`${what} must be a URL, a data URL, a file path or bytes (Buffer / Uint8Array)`, 'bad_url');
  }
  try {
    const { bytes } = await loadMediaBytes(src, options.fetch);
    return await decodeImage(bytes, options.decode ?? DEFAULT_DECODE_LIMITS);
  } catch (e) {
    if (e instanceof MediaFetchError || e instanceof ImageError) throw new ImageInputError(`${what}: ${e.message}`, e.code);
    throw e;
  }
}

/** Every image of a request, loaded concurrently; the first failure rejects. */
export function loadImages(sources: readonly ImageSource[], what: string, options: ImageInputOptions = {}): Promise<RgbImage[]> {
  return Promise.all(sources.map((s, i) => loadImage(s, `${what}[${i}]`, options)));
}
