// What the image loaders (fetch.ts and its fetch-data / fetch-file / fetch-http helpers) share: the options
// with their defaults and checks, the result, and the one error type.
// Invariant: resolveMediaFetchOptions either returns complete, valid options or throws a MediaFetchError
// ('bad_option') naming the option, the value and what is allowed.

export interface MediaFetchOptions {
  maxBytes: number; // bytes of the image (decoded, for data URLs); larger ones are refused
  timeoutMs: number; // the whole http(s) fetch: DNS, connect, every redirect hop and the body
  maxRedirects: number; // redirects followed; every hop is checked again (scheme, domain, address)
  allowedDomains: string[] | null; // vLLM --allowed-media-domains: http(s) hosts must be one of these (exact, case-insensitive)
  allowedLocalMediaPath: string | null; // vLLM --allowed-local-media-path: local files only inside it; null = none
  allowLinkLocal: boolean; // false: refuse link-local, cloud-metadata and unspecified destination addresses
}

export const DEFAULT_MEDIA_FETCH_OPTIONS: Readonly<MediaFetchOptions> = Object.freeze({
  maxBytes: 20 * 1024 * 1024,
  timeoutMs: 10_000,
  maxRedirects: 5,
  allowedDomains: null,
  allowedLocalMediaPath: null,
  allowLinkLocal: false,
});

export type MediaSource = 'data' | 'http' | 'file' | 'buffer';

export interface LoadedMedia {
  bytes: Buffer;
  contentType: string | null; // the media type (no parameters, lower case) when the source named one
  source: MediaSource;
}

export type MediaFetchErrorCode =
  | 'bad_url' | 'bad_option' | 'too_many_bytes' | 'timeout' | 'unreachable' | 'http_status' | 'content_type'
  | 'forbidden' | 'too_many_redirects';

export class MediaFetchError extends Error {
  readonly code: MediaFetchErrorCode;
  constructor(code: MediaFetchErrorCode, message: string) {
    super(message);
    this.name = 'MediaFetchError';
    this.code = code;
  }
}

const MAX_TIMER_MS = 2 ** 31 - 1; // setTimeout fires at once for anything larger

/** A URL or path for an error message: long ones (a pasted data URL) are cut. */
export function shortSrc(src: string): string {
  return src.length <= 120 ? src : `${src.slice(0, 100)}... (${src.length} characters)`;
}

function badOption(name: string, value: unknown, allowed: string): MediaFetchError {
  let shown: string;
  try { shown = JSON.stringify(value) ?? String(value); } catch { shown = String(value); }
  return new MediaFetchError('bad_option', `media fetch option ${name} = ${shortSrc(shown)} is invalid (allowed: ${allowed})`);
}

/** Defaults filled in and every value checked; unknown keys are refused rather than ignored. */
export function resolveMediaFetchOptions(opts: Partial<MediaFetchOptions> | undefined): MediaFetchOptions {
  if (opts === undefined || opts === null) return { ...DEFAULT_MEDIA_FETCH_OPTIONS };
  if (typeof opts !== 'object') throw badOption('(options)', opts, 'an object');
  const known = Object.keys(DEFAULT_MEDIA_FETCH_OPTIONS);
  for (const key of Object.keys(opts)) {
    if (!known.includes(key)) throw badOption(key, (opts as Record<string, unknown>)[key], `one of the options ${known.join(', ')}`);
  }
  const o: MediaFetchOptions = { ...DEFAULT_MEDIA_FETCH_OPTIONS };
  for (const [key, value] of Object.entries(opts)) {
    if (value !== undefined) (o as unknown as Record<string, unknown>)[key] = value;
  }
  if (!Number.isSafeInteger(o.maxBytes) || o.maxBytes < 0) throw badOption('maxBytes', o.maxBytes, 'an integer >= 0');
  if (typeof o.timeoutMs !== 'number' || !(o.timeoutMs > 0 && o.timeoutMs <= MAX_TIMER_MS)) {
    throw badOption('timeoutMs', o.timeoutMs, `a number of milliseconds > 0 and <= ${MAX_TIMER_MS}`);
  }
  if (!Number.isSafeInteger(o.maxRedirects) || o.maxRedirects < 0) throw badOption('maxRedirects', o.maxRedirects, 'an integer >= 0');
  if (o.allowedDomains !== null
    && (!Array.isArray(o.allowedDomains) || o.allowedDomains.some((d) => typeof d !== 'string' || d.trim() === ''))) {
    throw badOption('allowedDomains', o.allowedDomains, 'null or an array of host names');
  }
  if (o.allowedLocalMediaPath !== null && (typeof o.allowedLocalMediaPath !== 'string' || o.allowedLocalMediaPath === ''
    || o.allowedLocalMediaPath.includes('\0'))) {
    throw badOption('allowedLocalMediaPath', o.allowedLocalMediaPath, 'null or a directory path');
  }
  if (typeof o.allowLinkLocal !== 'boolean') throw badOption('allowLinkLocal', o.allowLinkLocal, 'true or false');
  return o;
}
