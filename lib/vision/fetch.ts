// The bytes of an image as a request gives it (an OpenAI `image_url` part, as vLLM loads them): a data: URL,
// an http(s): URL, a file: URL or plain path (only inside --allowed-local-media-path), or bytes already.
// Invariant: loadMediaBytes resolves with at most maxBytes bytes or rejects with a MediaFetchError whose
// message names the problem and what is allowed; nothing else is thrown, and no socket or timer outlives it.
// Helpers: fetch-options.ts (options, error), fetch-data.ts, fetch-file.ts, fetch-http.ts (+ fetch-address.ts).
import { decodeDataUrl } from './fetch-data.js';
import { filePathFromUrl, loadLocalFile } from './fetch-file.js';
import { fetchHttpBytes } from './fetch-http.js';
import {
  LoadedMedia, MediaFetchError, MediaFetchOptions, resolveMediaFetchOptions, shortSrc,
} from './fetch-options.js';

export {
  DEFAULT_MEDIA_FETCH_OPTIONS, MediaFetchError,
} from './fetch-options.js';
export type { LoadedMedia, MediaFetchErrorCode, MediaFetchOptions, MediaSource } from './fetch-options.js';

const SCHEME = /^([a-zA-Z][a-zA-Z0-9+.-]+):/; // two characters at least: 'C:\x' is a Windows path, not a scheme
const ALLOWED_SCHEMES = 'http:, https:, data:, and file: or a plain path with --allowed-local-media-path';

/**
 * src: 'data:image/png;base64,...', 'http(s)://...', 'file:///abs/path', an absolute or relative path, or the
 * bytes themselves (a Buffer or Uint8Array, returned without a copy once its size is checked).
 */
export async function loadMediaBytes(src: string | Uint8Array, opts?: Partial<MediaFetchOptions>): Promise<LoadedMedia> {
  try {
    return await load(src, resolveMediaFetchOptions(opts));
  } catch (e) {
    if (e instanceof MediaFetchError) throw e;
    throw new MediaFetchError('unreachable', `the image could not be loaded (${(e as Error)?.message ?? String(e)})`);
  }
}

async function load(src: string | Uint8Array, opts: MediaFetchOptions): Promise<LoadedMedia> {
  if (src instanceof Uint8Array) {
    if (src.length > opts.maxBytes) {
      throw new MediaFetchError('too_many_bytes', `the image is ${src.length} bytes; at most ${opts.maxBytes} are accepted`);
    }
    const bytes = Buffer.isBuffer(src) ? src : Buffer.from(src.buffer, src.byteOffset, src.byteLength);
    return { bytes, contentType: null, source: 'buffer' };
  }
  if (typeof src !== 'string') {
    throw new MediaFetchError('bad_url', `the image must be a URL or path string or a Uint8Array, not ${src === null ? 'null' : typeof src}`);
  }
  if (src.trim() === '') throw new MediaFetchError('bad_url', `the image URL is empty (allowed: ${ALLOWED_SCHEMES})`);
  const scheme = SCHEME.exec(src)?.[1].toLowerCase();
  switch (scheme) {
    case undefined: return loadLocalFile(src, opts);
    case 'data': return decodeDataUrl(src, opts.maxBytes);
    case 'http': case 'https': return fetchHttpBytes(src, opts);
    case 'file': return loadLocalFile(filePathFromUrl(src), opts);
    default:
      throw new MediaFetchError('bad_url', `the image URL '${shortSrc(src)}' has the scheme '${scheme}:', which is not supported (allowed: ${ALLOWED_SCHEMES})`);
  }
}
