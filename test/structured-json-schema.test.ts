// JSON Schema -> GBNF (lib/structured/json-schema.ts) checked against ajv (draft 2020-12 + ajv-formats) through
// the native matcher: hand-written valid / invalid instances, compact and 2-space pretty texts, and a seeded
// random cross-check (grammar complete <=> ajv valid, for texts written in the grammar's canonical form).
import t from 'tap';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { complete, int, native, pick, rng, show, type Rand } from './helpers/grammar-check.js';
import { compileJsonSchema, StructuredOutputError } from '../lib/structured/index.js';

// both packages are CommonJS with `exports.default`; under NodeNext the default import is the module object
const ajv = new Ajv2020.default({ strict: false, allErrors: false });
addFormats.default(ajv);

const chance = (r: Rand, p: number) => r() < p;
const STRING_CHARS = ['a', 'b', 'z', 'A', '0', '9', ' ', '-', '_', '"', '\\', '/', '\n', '\t', '\u0001', '\u001f', 'é', '€', '😀', '{', ':'];
function str(r: Rand, maxLen: number, chars: readonly string[] = STRING_CHARS): string {
  let s = '';
  for (let n = int(r, 0, maxLen); n > 0; --n) s += pick(r, chars);
  return s;
}
/** A random JSON value of any type, small. */
function anyValue(r: Rand, depth = 0): unknown {
  switch (int(r, 0, depth > 2 ? 4 : 6)) {
    case 0: return null;
    case 1: return chance(r, 0.5);
    case 2: return int(r, -1000, 1000);
    case 3: return int(r, -100000, 100000) / 64;
    case 4: return str(r, 6);
    case 5: return Array.from({ length: int(r, 0, 3) }, () => anyValue(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let n = int(r, 0, 3); n > 0; --n) o[str(r, 4)] = anyValue(r, depth + 1);
      return o;
    }
  }
}

interface Case {
  name: string;
  schema: unknown;
  ajvSchema?: unknown; // what ajv checks, when it differs (the grammar's documented narrowings made explicit)
  valid: unknown[];
  invalid: unknown[];
  /** Random candidates, already in canonical member order; about half should be valid. */
  gen?: (r: Rand) => unknown;
  /** Raw texts with their expected verdict (for whitespace / spelling checks). */
  texts?: [string, boolean][];
}

const dateOk = ['2024-02-29', '2000-02-29', '2023-12-31', '1999-04-30', '0000-02-29', '2023-01-01'];
const dateBad = ['2023-02-29', '1900-02-29', '2023-04-31', '2023-13-01', '2023-00-10', '2023-1-01', '23-01-01', '2023-01-32', '2023-01-00'];

