// JSON Schema (a draft 2020-12 subset) -> GBNF matching the JSON texts of the values the schema accepts.
// Invariant: every accepted text is valid for the schema, and unsupported keywords / invalid schemas throw
// StructuredOutputError with their JSON pointer. Deliberate narrowings (documented choices, as in vLLM /
// xgrammar / llama.cpp): members are written in `properties` order (required ones always, optional ones may be
// left out), extra members after them; additionalProperties absent = false when `properties` is given (strict,
// like xgrammar), else any; `items` absent after `prefixItems` = no extra items; `pattern` matches the whole
// string (as if ^...$); a schema with no `type` is limited to the types its keywords imply; oneOf is read as
// anyOf; numbers are written canonically (see json-value.ts, numeric.ts, formats.ts); whitespace is bounded.
import { GrammarBuilder, StructuredOutputError, charClass, codePoints, literal, repeat } from './gbnf.js';
import { FORMAT_LENGTHS, formatRule, isSupportedFormat, SUPPORTED_FORMATS } from './formats.js';
import {
  jsonArrayRule, jsonBooleanRule, jsonCharRule, jsonIntegerRule, jsonNullRule, jsonNumberRule, jsonObjectRule,
  jsonStringRule, jsonValueRule, sepExpr, wsRule,
} from './json-value.js';
import { integerRange, numberRange, type Bound } from './numeric.js';
import { parseRegex, regexLengthRange, regexToGbnf } from './regex.js';
import {
  ARRAY_KEYWORDS, NUMBER_KEYWORDS, OBJECT_KEYWORDS, STRING_KEYWORDS, TYPE_NAMES, checkKeywords, constraining,
  countKeyword, describe, has, isPlainObject, jsonEqual, jsonTypeOf, numberKeyword, pointer, schemaError, typeSet,
  type Schema, type SchemaObject, type TypeName,
} from './schema-keywords.js';
import { flattenSchema } from './schema-merge.js';

type Path = readonly string[];
/** $ref targets reached from the current rule without passing through an object member or array item. */
type Direct = ReadonlySet<string>;
const NO_DIRECT: Direct = new Set();

const FAMILY: ReadonlyArray<readonly [TypeName, readonly string[]]> = [
  ['object', OBJECT_KEYWORDS], ['array', ARRAY_KEYWORDS], ['string', STRING_KEYWORDS], ['number', NUMBER_KEYWORDS],
];

class SchemaCompiler {
  private readonly refRules = new Map<string, string>(); // JSON pointer of a $ref target -> rule name

  constructor(private readonly b: GrammarBuilder, private readonly root: unknown) {}

  /** A rule matching the JSON texts `s` accepts. */
  compile(s: unknown, path: Path, hint: string, direct: Direct): string {
    checkKeywords(s, path);
    if (s === true) return jsonValueRule(this.b);
    if (s === false) throw schemaError(path, 'the schema `false` accepts no value');
    const keys = constraining(s);
    if (keys.length === 0) return jsonValueRule(this.b);
    if (has(s, '$ref') && keys.length === 1) return this.ref(s.$ref, path, direct);
    if (has(s, '$ref') || has(s, 'allOf') || has(s, 'oneOf')) {
      const flat = flattenSchema(s, path, this.resolve);
      if (flat === false) throw schemaError(path, 'no value satisfies all of the combined schemas (allOf / $ref)');
      return this.compile(flat, path, hint, direct);
    }
    if (has(s, 'anyOf')) return this.anyOf(s, path, hint, direct);
    return this.plain(s, path, hint);
  }

