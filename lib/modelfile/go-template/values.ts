// How JavaScript values stand in for Go values inside the template engine.
// Invariant: the mapping is fixed and total. A plain object is a Go map[string]any (keys read as fields, missing
// keys read as nil, ranged in sorted key order); an object tagged with goStruct() is a Go struct (a missing field
// is an error); arrays are slices; strings, numbers and booleans are themselves; null is a nil interface and
// undefined is Go's "no value". A value may carry a String() (fmt.Stringer) and a MarshalJSON stand-in through
// the two symbols below; printing and the json function honour them exactly where Go would.

/** Marks a Go struct; the value is the struct's type name (used in error messages). */
export const GO_STRUCT: unique symbol = Symbol.for('spindle.go.struct') as never;
/** fmt.Stringer: what `{{ x }}` prints for this value. */
export const GO_STRING: unique symbol = Symbol.for('spindle.go.String') as never;
/** json.Marshaler: the value json.Marshal encodes instead of this one (may be a JSONObject for field order). */
export const GO_JSON: unique symbol = Symbol.for('spindle.go.MarshalJSON') as never;

interface Hooks {
  string?: () => string;
  json?: () => unknown;
}

function attach<T extends object>(value: T, hooks: Hooks): T {
  if (hooks.string) Object.defineProperty(value, GO_STRING, { value: hooks.string, enumerable: false });
  if (hooks.json) Object.defineProperty(value, GO_JSON, { value: hooks.json, enumerable: false });
  return value;
}

/** A Go struct value of type `typeName` with the given exported fields (insertion order = declaration order). */
export function goStruct<T extends object>(typeName: string, fields: T, hooks: Hooks = {}): T {
  Object.defineProperty(fields, GO_STRUCT, { value: typeName, enumerable: false });
  return attach(fields, hooks);
}

/** A map or slice of a named Go type with a String() and/or MarshalJSON method. */
export function goNamed<T extends object>(value: T, hooks: Hooks): T {
  return attach(value, hooks);
}

/** An object whose JSON keys keep insertion order (a Go struct or an ordered map), for GO_JSON hooks. */
export class JSONObject {
  constructor(readonly entries: ReadonlyArray<readonly [string, unknown]>) {}
}

export function isGoStruct(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && GO_STRUCT in v;
}

/** A Go map: any non-null, non-array object that is not a struct. */
export function isGoMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(GO_STRUCT in v);
}

export function stringerOf(v: unknown): (() => string) | undefined {
  if (typeof v === 'object' && v !== null && GO_STRING in v) return (v as { [GO_STRING]: () => string })[GO_STRING];
  return undefined;
}

/** Go's notion of truth (text/template isTrue): empty string, 0, false, nil, empty slice or map are false. */
export function isTrue(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'bigint') return v !== 0n;
  if (typeof v === 'string') return v.length > 0;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'function') return true;
  if (isGoStruct(v)) return true;
  return Object.keys(v as object).length > 0;
}

/** The Go type name a value stands for, as Go's error messages print it. */
export function goTypeName(v: unknown): string {
  if (v === undefined || v === null) return '<nil>';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float64';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'function') return 'func';
  if (Array.isArray(v)) return '[]interface {}';
  if (isGoStruct(v)) return (v as { [GO_STRUCT]: string })[GO_STRUCT];
  return 'map[string]interface {}';
}

/** Map keys in Go's order (byte-wise UTF-8, which is code point order). */
export function sortedKeys(obj: object): string[] {
  return Object.keys(obj).sort(compareCodePoints);
}

export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}