const cases: Case[] = [
  {
    name: 'nested objects, required and optional members',
    schema: {
      type: 'object',
      properties: {
        name: { type: 'string', minLength: 1 },
        age: { type: 'integer', minimum: 0, maximum: 150 },
        address: {
          type: 'object',
          properties: { street: { type: 'string' }, city: { type: 'string' }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
          required: ['city'],
          additionalProperties: false,
        },
        active: { type: 'boolean' },
      },
      required: ['name', 'address'],
      additionalProperties: false,
    },
    valid: [
      { name: 'Ann', address: { city: 'Paris' } },
      { name: 'B', age: 0, address: { street: 'Main "1"', city: 'X', zip: '12345' }, active: true },
      { name: 'é😀', age: 150, address: { city: '' }, active: false },
      { name: 'x\ny', address: { street: '', city: 'c' } },
    ],
    invalid: [
      { name: '', address: { city: 'P' } },
      { name: 'A' },
      { name: 'A', address: {} },
      { name: 'A', address: { city: 'P', zip: '1234' } },
      { name: 'A', age: 151, address: { city: 'P' } },
      { name: 'A', age: -1, address: { city: 'P' } },
      { name: 'A', age: 1.5, address: { city: 'P' } },
      { name: 'A', address: { city: 'P' }, extra: 1 },
      { name: 'A', address: { city: 'P', country: 'F' } },
      { name: 1, address: { city: 'P' } },
      [],
      null,
    ],
    gen: (r) => {
      const o: Record<string, unknown> = {};
      if (chance(r, 0.95)) o.name = chance(r, 0.9) ? str(r, 4) : int(r, 0, 3);
      if (chance(r, 0.5)) o.age = int(r, -3, 153);
      if (chance(r, 0.95)) {
        const a: Record<string, unknown> = {};
        if (chance(r, 0.5)) a.street = str(r, 5);
        if (chance(r, 0.9)) a.city = str(r, 5);
        if (chance(r, 0.4)) a.zip = chance(r, 0.7) ? String(int(r, 0, 99999)).padStart(5, '0') : str(r, 5, ['1', '2', 'a']);
        if (chance(r, 0.05)) a.country = 'F';
        o.address = a;
      }
      if (chance(r, 0.5)) o.active = chance(r, 0.8) ? chance(r, 0.5) : 'yes';
      if (chance(r, 0.05)) o.more = 1;
      return o;
    },
  },
  {
    name: 'array with minItems / maxItems',
    schema: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 4 },
    valid: [[1, 2], [0, -1, 2], [5, 6, 7, 8], [-100, 100]],
    invalid: [[], [1], [1, 2, 3, 4, 5], [1, 2.5], [1, '2'], {}, 'x'],
    gen: (r) => Array.from({ length: int(r, 0, 6) }, () => (chance(r, 0.95) ? int(r, -50, 50) : pick(r, [0.5, 'a', null]))),
  },
  {
    name: 'enum of mixed values',
    schema: { enum: ['red', 'green', 42, null, true, { a: [1, 2] }, [], 'with "quote"'] },
    valid: ['red', 'green', 42, null, true, { a: [1, 2] }, [], 'with "quote"'],
    invalid: ['blue', 43, false, { a: [1] }, [1], 'Red', 'with quote', 42.5],
    texts: [['{ "a" : [ 1 , 2 ] }', true], ['{"a":[1,2],"b":1}', false], ['{"a": [1, 2]}', true], ['[ ]', true], ['"red" ', false]],
  },
  {
    name: 'const values',
    schema: {
      type: 'object',
      properties: { kind: { const: 'point' }, origin: { const: { x: 0, y: [0, 'z'] } }, n: { const: -7 } },
      required: ['kind', 'origin', 'n'],
      additionalProperties: false,
    },
    valid: [{ kind: 'point', origin: { x: 0, y: [0, 'z'] }, n: -7 }],
    invalid: [
      { kind: 'Point', origin: { x: 0, y: [0, 'z'] }, n: -7 },
      { kind: 'point', origin: { x: 0, y: [0] }, n: -7 },
      { kind: 'point', origin: { x: 0, y: [0, 'z'] }, n: 7 },
      { kind: 'point', n: -7 },
    ],
  },
  {
    name: 'anyOf of string / integer range / null',
    schema: { anyOf: [{ type: 'string', maxLength: 3 }, { type: 'integer', minimum: 10, maximum: 20 }, { type: 'null' }] },
    valid: ['', 'abc', '😀😀😀', 10, 15, 20, null],
    invalid: ['abcd', 9, 21, 15.5, true, [], {}],
    gen: (r) => pick(r, [() => str(r, 5), () => int(r, 5, 25), () => null, () => anyValue(r)])(),
  },
  {
    name: 'oneOf with disjoint branches (read as anyOf)',
    schema: {
      oneOf: [
        { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'number', minimum: 0 } }, required: ['kind', 'r'], additionalProperties: false },
        { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'integer', exclusiveMinimum: 0 } }, required: ['kind', 'side'], additionalProperties: false },
      ],
    },
    valid: [{ kind: 'circle', r: 0 }, { kind: 'circle', r: 2.5 }, { kind: 'square', side: 1 }],
    invalid: [{ kind: 'circle', r: -1 }, { kind: 'square', side: 0 }, { kind: 'square', r: 1 }, { kind: 'circle' }, { kind: 'tri', r: 1 }],
    gen: (r) => (chance(r, 0.5)
      ? { kind: pick(r, ['circle', 'circle', 'square']), r: int(r, -20, 20) / 4 }
      : { kind: pick(r, ['square', 'square', 'circle']), side: int(r, -2, 5) }),
  },
  {
    name: '$ref into $defs and definitions',
    schema: {
      $defs: { point: { type: 'object', properties: { x: { type: 'integer' }, y: { type: 'integer' } }, required: ['x', 'y'], additionalProperties: false } },
      definitions: { label: { type: 'string', maxLength: 4 } },
      type: 'object',
      properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point', description: 'annotation only' }, label: { $ref: '#/definitions/label' } },
      required: ['from', 'to'],
      additionalProperties: false,
    },
    valid: [{ from: { x: 1, y: 2 }, to: { x: -3, y: 0 } }, { from: { x: 0, y: 0 }, to: { x: 0, y: 0 }, label: 'abcd' }],
    invalid: [{ from: { x: 1 }, to: { x: 1, y: 1 } }, { from: { x: 1, y: 1 }, to: { x: 1, y: 1 }, label: 'abcde' }, { from: { x: 1, y: 1 } }],
  },
  {
    name: 'recursive $ref (a tree) and # (the root)',
    schema: {
      type: 'object',
      properties: {
        value: { type: 'integer' },
        children: { type: 'array', items: { $ref: '#' }, maxItems: 3 },
      },
      required: ['value'],
      additionalProperties: false,
    },
    valid: [
      { value: 1 },
      { value: 1, children: [] },
      { value: 1, children: [{ value: 2 }, { value: 3, children: [{ value: 4, children: [] }] }] },
    ],
    invalid: [{ value: 1, children: [{}] }, { value: 1, children: [{ value: 'x' }] }, { children: [] }, { value: 1, children: [{ value: 1 }, { value: 1 }, { value: 1 }, { value: 1 }] }],
    gen: (r) => {
      const node = (d: number): unknown => {
        const o: Record<string, unknown> = {};
        if (chance(r, 0.95)) o.value = chance(r, 0.95) ? int(r, -9, 9) : 'v';
        if (d < 3 && chance(r, 0.5)) o.children = Array.from({ length: int(r, 0, 4) }, () => node(d + 1));
        return o;
      };
      return node(0);
    },
  },
  {
    name: 'recursive $defs entry (linked list)',
    schema: {
      $ref: '#/$defs/list',
      $defs: { list: { anyOf: [{ type: 'null' }, { type: 'object', properties: { head: { type: 'string' }, tail: { $ref: '#/$defs/list' } }, required: ['head', 'tail'], additionalProperties: false }] } },
    },
    valid: [null, { head: 'a', tail: null }, { head: 'a', tail: { head: 'b', tail: null } }],
    invalid: [{ head: 'a' }, { head: 'a', tail: { head: 'b' } }, { head: 1, tail: null }, []],
  },
  {
    name: 'prefixItems tuple with minItems, no extra items',
    schema: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }, { type: 'boolean' }], items: false, minItems: 2 },
    valid: [['a', 1], ['', -5, true], ['x', 0, false]],
    invalid: [[], ['a'], ['a', 'b'], [1, 1], ['a', 1, 'x'], ['a', 1, true, 1]],
    gen: (r) => {
      const out: unknown[] = [];
      const makers = [() => (chance(r, 0.9) ? str(r, 3) : 1), () => (chance(r, 0.9) ? int(r, -5, 5) : 'x'), () => (chance(r, 0.9) ? chance(r, 0.5) : 0), () => 1];
      for (let i = 0, n = int(r, 0, 4); i < n; ++i) out.push(makers[i]());
      return out;
    },
  },
  {
    name: 'prefixItems followed by an items schema',
    schema: { type: 'array', prefixItems: [{ const: 'head' }], items: { type: 'number', minimum: 0 }, maxItems: 3 },
    valid: [[], ['head'], ['head', 0, 1.5], ['head', 2]],
    invalid: [['x'], ['head', -1], ['head', 1, 2, 3], [1]],
  },
  {
    name: 'string formats date, time, date-time, uuid',
    schema: {
      type: 'object',
      properties: {
        d: { type: 'string', format: 'date' },
        t: { type: 'string', format: 'time' },
        dt: { type: 'string', format: 'date-time' },
        id: { type: 'string', format: 'uuid' },
      },
      required: ['d', 't', 'dt', 'id'],
      additionalProperties: false,
    },
    valid: [
      ...dateOk.map((d, i) => ({ d, t: ['12:34:56Z', '00:00:00+01:00', '23:59:59.123456789-12:30', '08:15:00.5Z', '19:00:01Z', '01:02:03+14:00'][i], dt: `${d}T10:20:30Z`, id: '123e4567-e89b-12d3-a456-426614174000' })),
      { d: '2024-01-01', t: '00:00:00Z', dt: '2024-02-29T23:59:59.999+05:30', id: 'ABCDEF01-2345-6789-ABCD-EF0123456789' },
    ],
    invalid: [
      ...dateBad.map((d) => ({ d, t: '12:00:00Z', dt: '2024-01-01T00:00:00Z', id: '123e4567-e89b-12d3-a456-426614174000' })),
      ...['24:00:00Z', '12:60:00Z', '12:00:60Z', '12:00:00', '12:00:00+24:00', '1:00:00Z', '12:00:00.Z'].map((tt) => ({ d: '2024-01-01', t: tt, dt: '2024-01-01T00:00:00Z', id: '123e4567-e89b-12d3-a456-426614174000' })),
      ...['2023-02-29T00:00:00Z', '2024-01-01T25:00:00Z', '2024-01-01T00:00:00', '2024-01-01'].map((dt) => ({ d: '2024-01-01', t: '00:00:00Z', dt, id: '123e4567-e89b-12d3-a456-426614174000' })),
      ...['123e4567-e89b-12d3-a456-42661417400', '123e4567e89b12d3a456426614174000', 'g23e4567-e89b-12d3-a456-426614174000'].map((id) => ({ d: '2024-01-01', t: '00:00:00Z', dt: '2024-01-01T00:00:00Z', id })),
    ],
    gen: (r) => {
      const p2 = (n: number) => String(n).padStart(2, '0');
      const date = `${String(int(r, 0, 2400)).padStart(4, '0')}-${p2(int(r, 0, 13))}-${p2(int(r, 0, 32))}`;
      // no second 60: ajv accepts leap seconds, the grammar does not write them
      const sec = chance(r, 0.02) ? 61 : int(r, 0, 59);
      const time = `${p2(int(r, 0, 24))}:${p2(int(r, 0, 60))}:${p2(sec)}${chance(r, 0.3) ? '.' + int(r, 0, 999) : ''}${pick(r, ['Z', 'Z', '+01:00', '-23:59', '+05:30', '+24:00', ''])}`;
      const hex = () => pick(r, [...'0123456789abcdefABCDEF']);
      let uuid = [8, 4, 4, 4, 12].map((n) => Array.from({ length: n }, hex).join('')).join('-');
      if (chance(r, 0.1)) uuid = uuid.slice(0, 5) + 'g' + uuid.slice(6);
      if (chance(r, 0.05)) uuid = uuid.slice(1);
      return { d: date, t: time, dt: `${date}T${time}`, id: uuid };
    },
  },
  {
    name: 'pattern (anchored)',
    schema: {
      type: 'object',
      properties: {
        code: { type: 'string', pattern: '^[A-Z]{2}-\\d{3,4}$' },
        word: { type: 'string', pattern: '^(foo|ba[rz])+$' },
        quoted: { type: 'string', pattern: '^"[^"\\\\]*"$' },
        any: { type: 'string', pattern: '^.{0,3}$', maxLength: 3 },
      },
      required: ['code'],
      additionalProperties: false,
    },
    valid: [{ code: 'AB-123' }, { code: 'ZZ-0000', word: 'foobarbaz' }, { code: 'AA-111', quoted: '"hi there"' }, { code: 'AA-111', quoted: '""', any: 'é\t"' }],
    invalid: [{ code: 'Ab-123' }, { code: 'AB-12' }, { code: 'AB-12345' }, { code: 'AB-123', word: 'fo' }, { code: 'AB-123', word: '' }, { code: 'AB-123', quoted: '"a"b"' }, { code: 'AB-123', any: 'a\nb' }, { code: 'AB-123', any: 'abcd' }],
    gen: (r) => {
      const o: Record<string, unknown> = {
        code: chance(r, 0.8) ? `${pick(r, ['AB', 'ZQ', 'XX'])}-${String(int(r, 0, 9999)).padStart(int(r, 3, 4), '0')}`
          : `${str(r, 2, ['A', 'Z', 'b'])}-${str(r, 5, ['1', '9'])}`,
      };
      if (chance(r, 0.5)) o.word = chance(r, 0.7) ? str(r, 3, ['foo', 'bar', 'baz']) : str(r, 3, ['foo', 'bar', 'baz', 'ba', 'x']);
      if (chance(r, 0.5)) o.quoted = chance(r, 0.6) ? `"${str(r, 3, ['a', ' ', '\n', 'é'])}"` : str(r, 4, ['"', 'a', '\\', ' ']);
      if (chance(r, 0.5)) o.any = str(r, 4, ['a', 'a', '\n', '"', '\\', 'é', '\u0002', '\u2028', '😀']);
      return o;
    },
  },
  {
    name: 'integer bounds: negative, exclusive',
    schema: {
      type: 'object',
      properties: {
        a: { type: 'integer', minimum: -50, exclusiveMaximum: 1000 },
        b: { type: 'integer', exclusiveMinimum: -10, maximum: -2 },
        c: { type: 'integer', minimum: 7 },
        d: { type: 'integer', maximum: -123 },
        e: { type: 'integer', minimum: 1.5, maximum: 99.9 },
        f: { type: 'integer', exclusiveMinimum: -1001, exclusiveMaximum: 12345 },
      },
      additionalProperties: false,
    },
    valid: [{ a: -50, b: -9, c: 7, d: -123, e: 2, f: -1000 }, { a: 999, b: -2, c: 1234567, d: -99999, e: 99, f: 12344 }, { a: 0, f: 0 }, {}],
    invalid: [{ a: -51 }, { a: 1000 }, { b: -10 }, { b: -1 }, { c: 6 }, { c: 0 }, { d: -122 }, { d: 0 }, { e: 1 }, { e: 100 }, { f: -1001 }, { f: 12345 }, { a: 1.5 }],
    gen: (r) => {
      const o: Record<string, unknown> = {};
      if (chance(r, 0.6)) o.a = int(r, -60, 1010);
      if (chance(r, 0.6)) o.b = int(r, -12, 0);
      if (chance(r, 0.6)) o.c = int(r, -5, 20) * (chance(r, 0.2) ? 10007 : 1);
      if (chance(r, 0.6)) o.d = int(r, -200, 0) * (chance(r, 0.2) ? 1009 : 1);
      if (chance(r, 0.6)) o.e = int(r, -1, 101);
      if (chance(r, 0.6)) o.f = int(r, -1100, 12400) * (chance(r, 0.1) ? -13 : 1);
      return o;
    },
  },
  {
    name: 'number bounds: minimum 0 and exclusive integer bounds',
    schema: {
      type: 'object',
      properties: {
        x: { type: 'number', minimum: 0 },
        y: { type: 'number', exclusiveMinimum: -2, exclusiveMaximum: 3 },
        z: { type: 'number', maximum: -1 },
        w: { type: 'number' },
      },
      additionalProperties: false,
    },
    valid: [{ x: 0, y: -1.999, z: -1, w: -1.5e-7 }, { x: 12.5, y: 2.999 }, { x: 1e6, y: 0 }, { y: -1, z: -1000.25, w: 1e300 }],
    invalid: [{ x: -0.001 }, { x: -1 }, { y: -2 }, { y: 3 }, { y: 3.0001 }, { z: -0.999 }, { z: 0 }, { w: 'x' }],
    gen: (r) => {
      const o: Record<string, unknown> = {};
      const num = (lo: number, hi: number) => int(r, lo * 8, hi * 8) / 8;
      if (chance(r, 0.6)) o.x = num(-3, 30);
      if (chance(r, 0.6)) o.y = num(-4, 5);
      if (chance(r, 0.6)) o.z = num(-5, 2);
      if (chance(r, 0.6)) o.w = num(-100, 100);
      return o;
    },
  },
  {
    name: 'additionalProperties false vs schema, default strict',
    schema: {
      type: 'object',
      properties: { id: { type: 'integer' }, meta: { type: 'object', properties: { k: { type: 'string' } }, additionalProperties: { type: 'integer', minimum: 0 } } },
      required: ['id'],
    },
    ajvSchema: {
      type: 'object',
      properties: { id: { type: 'integer' }, meta: { type: 'object', properties: { k: { type: 'string' } }, additionalProperties: { type: 'integer', minimum: 0 } } },
      required: ['id'],
      additionalProperties: false,
    },
    valid: [{ id: 1 }, { id: 1, meta: {} }, { id: 1, meta: { k: 'v', a: 1, 'k2': 2, 'K': 3, '': 0 } }, { id: 2, meta: { x: 0 } }],
    invalid: [{ id: 1, other: 2 }, { id: 1, meta: { k: 1 } }, { id: 1, meta: { a: -1 } }, { id: 1, meta: { a: 'x' } }, { meta: {} }],
    texts: [
      ['{"id":1,"meta":{"k\\u0032":"x"}}', false], // an escaped extra key is outside the grammar (keys are written raw)
      ['{"id":1,"meta":{"k":"v","k":"w"}}', false],
    ],
    gen: (r) => {
      const o: Record<string, unknown> = {};
      if (chance(r, 0.95)) o.id = int(r, -5, 5);
      if (chance(r, 0.7)) {
        const m: Record<string, unknown> = {};
        if (chance(r, 0.5)) m.k = chance(r, 0.9) ? str(r, 3) : 3;
        for (let n = int(r, 0, 3); n > 0; --n) {
          const key = str(r, 3, ['a', 'k', 'K', '_', 'é']); // no integer-like keys: JS orders those first
          if (key !== 'k') m[key] = chance(r, 0.9) ? int(r, -2, 9) : 'x';
        }
        o.meta = m;
      }
      if (chance(r, 0.05)) o.z = 1;
      return o;
    },
  },
  {
    name: 'string minLength / maxLength (code points)',
    schema: { type: 'array', items: { type: 'string', minLength: 2, maxLength: 4 } },
    valid: [[], ['ab', 'abcd', '😀😀', 'é"\\\n', '\u0001\u0002']],
    invalid: [['a'], ['abcde'], ['😀'], [''], ['😀😀😀😀😀']],
    gen: (r) => Array.from({ length: int(r, 0, 3) }, () => str(r, 6)),
    texts: [['["\\ud83d\\ude00x"]', true], ['["\\u0041\\u0042"]', true], ['["\\ud83d"]', false]],
  },
  {
    name: 'type arrays and the empty schema',
    schema: { type: 'object', properties: { a: { type: ['string', 'null'] }, b: {}, c: true, d: { type: ['integer', 'boolean'], minimum: 3 } }, additionalProperties: false },
    valid: [{ a: null, b: [1, { x: null }], c: 'x', d: true }, { a: 's', b: null, d: 3 }, {}],
    invalid: [{ a: 1 }, { d: 2 }, { d: 'x' }, { d: 3.5 }],
    gen: (r) => {
      const o: Record<string, unknown> = {};
      if (chance(r, 0.5)) o.a = pick(r, [null, 'x', 1, true]);
      if (chance(r, 0.5)) o.b = anyValue(r);
      if (chance(r, 0.5)) o.c = anyValue(r);
      if (chance(r, 0.5)) o.d = pick(r, [true, false, 2, 3, 4, 'x', null]);
      return o;
    },
  },
  {
    name: 'allOf that merges, $ref with sibling keywords, anyOf with siblings',
    schema: {
      $defs: { base: { type: 'object', properties: { id: { type: 'integer', minimum: 0 } }, required: ['id'] } },
      allOf: [
        { $ref: '#/$defs/base' },
        { properties: { name: { type: 'string', maxLength: 3 }, id: { maximum: 10 } }, required: ['name'] },
      ],
      properties: { kind: { enum: ['a', 'b'] } },
      anyOf: [{ required: ['kind'] }, { properties: { flag: { const: true } }, required: ['flag'] }],
    },
    ajvSchema: {
      $defs: { base: { type: 'object', properties: { id: { type: 'integer', minimum: 0 } }, required: ['id'] } },
      allOf: [
        { $ref: '#/$defs/base' },
        { properties: { name: { type: 'string', maxLength: 3 }, id: { maximum: 10 } }, required: ['name'] },
      ],
      properties: { kind: { enum: ['a', 'b'] } },
      anyOf: [{ required: ['kind'] }, { properties: { flag: { const: true } }, required: ['flag'] }],
      unevaluatedProperties: false,
    },
    valid: [{ id: 0, name: 'abc', kind: 'a' }, { id: 10, name: '', flag: true }],
    invalid: [{ id: 11, name: 'a', kind: 'a' }, { id: 1, name: 'abcd', kind: 'a' }, { id: 1, name: 'a' }, { id: 1, name: 'a', flag: false }, { id: -1, name: 'a', kind: 'b' }, { name: 'a', kind: 'a' }],
  },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    const gbnf = compileJsonSchema(c.schema);
    t.ok(native.grammarCheck(gbnf).rules > 0, 'grammar parses');
    const validate = ajv.compile((c.ajvSchema ?? c.schema) as object);
    let n = 0;
    for (const v of c.valid) {
      t.ok(validate(v), `ajv accepts ${show(v)}`);
      for (const text of [JSON.stringify(v), JSON.stringify(v, null, 2)]) {
        if (!complete(gbnf, text)) t.fail(`grammar should accept ${show(text)}`);
        ++n;
      }
    }
    for (const v of c.invalid) {
      t.notOk(validate(v), `ajv rejects ${show(v)}`);
      for (const text of [JSON.stringify(v), JSON.stringify(v, null, 2)]) {
        if (complete(gbnf, text)) t.fail(`grammar should reject ${show(text)}`);
        ++n;
      }
    }
    for (const [text, ok] of c.texts ?? []) t.equal(complete(gbnf, text), ok, `${ok ? 'accepts' : 'rejects'} ${show(text)}`);
    t.pass(`${n} hand-written texts agree`);
    if (c.gen) {
      const r = rng(0x5eed ^ c.name.length);
      let valid = 0, total = 0;
      for (let i = 0; i < 300; ++i) {
        const v = c.gen(r);
        const ok = validate(v);
        valid += ok ? 1 : 0;
        const texts = [JSON.stringify(v)];
        if (i % 3 === 0) texts.push(JSON.stringify(v, null, 2));
        for (const text of texts) {
          ++total;
          if (complete(gbnf, text) !== ok) {
            t.fail(`grammar ${ok ? 'rejects' : 'accepts'} ${show(text)}, which ajv ${ok ? 'accepts' : 'rejects'}`);
          }
        }
      }
      t.ok(valid > 20 && valid < 280, `random candidates mix valid and invalid (${valid}/300 valid)`);
      t.pass(`${total} random texts: grammar complete <=> ajv valid`);
    }
  });
}