  private readonly resolve = (ref: unknown, path: Path): { schema: unknown; path: string[] } => {
    if (typeof ref !== 'string') throw schemaError([...path, '$ref'], `$ref must be a string, got ${describe(ref)}`);
    if (!ref.startsWith('#')) {
      throw new StructuredOutputError(
        `unsupported $ref '${ref}' at ${pointer(path)}: only references inside the schema are supported ` +
        `('#', '#/$defs/name', '#/definitions/name' or another '#/...' JSON pointer)`);
    }
    let frag: string;
    try {
      frag = decodeURIComponent(ref.slice(1));
    } catch {
      throw schemaError([...path, '$ref'], `$ref '${ref}' is not a valid URI fragment`);
    }
    if (frag !== '' && !frag.startsWith('/')) {
      throw new StructuredOutputError(`unsupported $ref '${ref}' at ${pointer(path)}: anchors are not supported, only JSON pointers ('#/...')`);
    }
    const segs = frag === '' ? [] : frag.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
    let node: unknown = this.root;
    for (const seg of segs) {
      const next = Array.isArray(node) ? (/^(0|[1-9][0-9]*)$/.test(seg) ? node[Number(seg)] : undefined)
        : isPlainObject(node) && has(node, seg) ? node[seg] : undefined;
      if (next === undefined) throw schemaError([...path, '$ref'], `$ref '${ref}' does not resolve (nothing at ${pointer(segs)})`);
      node = next;
    }
    return { schema: node, path: segs };
  };

  /** A rule for a `$ref` alone: one rule per target, so recursive schemas become recursive rules. */
  private ref(ref: unknown, path: Path, direct: Direct): string {
    const target = this.resolve(ref, path);
    const key = pointer(target.path);
    if (direct.has(key)) {
      throw schemaError(path, `$ref '${String(ref)}' refers back to itself without nesting inside an object or array (the schema is circular)`);
    }
    const known = this.refRules.get(key);
    if (known !== undefined) return known;
    const name = this.b.reserve(`ref-${target.path[target.path.length - 1] ?? 'root'}`);
    this.refRules.set(key, name);
    this.b.define(name, this.compile(target.schema, target.path, name, new Set([...direct, key])));
    return name;
  }

  private anyOf(s: SchemaObject, path: Path, hint: string, direct: Direct): string {
    const alts = s.anyOf;
    if (!Array.isArray(alts) || alts.length === 0) throw schemaError([...path, 'anyOf'], 'anyOf must be a non-empty array of schemas');
    const siblings: SchemaObject = {};
    for (const k of constraining(s)) if (k !== 'anyOf') siblings[k] = s[k];
    const rules: string[] = [];
    alts.forEach((alt, i) => {
      const p = [...path, 'anyOf', String(i)];
      checkKeywords(alt, p);
      let branch: Schema = alt;
      if (Object.keys(siblings).length > 0) branch = flattenSchema({ allOf: [siblings, alt] }, p, this.resolve);
      if (branch === false) return; // a branch that accepts nothing adds nothing
      rules.push(this.compile(branch, p, `${hint}-${i}`, direct));
    });
    if (rules.length === 0) throw schemaError(path, 'no anyOf branch accepts any value');
    const unique = [...new Set(rules)];
    return unique.length === 1 ? unique[0] : this.b.rule(hint, unique.join(' | '));
  }

  /** Types a schema without combinators allows: `type`, else those its keywords imply, else all. */
  private types(s: SchemaObject, path: Path): Set<TypeName> {
    const declared = typeSet(s, path);
    if (declared) return declared;
    const implied = new Set<TypeName>();
    for (const [type, words] of FAMILY) if (words.some((w) => has(s, w))) implied.add(type);
    if (implied.has('number')) implied.add('integer');
    return implied.size > 0 ? implied : new Set(TYPE_NAMES);
  }

  private plain(s: SchemaObject, path: Path, hint: string): string {
    const types = this.types(s, path);
    if (has(s, 'enum') || has(s, 'const')) return this.values(s, types, path, hint);
    const alts: string[] = [];
    if (types.has('null')) alts.push(jsonNullRule(this.b));
    if (types.has('boolean')) alts.push(jsonBooleanRule(this.b));
    if (types.has('number')) alts.push(this.number(s, path, hint));
    else if (types.has('integer')) alts.push(this.integer(s, path, hint));
    if (types.has('string')) alts.push(this.string(s, path, hint));
    if (types.has('array')) alts.push(this.array(s, path, hint));
    if (types.has('object')) alts.push(this.object(s, path, hint));
    return alts.length === 1 ? alts[0] : this.b.rule(hint, alts.join(' | '));
  }

