// Parsed argument values (from JSON or Python literals) and their serialization to compact JSON text.
// Invariant: stringifyJson writes what JSON.stringify would for the same value, except that object keys keep
// their source order and integers keep all their digits (no float rounding of big ids).

/** A number kept as canonical JSON text (see jsonNumberText / the Python literal parser). */
export class JsonNumber {
  constructor(readonly text: string) {}
}

/** Objects are Maps: source key order, last duplicate wins (as JSON.parse and Python dicts do). */
export type JsonObject = Map<string, JsonValue>;
export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;

export function isJsonObject(v: JsonValue | undefined): v is JsonObject {
  return v instanceof Map;
}

/** Canonical text of a JSON number literal: integers exact, other numbers as JSON.stringify writes them. */
export function jsonNumberText(raw: string): string {
  if (/^-?\d+$/.test(raw)) return BigInt(raw).toString();
  const n = Number(raw);
  return Number.isFinite(n) ? JSON.stringify(n) : raw;
}

export function stringifyJson(v: JsonValue): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'string') return JSON.stringify(v);
  if (v instanceof JsonNumber) return v.text;
  if (Array.isArray(v)) return `[${v.map(stringifyJson).join(',')}]`;
  const parts: string[] = [];
  for (const [k, val] of v) parts.push(`${JSON.stringify(k)}:${stringifyJson(val)}`);
  return `{${parts.join(',')}}`;
}
