// Go's encoding/json Marshal for template values (what Ollama's `json` function and String() methods print).
// Invariant: byte-for-byte what Go writes for the Go value a JS value stands for: no spaces, map keys sorted,
// struct fields (via GO_JSON hooks returning a JSONObject) in declaration order, HTML-safe strings (<, >, & as
// \u003c \u003e \u0026, U+2028/2029 escaped, \b \f \n \r \t short forms), numbers in Go's float64 form (the same
// as JavaScript's except -0). A value Go cannot encode (NaN, Inf, a function) makes goMarshal return undefined,
// as json.Marshal returns an error.
import { GO_JSON, JSONObject, sortedKeys } from './values.js';

class Unsupported extends Error {}

export function goMarshal(v: unknown): string | undefined {
  try {
    return encode(v, 0);
  } catch (e) {
    if (e instanceof Unsupported) return undefined;
    throw e;
  }
}

const MAX_DEPTH = 1000;

function encode(v: unknown, depth: number): string {
  if (depth > MAX_DEPTH) throw new Unsupported('json: nesting too deep');
  if (v === undefined || v === null) return 'null';
  if (typeof v === 'object' && GO_JSON in v) return encode((v as { [GO_JSON]: () => unknown })[GO_JSON](), depth + 1);
  switch (typeof v) {
    case 'string':
      return goJSONString(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(v)) throw new Unsupported(`json: unsupported value: ${v}`);
      return Object.is(v, -0) ? '-0' : String(v);
    case 'bigint':
      return v.toString();
    case 'function':
    case 'symbol':
      throw new Unsupported(`json: unsupported type: ${typeof v}`);
  }
  if (v instanceof JSONObject) {
    return '{' + v.entries.map(([k, x]) => goJSONString(k) + ':' + encode(x, depth + 1)).join(',') + '}';
  }
  if (Array.isArray(v)) return '[' + v.map((x) => encode(x, depth + 1)).join(',') + ']';
  const obj = v as Record<string, unknown>;
  return '{' + sortedKeys(obj).map((k) => goJSONString(k) + ':' + encode(obj[k], depth + 1)).join(',') + '}';
}

const SHORT: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export function goJSONString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    const c = s.charCodeAt(i);
    if (SHORT[ch] !== undefined) out += SHORT[ch];
    else if (c < 0x20 || ch === '<' || ch === '>' || ch === '&' || c === 0x2028 || c === 0x2029) {
      out += '\\u' + c.toString(16).padStart(4, '0');
    } else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) < 0xe000) {
      out += ch + s[++i]; // a surrogate pair: one astral character
    } else if (c >= 0xd800 && c < 0xe000) {
      out += '\ufffd'; // a lone surrogate is not text; Go would have decoded it to U+FFFD
    } else out += ch;
  }
  return out + '"';
}