  /** enum / const: the listed values of the allowed types, each as JSON text with optional whitespace. */
  private values(s: SchemaObject, types: Set<TypeName>, path: Path, hint: string): string {
    const others = constraining(s).filter((k) => k !== 'enum' && k !== 'const' && k !== 'type');
    if (others.length > 0) {
      throw new StructuredOutputError(
        `JSON Schema at ${pointer(path)}: 'enum' / 'const' combined with ${others.map((k) => `'${k}'`).join(', ')} ` +
        `is not supported (only 'type' may accompany them)`);
    }
    let values: unknown[];
    if (has(s, 'enum')) {
      if (!Array.isArray(s.enum) || s.enum.length === 0) throw schemaError([...path, 'enum'], 'enum must be a non-empty array');
      values = s.enum;
      if (has(s, 'const')) values = values.filter((v) => jsonEqual(v, s.const));
    } else {
      values = [s.const];
    }
    values.forEach((v, i) => {
      if (jsonTypeOf(v) === null) throw schemaError(has(s, 'enum') ? [...path, 'enum', String(i)] : [...path, 'const'], `not a JSON value: ${describe(v)}`);
    });
    const kept = values.filter((v) => types.has(jsonTypeOf(v)!));
    if (kept.length === 0) throw schemaError(path, 'no value of enum / const has an allowed type');
    const texts = [...new Set(kept.map((v) => this.valueExpr(v)))];
    return this.b.rule(`${hint}-value`, texts.join(' | '));
  }

  /** One JSON value as GBNF, with optional whitespace between tokens. */
  private valueExpr(v: unknown): string {
    if (Array.isArray(v)) {
      const ws = wsRule(this.b);
      if (v.length === 0) return `"[" ${ws} "]"`;
      return `("[" ${ws} ${v.map((x) => this.valueExpr(x)).join(` ${sepExpr(this.b)} `)} ${ws} "]")`;
    }
    if (isPlainObject(v)) {
      const ws = wsRule(this.b);
      const keys = Object.keys(v);
      if (keys.length === 0) return `"{" ${ws} "}"`;
      const members = keys.map((k) => `${literal(JSON.stringify(k))} ${ws} ":" ${ws} ${this.valueExpr(v[k])}`);
      return `("{" ${ws} ${members.join(` ${sepExpr(this.b)} `)} ${ws} "}")`;
    }
    return literal(JSON.stringify(v));
  }

  private integer(s: SchemaObject, path: Path, hint: string): string {
    const min = numberKeyword(s, 'minimum', path), max = numberKeyword(s, 'maximum', path);
    const xmin = numberKeyword(s, 'exclusiveMinimum', path), xmax = numberKeyword(s, 'exclusiveMaximum', path);
    if (min === undefined && max === undefined && xmin === undefined && xmax === undefined) return jsonIntegerRule(this.b);
    const los = [min === undefined ? null : Math.ceil(min), xmin === undefined ? null : Math.floor(xmin) + 1];
    const his = [max === undefined ? null : Math.floor(max), xmax === undefined ? null : Math.ceil(xmax) - 1];
    const lo = los.reduce<number | null>((a, v) => (v === null ? a : a === null ? v : Math.max(a, v)), null);
    const hi = his.reduce<number | null>((a, v) => (v === null ? a : a === null ? v : Math.min(a, v)), null);
    const expr = integerRange(lo === null ? null : BigInt(lo), hi === null ? null : BigInt(hi));
    if (expr === null) throw schemaError(path, `no integer satisfies the bounds (${this.boundsText(s)})`);
    return this.b.rule(`${hint}-int`, expr);
  }

  private number(s: SchemaObject, path: Path, hint: string): string {
    const bound = (incl: string, excl: string, lower: boolean): Bound | null => {
      const a = numberKeyword(s, incl, path), x = numberKeyword(s, excl, path);
      if (a === undefined && x === undefined) return null;
      // the tighter of the two; at equal values the exclusive one
      let v: number, exclusive: boolean, key: string;
      if (a === undefined || (x !== undefined && (lower ? x >= a : x <= a))) { v = x!; exclusive = true; key = excl; }
      else { v = a; exclusive = false; key = incl; }
      if (!Number.isInteger(v)) {
        throw new StructuredOutputError(
          `unsupported JSON Schema bound '${key}: ${v}' for type number at ${pointer(path)}: only integer bounds ` +
          `can be expressed exactly (integer bounds, or type integer, are supported)`);
      }
      return { value: BigInt(v), exclusive };
    };
    const lo = bound('minimum', 'exclusiveMinimum', true), hi = bound('maximum', 'exclusiveMaximum', false);
    if (lo === null && hi === null) return jsonNumberRule(this.b);
    const expr = numberRange(lo, hi);
    if (expr === null) throw schemaError(path, `no number satisfies the bounds (${this.boundsText(s)})`);
    return this.b.rule(`${hint}-num`, expr);
  }

