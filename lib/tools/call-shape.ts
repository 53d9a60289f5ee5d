// Turns a parsed call (a JSON `{"name", "arguments"|"parameters"}` object or a Python call) into a
// ParsedToolCall. Invariant: returns null rather than a call whose name is not a non-empty string or whose
// arguments are not an object, so malformed calls fall back to content.
import { parseJsonText, scanJson } from './json-scan.js';
import { isJsonObject, stringifyJson, type JsonValue } from './json-value.js';
import type { PyCall } from './python-scan.js';
import type { ScanResult } from './scan.js';
import type { ParsedToolCall } from './types.js';

export interface ObjectCallOptions {
  /** Keys that may hold the arguments, in order of preference. */
  argumentKeys: readonly string[];
  /** When false, a missing or null arguments value means `{}`. */
  requireArguments: boolean;
}

export function callFromObject(v: JsonValue, opts: ObjectCallOptions): ParsedToolCall | null {
  if (!isJsonObject(v)) return null;
  const name = v.get('name');
  if (typeof name !== 'string' || name === '') return null;
  const key = opts.argumentKeys.find((k) => v.has(k));
  let args = key === undefined ? undefined : v.get(key);
  if (args === undefined || args === null) {
    if (opts.requireArguments) return null;
    return { name, arguments: '{}' };
  }
  // Some models (Granite, some Qwen fine-tunes) write the arguments already serialized, as a JSON string.
  if (typeof args === 'string') args = parseJsonText(args);
  if (args === undefined || !isJsonObject(args)) return null;
  return { name, arguments: stringifyJson(args) };
}

/** A JSON call object, or a non-empty array of them, scanned from `pos` (lfm2's and mistral's JSON forms); an
 * element that is no call is an error for the whole value. */
export function scanJsonCalls(text: string, pos: number, opts: ObjectCallOptions): ScanResult<ParsedToolCall[]> {
  const r = scanJson(text, pos);
  if (r.status !== 'done') return r;
  const items = Array.isArray(r.value) ? r.value : [r.value];
  const calls: ParsedToolCall[] = [];
  for (const item of items) {
    const c = callFromObject(item, opts);
    if (!c) return { status: 'error' };
    calls.push(c);
  }
  return calls.length ? { status: 'done', value: calls, end: r.end } : { status: 'error' };
}

export function callFromPython(c: PyCall): ParsedToolCall {
  return { name: c.name, arguments: stringifyJson(c.args) };
}
