// Intersections of JSON Schemas (allOf, and $ref / anyOf next to other keywords) folded into one schema.
// Invariant: the result accepts exactly the values every member accepts, or is `false` when that is provably
// empty; keyword pairs that cannot be intersected exactly (two different patterns, formats or prefixItems)
// are refused, never approximated. Nested intersections are left as {allOf: [...]} for the compiler.
import { StructuredOutputError } from './gbnf.js';
import {
  checkKeywords, constraining, describe, has, isPlainObject, jsonEqual, pointer, schemaError, typeSet,
  type Schema, type SchemaObject,
} from './schema-keywords.js';

/** Resolves a `$ref` value met at `path` to the schema it names and that schema's path. */
export type RefResolver = (ref: unknown, path: readonly string[]) => { schema: unknown; path: string[] };

const MAX_INLINE_DEPTH = 32;
const MAX_ANYOF_PRODUCT = 64;
const LOWER = new Set(['minimum', 'exclusiveMinimum', 'minLength', 'minItems']);
const UPPER = new Set(['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems']);

function arrayOf(s: SchemaObject, key: string, path: readonly string[]): unknown[] {
  const v = s[key];
  if (!Array.isArray(v)) throw schemaError([...path, key], `${key} must be an array, got ${describe(v)}`);
  return v;
}

function objectOf(s: SchemaObject, key: string, path: readonly string[]): SchemaObject {
  const v = s[key];
  if (!isPlainObject(v)) throw schemaError([...path, key], `${key} must be an object, got ${describe(v)}`);
  return v;
}

/**
 * `s` with its own `$ref` and `allOf` folded in (the target / members intersected with the rest); `oneOf` is
 * read as `anyOf`. Keywords of every part are checked at their own paths.
 */
export function flattenSchema(s: unknown, path: readonly string[], resolve: RefResolver, depth = 0): Schema {
  checkKeywords(s, path);
  if (typeof s === 'boolean') return s;
  if (depth > MAX_INLINE_DEPTH) {
    throw new StructuredOutputError(
      `JSON Schema at ${pointer(path)}: $ref chain nested more than ${MAX_INLINE_DEPTH} deep while intersecting ` +
      `schemas (a recursive $ref can only be used alone, not inside allOf or next to other keywords)`);
  }
  // order of the parts = order of the merged properties: $ref target, allOf members, own keywords, oneOf
  const parts: Schema[] = [];
  if (has(s, '$ref')) {
    const target = resolve(s.$ref, path);
    parts.push(flattenSchema(target.schema, target.path, resolve, depth + 1));
  }
  if (has(s, 'allOf')) {
    const members = arrayOf(s, 'allOf', path);
    if (members.length === 0) throw schemaError([...path, 'allOf'], 'allOf must not be empty');
    members.forEach((m, i) => parts.push(flattenSchema(m, [...path, 'allOf', String(i)], resolve, depth + 1)));
  }
  const rest: SchemaObject = {};
  for (const k of constraining(s)) if (k !== '$ref' && k !== 'allOf' && k !== 'oneOf') rest[k] = s[k];
  parts.push(rest);
  if (has(s, 'oneOf')) {
    const alts = arrayOf(s, 'oneOf', path);
    if (alts.length === 0) throw schemaError([...path, 'oneOf'], 'oneOf must not be empty');
    parts.push({ anyOf: alts });
  }
  return parts.reduce((a, b) => intersect(a, b, path));
}

/** The intersection of two flattened schemas (no $ref / allOf / oneOf at their top level). */
export function intersect(a: Schema, b: Schema, path: readonly string[]): Schema {
  if (a === true) return b;
  if (b === true) return a;
  if (a === false || b === false) return false;
  const out: SchemaObject = { ...a };
  for (const k of Object.keys(b)) {
    if (!has(out, k) || jsonEqual(out[k], b[k])) {
      out[k] = b[k];
      continue;
    }
    const x = out[k], y = b[k];
    if (k === 'type') {
      const tx = typeSet(a, path)!, ty = typeSet(b, path)!;
      const both = [...tx].filter((t) => ty.has(t));
      if (both.length === 0) return false;
      out.type = both;
    } else if (k === 'required') {
      const rx = arrayOf(a, k, path), ry = arrayOf(b, k, path);
      out.required = [...new Set([...rx, ...ry])];
    } else if (k === 'properties') {
      const px = objectOf(a, k, path), py = objectOf(b, k, path);
      const merged: SchemaObject = { ...px };
      for (const p of Object.keys(py)) merged[p] = has(px, p) ? { allOf: [px[p], py[p]] } : py[p];
      out.properties = merged;
    } else if (LOWER.has(k) || UPPER.has(k)) {
      if (typeof x !== 'number' || typeof y !== 'number') {
        throw schemaError([...path, k], `${k} must be a number, got ${describe(typeof x !== 'number' ? x : y)}`);
      }
      out[k] = LOWER.has(k) ? Math.max(x, y) : Math.min(x, y);
    } else if (k === 'enum') {
      const ex = arrayOf(a, k, path), ey = arrayOf(b, k, path);
      const both = ex.filter((v) => ey.some((w) => jsonEqual(v, w)));
      if (both.length === 0) return false;
      out.enum = both;
    } else if (k === 'const') {
      return false; // two different constants
    } else if (k === 'items' || k === 'additionalProperties') {
      out[k] = { allOf: [x, y] };
    } else if (k === 'anyOf') {
      const ax = arrayOf(a, k, path), ay = arrayOf(b, k, path);
      if (ax.length * ay.length > MAX_ANYOF_PRODUCT) {
        throw new StructuredOutputError(
          `JSON Schema at ${pointer(path)}: intersecting two anyOf lists of ${ax.length} and ${ay.length} ` +
          `branches would make more than ${MAX_ANYOF_PRODUCT} branches`);
      }
      out.anyOf = ax.flatMap((p) => ay.map((q) => ({ allOf: [p, q] })));
    } else {
      throw new StructuredOutputError(
        `JSON Schema at ${pointer(path)}: cannot intersect two different '${k}' values (allOf, or $ref / anyOf ` +
        `next to other keywords); keywords that can be intersected: type, required, properties, enum, const, ` +
        `items, additionalProperties, anyOf, and the numeric / length / count bounds`);
    }
  }
  // additionalProperties of one side also constrains the properties only the other side declares
  if (has(out, 'properties') && (has(a, 'additionalProperties') || has(b, 'additionalProperties'))) {
    const props = { ...(out.properties as SchemaObject) };
    for (const p of Object.keys(props)) {
      const extra = [a, b]
        .filter((side) => has(side, 'additionalProperties') && !(isPlainObject(side.properties) && has(side.properties, p)))
        .map((side) => side.additionalProperties);
      if (extra.length > 0) props[p] = { allOf: [props[p], ...extra] };
    }
    out.properties = props;
  }
  return out;
}