  private boundsText(s: SchemaObject): string {
    return NUMBER_KEYWORDS.filter((k) => has(s, k)).map((k) => `${k}: ${String(s[k])}`).join(', ');
  }

  private string(s: SchemaObject, path: Path, hint: string): string {
    const minLen = countKeyword(s, 'minLength', path), maxLen = countKeyword(s, 'maxLength', path);
    if (minLen !== undefined && maxLen !== undefined && minLen > maxLen) {
      throw schemaError(path, `minLength ${minLen} is greater than maxLength ${maxLen}`);
    }
    const lo = minLen ?? 0, hi = maxLen ?? Infinity;
    let special: { what: string; lengths: readonly [number, number] | null; rule: () => string } | null = null;
    if (has(s, 'format')) {
      const f = s.format;
      if (typeof f !== 'string') throw schemaError([...path, 'format'], `format must be a string, got ${describe(f)}`);
      if (!isSupportedFormat(f)) {
        throw new StructuredOutputError(
          `unsupported string format '${f}' at ${pointer(path)} (supported: ${SUPPORTED_FORMATS.join(', ')})`);
      }
      special = { what: `format '${f}'`, lengths: FORMAT_LENGTHS[f], rule: () => formatRule(this.b, f) };
    }
    if (has(s, 'pattern')) {
      const p = s.pattern;
      if (typeof p !== 'string') throw schemaError([...path, 'pattern'], `pattern must be a string, got ${describe(p)}`);
      if (special) {
        throw new StructuredOutputError(`JSON Schema at ${pointer(path)}: 'pattern' together with 'format' is not supported`);
      }
      let tree;
      try {
        tree = parseRegex(p);
      } catch (e) {
        if (e instanceof StructuredOutputError) {
          throw new StructuredOutputError(`unsupported or invalid pattern at ${pointer([...path, 'pattern'])}: ${e.message}`);
        }
        throw e;
      }
      special = {
        what: 'pattern',
        lengths: regexLengthRange(tree),
        rule: () => this.b.rule(`${hint}-pattern`, `"\\"" ${regexToGbnf(tree, true)} "\\""`),
      };
    }
    if (special) {
      // minLength / maxLength can stay only when every string of the format / pattern already fits them
      const [a, z] = special.lengths ?? [0, 0];
      if (special.lengths !== null && (a < lo || z > hi)) {
        throw new StructuredOutputError(
          `JSON Schema at ${pointer(path)}: ${special.what} combined with minLength / maxLength is only supported ` +
          `when every string it matches already has an allowed length (it matches ${a}..${z === Infinity ? '∞' : z} ` +
          `characters; allowed ${lo}..${hi === Infinity ? '∞' : hi})`);
      }
      return special.rule();
    }
    if (lo === 0 && hi === Infinity) return jsonStringRule(this.b);
    return this.b.rule(`${hint}-string`, `"\\"" ${repeat(jsonCharRule(this.b), lo, hi)} "\\""`);
  }

