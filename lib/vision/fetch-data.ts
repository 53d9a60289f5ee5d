// data: URLs (RFC 2397) -> bytes: `data:[<mime>][;param]*[;base64],<payload>`.
// Invariant: the media type is image/*, application/octet-stream or empty; a base64 payload is decoded only
// when every character is valid and its decoded size (known from its length) fits maxBytes; a plain payload
// is percent-decoded byte by byte (bad escapes refused). Nothing is decoded partially or silently skipped.
import { LoadedMedia, MediaFetchError } from './fetch-options.js';

const FORMAT = 'expected data:<mime>[;base64],<payload>';
const IMAGE_TYPE = /^image\/[a-z0-9][a-z0-9!#$&^_.+-]*$/;
const NOT_BASE64 = /[^A-Za-z0-9+/]/;

/** The media type of a header or Content-Type value, lower case, parameters dropped; '' when absent. */
export function mediaTypeEssence(value: string): string {
  return value.split(';')[0].trim().toLowerCase();
}

/** image/*, application/octet-stream, or nothing said: what an image source may declare. */
export function isAcceptedImageType(essence: string): boolean {
  return essence === '' || essence === 'application/octet-stream' || IMAGE_TYPE.test(essence);
}

export function decodeDataUrl(url: string, maxBytes: number): LoadedMedia {
  const comma = url.indexOf(',');
  if (comma < 0) throw new MediaFetchError('bad_url', `the data URL has no ',' before its payload (${FORMAT})`);
  const params = url.slice('data:'.length, comma).split(';');
  const essence = mediaTypeEssence(params[0]);
  const base64 = params.length > 1 && params[params.length - 1].trim().toLowerCase() === 'base64';
  if (!isAcceptedImageType(essence)) {
    throw new MediaFetchError('content_type',
      `the data URL's media type '${essence}' is not an image (allowed: image/*, application/octet-stream or none)`);
  }
  const payload = url.slice(comma + 1);
  const bytes = base64 ? decodeBase64Strict(payload, maxBytes) : decodePercent(payload, maxBytes);
  return { bytes, contentType: essence === '' ? null : essence, source: 'data' };
}

function tooMany(size: number, maxBytes: number, atLeast = false): MediaFetchError {
  return new MediaFetchError('too_many_bytes', `the data URL holds ${atLeast ? 'at least ' : ''}${size} bytes; at most ${maxBytes} are accepted`);
}

function decodeBase64Strict(s: string, maxBytes: number): Buffer {
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  const body = s.length - pad; // characters that carry data
  if (body % 4 === 1 || (pad > 0 && s.length % 4 !== 0)) {
    throw new MediaFetchError('bad_url',
      `the data URL's base64 payload has a length (${s.length} characters) that no base64 encoding has: it is truncated or padded wrongly`);
  }
  const size = Math.floor((body * 3) / 4); // each 4 characters -> 3 bytes; 2 -> 1, 3 -> 2
  if (size > maxBytes) throw tooMany(size, maxBytes); // before scanning or decoding anything
  const bad = NOT_BASE64.exec(s);
  if (bad !== null && bad.index < body) {
    const c = s.charCodeAt(bad.index);
    const shown = c >= 0x21 && c < 0x7f ? `'${s[bad.index]}'` : `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
    throw new MediaFetchError('bad_url',
      `the data URL's base64 payload has the character ${shown} at offset ${bad.index} (allowed: A-Z a-z 0-9 + / and up to two trailing '=')`);
  }
  return Buffer.from(s, 'base64');
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return -1;
}

function decodePercent(payload: string, maxBytes: number): Buffer {
  // Each decoded byte comes from at most 3 characters, so a longer payload is too big whatever it holds.
  if (payload.length > 3 * maxBytes) throw tooMany(Math.ceil(payload.length / 3), maxBytes, true);
  const src = Buffer.from(payload, 'utf8'); // characters beyond ASCII stand for their UTF-8 bytes
  const out = Buffer.alloc(src.length);
  let n = 0;
  for (let i = 0; i < src.length; i++) {
    if (src[i] !== 0x25) { out[n++] = src[i]; continue; } // not '%'
    const hi = i + 2 < src.length ? hexValue(src[i + 1]) : -1;
    const lo = hi >= 0 ? hexValue(src[i + 2]) : -1;
    if (lo < 0) {
      throw new MediaFetchError('bad_url',
        `the data URL's payload has a bad percent-escape at byte ${i} (expected '%' and two hex digits; or use ;base64)`);
    }
    out[n++] = hi * 16 + lo;
    i += 2;
  }
  if (n > maxBytes) throw tooMany(n, maxBytes);
  return out.subarray(0, n);
}