t.test('whitespace is bounded and JSON syntax is strict', async (t) => {
  const g = compileJsonSchema({ type: 'object', properties: { a: { type: 'array', items: { type: 'integer' } } }, additionalProperties: false });
  const yes = ['{}', '{ }', '{"a":[]}', '{"a" : [ 1 , 2 ] }', '{\n  "a": [\n    1\n  ]\n}', `{\n${' '.repeat(20)}"a":[1]}`, '{\n\t"a": [1]}'];
  const no = [' {}', '{} ', '{"a":[1,]}', '{"a":[01]}', '{"a":[-0]}', '{"a":[1.0]}', '{"a":[1e2]}', `{${' '.repeat(2)}"a":[1]}`,
    `{\n${' '.repeat(21)}"a":[1]}`, '{\n\n"a":[1]}', "{'a':[1]}", '{"a":[+1]}', '{"a":[1 2]}'];
  for (const s of yes) t.ok(complete(g, s), `accepts ${JSON.stringify(s)}`);
  for (const s of no) t.notOk(complete(g, s), `rejects ${JSON.stringify(s)}`);
});

t.test('unsupported keywords are named with their JSON pointer', async (t) => {
  const bad: [unknown, RegExp][] = [
    [{ type: 'object', properties: { age: { type: 'integer', multipleOf: 5 } } }, /unsupported JSON Schema keyword 'multipleOf' at \/properties\/age/],
    [{ not: { type: 'string' } }, /keyword 'not' at \/ /],
    [{ type: 'array', items: { type: 'string', uniqueItems: true, contains: {} } }, /keywords 'uniqueItems', 'contains' at \/items/],
    [{ if: {}, then: {}, else: {} }, /keywords 'if', 'then', 'else' at \//],
    [{ type: 'object', patternProperties: { '^x': {} } }, /'patternProperties' at \//],
    [{ anyOf: [{ type: 'string' }, { type: 'object', minProperties: 1 }] }, /'minProperties' at \/anyOf\/1/],
    [{ $defs: { a: { type: 'string', contentEncoding: 'base64' } }, $ref: '#/$defs/a' }, /'contentEncoding' at \/\$defs\/a/],
    [{ type: 'object', properties: { 'a/b': { nullable: true } } }, /'nullable' at \/properties\/a~1b/],
    [{ type: 'object', unevaluatedProperties: false }, /'unevaluatedProperties'/],
    [{ type: 'object', propertyNames: { maxLength: 3 } }, /'propertyNames'/],
    [{ type: 'array', additionalItems: false }, /'additionalItems'/],
    [{ $dynamicRef: '#x' }, /'\$dynamicRef'/],
  ];
  for (const [schema, re] of bad) {
    t.throws(() => compileJsonSchema(schema), { name: 'StructuredOutputError', message: re }, JSON.stringify(schema));
  }
  const ignored = { title: 'T', description: 'D', default: 1, examples: [1], $schema: 'https://json-schema.org/draft/2020-12/schema', $id: 'x', $comment: 'c', deprecated: true, readOnly: true, writeOnly: false, type: 'integer' };
  const g = compileJsonSchema(ignored);
  t.ok(complete(g, '12') && !complete(g, '"x"'), 'annotations are ignored');
});

t.test('invalid and unsupported schemas are refused with the problem named', async (t) => {
  const bad: [unknown, RegExp][] = [
    [{ type: 'strin' }, /at \/type: unknown type the string "strin"/],
    [{ type: [] }, /empty array/],
    [{ type: 'object', properties: { a: {} }, required: 'a' }, /\/required: required must be an array of strings/],
    [{ type: 'object', properties: { a: {} }, required: ['b'], additionalProperties: false }, /required property 'b' is not in properties/],
    [{ type: 'object', properties: { a: {} }, required: ['b'] }, /additionalProperties defaults to false/],
    [{ type: 'array', minItems: 3, maxItems: 2 }, /minItems 3 is greater than maxItems 2/],
    [{ type: 'array', prefixItems: [{}], items: false, minItems: 2 }, /no array satisfies minItems 2/],
    [{ type: 'string', minLength: 5, maxLength: 1 }, /minLength 5 is greater than maxLength 1/],
    [{ type: 'string', minLength: -1 }, /\/minLength: minLength must be a non-negative integer/],
    [{ type: 'string', maxLength: 1.5 }, /maxLength must be a non-negative integer/],
    [{ $ref: '#/$defs/missing' }, /does not resolve/],
    [{ $ref: 'https://example.com/s.json' }, /only references inside the schema/],
    [{ $ref: '#anchor' }, /anchors are not supported/],
    [{ $ref: '#' }, /refers back to itself/],
    [{ $defs: { a: { $ref: '#/$defs/b' }, b: { anyOf: [{ type: 'null' }, { $ref: '#/$defs/a' }] } }, $ref: '#/$defs/a' }, /refers back to itself/],
    [{ type: 'array', items: [{ type: 'string' }] }, /items must be a schema \(draft 2020-12\)/],
    [{ type: 'string', format: 'email' }, /unsupported string format 'email' at \/ \(supported: date, time, date-time, uuid\)/],
    [{ type: 'number', minimum: 0.5 }, /unsupported JSON Schema bound 'minimum: 0.5' for type number/],
    [{ type: 'integer', minimum: 5, maximum: 4 }, /no integer satisfies the bounds/],
    [{ type: 'integer', exclusiveMinimum: 4, exclusiveMaximum: 5 }, /no integer satisfies/],
    [{ type: 'number', exclusiveMinimum: 1, maximum: 1 }, /no number satisfies/],
    [{ type: 'integer', exclusiveMinimum: true }, /exclusiveMinimum must be a number \(draft 2020-12\)/],
    [{ type: 'string', pattern: '^(?=a)b$' }, /pattern at \/pattern: regex .*lookahead/],
    [{ type: 'string', pattern: '(a' }, /unclosed '\('/],
    [{ type: 'string', pattern: '^[a-z]+$', minLength: 2 }, /pattern combined with minLength \/ maxLength/],
    [{ type: 'string', format: 'date', pattern: '^2' }, /'pattern' together with 'format'/],
    [{ enum: [] }, /enum must be a non-empty array/],
    [{ type: 'string', enum: [1, 2] }, /no value of enum \/ const has an allowed type/],
    [{ type: 'string', enum: ['a'], maxLength: 3 }, /'enum' \/ 'const' combined with 'maxLength'/],
    [{ allOf: [{ type: 'string', pattern: '^a$' }, { pattern: '^b$' }] }, /cannot intersect two different 'pattern' values/],
    [{ allOf: [{ type: 'string' }, { type: 'integer' }] }, /no value satisfies all of the combined schemas/],
    [{ anyOf: [] }, /anyOf must be a non-empty array/],
    [{ anyOf: [false, false] }, /no anyOf branch accepts any value/],
    [false, /the schema `false` accepts no value/],
    [{ type: 'object', properties: { a: false }, required: ['a'] }, /required property 'a' has the schema false/],
    [{ properties: [] }, /properties must be an object/],
    [42, /a schema must be an object or a boolean, got number 42/],
    ['{"type": "object",', /JSON Schema text is not valid JSON/],
  ];
  for (const [schema, re] of bad) {
    t.throws(() => compileJsonSchema(schema), { name: 'StructuredOutputError', message: re }, JSON.stringify(schema));
  }
  const e = (() => { try { compileJsonSchema({ type: 'object', properties: { a: { type: 'integer', multipleOf: 2 } } }); } catch (err) { return err; } })();
  t.ok(e instanceof StructuredOutputError, 'an instance of StructuredOutputError');
});

t.test('schema given as JSON text, true, and {} accept any JSON value', async (t) => {
  for (const schema of [true, {}, { description: 'anything' }, '{}']) {
    const g = compileJsonSchema(schema);
    for (const text of ['1', '-0.5e3', '"x"', 'null', 'true', '[1,{"a":[]}]', '{"k":"v","k":1}', '{\n  "a": [\n    1\n  ]\n}']) {
      t.ok(complete(g, text), `${JSON.stringify(schema)} accepts ${text}`);
    }
    for (const text of ['', 'nul', '01', '"\u0001"', '[1,]', '{"a"}', 'undefined']) t.notOk(complete(g, text), `rejects ${text}`);
  }
  const g = compileJsonSchema('{"type":"integer","minimum":3}');
  t.ok(complete(g, '3') && !complete(g, '2'));
});

t.test('object without properties; additional properties with a schema and no declared names', async (t) => {
  const any = compileJsonSchema({ type: 'object' });
  for (const text of ['{}', '{"a":1,"b":[null]}', '{"\\"":{}}']) t.ok(complete(any, text), text);
  t.notOk(complete(any, '[]'));
  const map = compileJsonSchema({ type: 'object', additionalProperties: { type: 'boolean' } });
  t.ok(complete(map, '{"x":true,"\\n":false}'));
  t.notOk(complete(map, '{"x":1}'));
  const req = compileJsonSchema({ type: 'object', required: ['a'] });
  t.ok(complete(req, '{"a":null,"b":2}'));
  t.notOk(complete(req, '{"b":2}'));
  const empty = compileJsonSchema({ type: 'object', properties: {} });
  t.ok(complete(empty, '{}') && !complete(empty, '{"a":1}'), 'properties: {} with the strict default allows only {}');
});

t.test('large integer bounds stay exact', async (t) => {
  const g = compileJsonSchema({ type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 });
  for (const v of ['9007199254740991', '-9007199254740991', '0', '123456789012345']) t.ok(complete(g, v), v);
  for (const v of ['9007199254740992', '-9007199254740992', '10000000000000000']) t.notOk(complete(g, v), v);
  const r = rng(7);
  const lo = 1234, hi = 98765;
  const h = compileJsonSchema({ type: 'integer', minimum: lo, maximum: hi });
  for (let i = 0; i < 400; ++i) {
    const v = int(r, -10, 120000) * (chance(r, 0.1) ? -1 : 1);
    if (complete(h, String(v)) !== (v >= lo && v <= hi)) t.fail(`${v}`);
  }
  t.pass('400 random integers agree with [1234, 98765]');
});