  private array(s: SchemaObject, path: Path, hint: string): string {
    const b = this.b;
    const prefix = has(s, 'prefixItems') ? s.prefixItems : [];
    if (!Array.isArray(prefix)) throw schemaError([...path, 'prefixItems'], `prefixItems must be an array of schemas, got ${describe(prefix)}`);
    let items: unknown = has(s, 'items') ? s.items : !has(s, 'prefixItems');
    if (Array.isArray(items)) {
      throw schemaError([...path, 'items'], 'items must be a schema (draft 2020-12); write tuples with prefixItems');
    }
    checkKeywords(items, [...path, 'items']);
    if (isPlainObject(items) && constraining(items).length === 0) items = true;
    const minItems = countKeyword(s, 'minItems', path) ?? 0;
    let max = countKeyword(s, 'maxItems', path) ?? Infinity;
    if (minItems > max) throw schemaError(path, `minItems ${minItems} is greater than maxItems ${max}`);
    const falseAt = prefix.findIndex((p) => p === false);
    if (falseAt >= 0) max = Math.min(max, falseAt);
    if (items === false) max = Math.min(max, prefix.length);
    if (minItems > max) {
      throw schemaError(path, `no array satisfies minItems ${minItems}: at most ${max} items are allowed (prefixItems / items)`);
    }
    if (prefix.length === 0 && items === true && minItems === 0 && max === Infinity) return jsonArrayRule(b);
    const ws = wsRule(b), sep = sepExpr(b);
    if (max === 0) return b.rule(`${hint}-array`, `"[" ${ws} "]"`);
    const nPrefix = Math.min(prefix.length, max);
    const prefixRules = prefix.slice(0, nPrefix).map((p, i) =>
      this.compile(p, [...path, 'prefixItems', String(i)], `${hint}-${i}`, NO_DIRECT));
    const itemRule = max > prefix.length && items !== false ? this.compile(items, [...path, 'items'], `${hint}-item`, NO_DIRECT) : null;
    // the items after the first k (k >= 1 present so far)
    const tail = (k: number): string => {
      if (k >= max) return '';
      if (k >= nPrefix) return itemRule ? repeat(`${sep} ${itemRule}`, Math.max(minItems - k, 0), max - k) : '';
      const rest = tail(k + 1);
      const core = `${sep} ${prefixRules[k]}${rest ? ' ' + rest : ''}`;
      return k + 1 <= minItems ? core : `(${core})?`;
    };
    const first = nPrefix > 0 ? prefixRules[0] : itemRule!;
    const t = tail(1);
    const content = t ? `${first} ${t}` : first;
    const body = minItems >= 1 ? `"[" ${ws} ${content} ${ws} "]"` : `"[" ${ws} (${content} ${ws})? "]"`;
    return b.rule(`${hint}-array`, body);
  }

  private object(s: SchemaObject, path: Path, hint: string): string {
    const b = this.b;
    const props = has(s, 'properties') ? s.properties : {};
    if (!isPlainObject(props)) throw schemaError([...path, 'properties'], `properties must be an object of schemas, got ${describe(props)}`);
    const reqList = has(s, 'required') ? s.required : [];
    if (!Array.isArray(reqList) || reqList.some((r) => typeof r !== 'string')) {
      throw schemaError([...path, 'required'], `required must be an array of strings, got ${describe(reqList)}`);
    }
    const required = new Set(reqList as string[]);
    const addlDefault = !has(s, 'properties'); // strict: no extra members when properties are listed
    let addl: unknown = has(s, 'additionalProperties') ? s.additionalProperties : addlDefault;
    checkKeywords(addl, [...path, 'additionalProperties']);
    if (isPlainObject(addl) && constraining(addl).length === 0) addl = true;
    if (!has(s, 'properties') && required.size === 0 && addl === true) return jsonObjectRule(b);

    const ws = wsRule(b), sep = sepExpr(b);
    const members: { name: string; kv: string; required: boolean }[] = [];
    const kvRule = (name: string, value: string) =>
      b.rule(`${hint}-${name}-kv`, `${literal(JSON.stringify(name))} ${ws} ":" ${ws} ${value}`);
    for (const name of Object.keys(props)) {
      const p = [...path, 'properties', name];
      const ps = props[name];
      checkKeywords(ps, p);
      if (ps === false) {
        if (required.has(name)) throw schemaError(p, `required property '${name}' has the schema false (no value allowed)`);
        continue;
      }
      members.push({ name, kv: kvRule(name, this.compile(ps, p, `${hint}-${name}`, NO_DIRECT)), required: required.has(name) });
    }
    let addlValue: string | null = null;
    if (addl !== false) {
      addlValue = addl === true ? jsonValueRule(b) : this.compile(addl, [...path, 'additionalProperties'], `${hint}-additional`, NO_DIRECT);
    }
    for (const name of required) {
      if (has(props, name)) continue;
      if (addlValue === null) {
        throw schemaError(path, `required property '${name}' is not in properties and additional properties are not allowed` +
          (has(s, 'additionalProperties') ? '' : ' (additionalProperties defaults to false when properties are listed)'));
      }
      members.push({ name, kv: kvRule(name, addlValue), required: true });
    }
    const addlKv = addlValue === null ? null
      : b.rule(`${hint}-additional-kv`, `${this.keyExcluding([...new Set([...Object.keys(props), ...required])])} ${ws} ":" ${ws} ${addlValue}`);
    if (members.length === 0 && addlKv === null) return b.rule(`${hint}-object`, `"{" ${ws} "}"`);

