// The JSON Schema keywords the compiler knows, JSON pointers for messages, and small value helpers.
// Invariant: every keyword is in exactly one class: annotation (ignored), container ($defs, definitions:
// read only through $ref), or constraining (compiled); any other keyword is refused by checkKeywords with
// its JSON pointer, never ignored.
import { StructuredOutputError } from './gbnf.js';

export type SchemaObject = Record<string, unknown>;
export type Schema = boolean | SchemaObject;

export const ANNOTATIONS: ReadonlySet<string> = new Set([
  'title', 'description', 'default', 'examples', '$schema', '$id', '$comment', 'deprecated', 'readOnly', 'writeOnly',
]);
export const CONTAINERS: ReadonlySet<string> = new Set(['$defs', 'definitions']);

export const OBJECT_KEYWORDS = ['properties', 'required', 'additionalProperties'] as const;
export const ARRAY_KEYWORDS = ['items', 'prefixItems', 'minItems', 'maxItems'] as const;
export const STRING_KEYWORDS = ['minLength', 'maxLength', 'format', 'pattern'] as const;
export const NUMBER_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'] as const;
export const GENERIC_KEYWORDS = ['type', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', '$ref'] as const;

export const CONSTRAINING: ReadonlySet<string> = new Set([
  ...GENERIC_KEYWORDS, ...OBJECT_KEYWORDS, ...ARRAY_KEYWORDS, ...STRING_KEYWORDS, ...NUMBER_KEYWORDS,
]);

export const TYPE_NAMES = ['null', 'boolean', 'object', 'array', 'number', 'integer', 'string'] as const;
export type TypeName = (typeof TYPE_NAMES)[number];

const SUPPORTED_LIST = [...CONSTRAINING, '$defs', 'definitions'].join(', ');

/** RFC 6901 pointer for messages; the root is `/`. */
export function pointer(path: readonly string[]): string {
  if (path.length === 0) return '/';
  return path.map((s) => '/' + s.replace(/~/g, '~0').replace(/\//g, '~1')).join('');
}

export function schemaError(path: readonly string[], what: string): StructuredOutputError {
  return new StructuredOutputError(`invalid JSON Schema at ${pointer(path)}: ${what}`);
}

export function isPlainObject(v: unknown): v is SchemaObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function has(o: SchemaObject, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, key);
}

/** Refuses a value that is not a schema, and any keyword outside the known classes (all of them at once). */
export function checkKeywords(s: unknown, path: readonly string[]): asserts s is Schema {
  if (typeof s === 'boolean') return;
  if (!isPlainObject(s)) {
    throw schemaError(path, `a schema must be an object or a boolean, got ${describe(s)}`);
  }
  const bad = Object.keys(s).filter((k) => !ANNOTATIONS.has(k) && !CONTAINERS.has(k) && !CONSTRAINING.has(k));
  if (bad.length > 0) {
    const names = bad.map((k) => `'${k}'`).join(', ');
    throw new StructuredOutputError(
      `unsupported JSON Schema keyword${bad.length > 1 ? 's' : ''} ${names} at ${pointer(path)} ` +
      `(supported: ${SUPPORTED_LIST}; ignored annotations: ${[...ANNOTATIONS].join(', ')})`);
  }
}

/** The constraining keywords of a schema object (annotations and containers dropped). */
export function constraining(s: SchemaObject): string[] {
  return Object.keys(s).filter((k) => CONSTRAINING.has(k));
}

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v)}`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

/** JSON equality (object key order ignored), as enum / const compare values. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]));
  }
  const ao = a as SchemaObject, bo = b as SchemaObject;
  const ak = Object.keys(ao), bk = Object.keys(bo);
  return ak.length === bk.length && ak.every((k) => has(bo, k) && jsonEqual(ao[k], bo[k]));
}

/** The JSON type of a JSON value; numbers with no fraction are 'integer'. */
export function jsonTypeOf(v: unknown): TypeName | null {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number') return Number.isFinite(v) ? (Number.isInteger(v) ? 'integer' : 'number') : null;
  if (Array.isArray(v)) return 'array';
  if (isPlainObject(v)) return 'object';
  return null;
}

/** The `type` keyword as a set (integer included by number); undefined when absent. */
export function typeSet(s: SchemaObject, path: readonly string[]): Set<TypeName> | undefined {
  if (!has(s, 'type')) return undefined;
  const t = s.type;
  const list = Array.isArray(t) ? t : [t];
  if (list.length === 0) throw schemaError([...path, 'type'], 'type must not be an empty array');
  const out = new Set<TypeName>();
  for (const name of list) {
    if (typeof name !== 'string' || !(TYPE_NAMES as readonly string[]).includes(name)) {
      throw schemaError([...path, 'type'], `unknown type ${describe(name)} (allowed: ${TYPE_NAMES.join(', ')})`);
    }
    out.add(name as TypeName);
  }
  if (out.has('number')) out.add('integer');
  return out;
}

/** A non-negative integer keyword value (minItems, maxLength, ...). */
export function countKeyword(s: SchemaObject, key: string, path: readonly string[]): number | undefined {
  if (!has(s, key)) return undefined;
  const v = s[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
    throw schemaError([...path, key], `${key} must be a non-negative integer, got ${describe(v)}`);
  }
  return v;
}

/** A finite number keyword value (minimum, exclusiveMaximum, ...). */
export function numberKeyword(s: SchemaObject, key: string, path: readonly string[]): number | undefined {
  if (!has(s, key)) return undefined;
  const v = s[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw schemaError([...path, key], `${key} must be a number (draft 2020-12), got ${describe(v)}`);
  }
  return v;
}