    const firstReq = members.findIndex((m) => m.required);
    const addlTail = addlKv ? repeat(`${sep} ${addlKv}`, 0, Infinity) : '';
    let body: string;
    if (firstReq >= 0) {
      // optional members before the first required one carry their separator after them
      const parts = members.slice(0, firstReq).map((m) => `(${m.kv} ${sep})?`);
      parts.push(members[firstReq].kv);
      for (const m of members.slice(firstReq + 1)) parts.push(m.required ? `${sep} ${m.kv}` : `(${sep} ${m.kv})?`);
      if (addlTail) parts.push(addlTail);
      body = `"{" ${ws} ${parts.join(' ')} ${ws} "}"`;
    } else {
      // all optional: choose the first member present; rest[k] = the optional members from k on
      const rest: string[] = [];
      rest[members.length] = addlTail;
      for (let k = members.length - 1; k >= 1; --k) {
        const after = rest[k + 1];
        const own = `(${sep} ${members[k].kv})?`;
        rest[k] = after ? b.rule(`${hint}-rest`, `${own} ${after}`) : own;
      }
      const starts = members.map((m, k) => (rest[k + 1] ? `${m.kv} ${rest[k + 1]}` : m.kv));
      if (addlKv) starts.push(addlTail ? `${addlKv} ${addlTail}` : addlKv);
      body = `"{" ${ws} ((${starts.join(' | ')}) ${ws})? "}"`;
    }
    return b.rule(`${hint}-object`, body);
  }

  /**
   * A JSON string that is none of `names`. With names to exclude, keys are written without escapes (so no
   * spelling of a listed name can slip through); a name that needs escapes then cannot collide anyway.
   */
  private keyExcluding(names: string[]): string {
    const b = this.b;
    if (names.length === 0) return jsonStringRule(b);
    const special: [number, number][] = [[0x00, 0x1f], [0x22, 0x22], [0x5c, 0x5c]];
    const keyChar = b.rule('key-char', charClass(special, true));
    interface TrieNode { end: boolean; next: Map<number, TrieNode> }
    const rootNode: TrieNode = { end: false, next: new Map() };
    for (const name of names) {
      const cps = codePoints(name, 'property name');
      if (cps.some((c) => c < 0x20 || c === 0x22 || c === 0x5c)) continue;
      let node = rootNode;
      for (const c of cps) {
        let child = node.next.get(c);
        if (!child) node.next.set(c, (child = { end: false, next: new Map() }));
        node = child;
      }
      node.end = true;
    }
    const expr = (node: TrieNode): string => {
      const alts: string[] = [];
      for (const [c, child] of node.next) alts.push(`${literal(String.fromCodePoint(c))} ${expr(child)}`);
      const others = charClass([...special, ...[...node.next.keys()].map((c) => [c, c] as [number, number])], true);
      alts.push(`${others} ${keyChar}*`);
      if (!node.end) alts.push('""');
      return `(${alts.join(' | ')})`;
    };
    return b.rule('key-other', `"\\"" ${expr(rootNode)} "\\""`);
  }
}

/** Parses a schema given as JSON text; other values pass through. */
function schemaValue(schema: unknown): unknown {
  if (typeof schema !== 'string') return schema;
  try {
    return JSON.parse(schema) as unknown;
  } catch (e) {
    throw new StructuredOutputError(`JSON Schema text is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * Adds rules for `schema` (an object or boolean, or its JSON text) to `b` and returns the name of the rule
 * matching the JSON texts it accepts. `$ref`s resolve against `schema` itself.
 */
export function jsonSchemaRule(b: GrammarBuilder, schema: unknown, nameHint = 'schema'): string {
  const s = schemaValue(schema);
  return new SchemaCompiler(b, s).compile(s, [], nameHint, NO_DIRECT);
}

/** Full GBNF grammar whose sentences are JSON texts valid for `schema` (see the header for the narrowings). */
export function compileJsonSchema(schema: unknown): string {
  const b = new GrammarBuilder();
  return b.build(jsonSchemaRule(b, schema));
}
