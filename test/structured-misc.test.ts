// Structured-output helpers: GrammarBuilder escaping / naming, choice lists, any-JSON grammars (json_object)
// and user GBNF validation, all checked through the native matcher.
import t from 'tap';
import { complete, native, show } from './helpers/grammar-check.js';
import {
  GrammarBuilder, StructuredOutputError, charClass, compileChoice, compileGbnf, compileJsonObject, compileJsonValue,
  literal, repeat,
} from '../lib/structured/index.js';


t.test('literal() matches exactly its text, for any Unicode', async (t) => {
  const texts = ['', 'plain', 'quote " and backslash \\', 'new\nline\r\ttab', '\u0000\u0001\u001f\u007f\u0085\u009f',
    '\u2028\u2029\ufeff', 'é€😀𝄞', '[brackets] ^-', '#comment ::= | ( ) * + ?', 'x'.repeat(300)];
  for (const s of texts) {
    const g = new GrammarBuilder().build(literal(s));
    t.ok(complete(g, s), `accepts ${show(s.slice(0, 40))}`);
    if (s.length > 0) {
      t.notOk(complete(g, s.slice(0, -1)), 'rejects a prefix');
      t.notOk(complete(g, s + 'x'), 'rejects an extension');
    }
    t.notOk(g.includes('\n' + s) && s.includes('\n'), 'no raw newline in grammar text');
  }
  t.throws(() => literal('a\ud800b'), { name: 'StructuredOutputError', message: /lone UTF-16 surrogate \(U\+D800\)/ });
});

t.test('charClass() escapes ranges and special characters', async (t) => {
  const cases: [Array<[number, number]>, boolean, string[], string[]][] = [
    [[[0x2d, 0x2d], [0x5d, 0x5e], [0x5b, 0x5b], [0x5c, 0x5c]], false, ['-', ']', '^', '[', '\\'], ['a', '_']],
    [[[0x00, 0x1f], [0x22, 0x22]], true, ['a', ' ', '😀'], ['\u0000', '\n', '"']],
    [[[0x1f600, 0x1f64f]], false, ['😀', '🙏'], ['😐'.replace('😐', '🚀'), 'a']],
    [[], false, [], ['a', '']],
  ];
  for (const [ranges, neg, yes, no] of cases) {
    const g = new GrammarBuilder().build(charClass(ranges, neg));
    native.grammarCheck(g);
    for (const s of yes) t.ok(complete(g, s), `${charClass(ranges, neg)} accepts ${JSON.stringify(s)}`);
    for (const s of no) t.notOk(complete(g, s), `${charClass(ranges, neg)} rejects ${JSON.stringify(s)}`);
  }
});

t.test('GrammarBuilder names rules uniquely and shares identical bodies', async (t) => {
  const b = new GrammarBuilder();
  const a1 = b.rule('item', '"a"');
  const a2 = b.rule('other', '"a"');
  const c = b.rule('item', '"c"');
  const d = b.rule('root', '"d"');
  const e = b.rule('bad name!/x', '"e"');
  t.equal(a1, a2, 'same body, same rule');
  t.not(a1, c, 'same hint, different body: different names');
  t.not(d, 'root', 'never named root');
  t.match(e, /^[a-zA-Z0-9-]+$/, 'names are [a-zA-Z0-9-]+');
  const list = b.reserve('list');
  b.define(list, `"[" (${a1} ("," ${list})?)? "]"`);
  const g = b.build(`${list} | ${c} | ${d} | ${e}`);
  t.match(g, /^root ::= /, 'root first');
  t.ok(complete(g, '[a,[a]]') && complete(g, 'c') && complete(g, 'e'));
  t.throws(() => new GrammarBuilder().define('x', '"x"'), /not reserved/);
  const unfinished = new GrammarBuilder();
  unfinished.reserve('x');
  t.throws(() => unfinished.build('x'), /never defined/);
});

t.test('repeat() bounds, including ones above the native limit', async (t) => {
  const cases: [number, number, number[], number[]][] = [
    [0, 1, [0, 1], [2]], [0, Infinity, [0, 5], []], [1, Infinity, [1, 3], [0]], [2, 2, [2], [1, 3]],
    [2, 5, [2, 5], [1, 6]], [3, Infinity, [3, 9], [2]], [0, 0, [0], [1]], [10001, 10003, [10001, 10003], [10000, 10004]],
    [20001, Infinity, [20001, 20100], [20000]], [0, 30000, [0, 9999, 10000, 30000], [30001]],
  ];
  for (const [min, max, yes, no] of cases) {
    const g = new GrammarBuilder().build(repeat('"ab"', min, max));
    for (const n of yes) t.ok(complete(g, 'ab'.repeat(n)), `{${min},${max}} accepts ${n}`);
    for (const n of no) t.notOk(complete(g, 'ab'.repeat(n)), `{${min},${max}} rejects ${n}`);
  }
  t.throws(() => repeat('"a"', 3, 2), StructuredOutputError);
  t.equal(repeat('"a" "b"', 0, 1), '("a" "b")?', 'a sequence is grouped before it is repeated');
});

t.test('compileChoice: exactly one of the strings', async (t) => {
  const choices = ['yes', 'no', 'maybe "so"', 'multi\nline', '', 'é😀', 'no'];
  const g = compileChoice(choices);
  for (const c of choices) t.ok(complete(g, c), `accepts ${JSON.stringify(c)}`);
  for (const c of ['Yes', 'ye', 'yesno', 'maybe', ' no', 'multi']) t.notOk(complete(g, c), `rejects ${JSON.stringify(c)}`);
  t.throws(() => compileChoice([]), { name: 'StructuredOutputError', message: /non-empty array of strings/ });
  t.throws(() => compileChoice('yes'), { name: 'StructuredOutputError', message: /non-empty array of strings/ });
  t.throws(() => compileChoice(['a', 1]), { name: 'StructuredOutputError', message: /choice 1 must be a string, got number/ });
  t.throws(() => compileChoice(['a', null]), { message: /choice 1 must be a string, got null/ });
  t.throws(() => compileChoice(['\udc00']), { message: /lone UTF-16 surrogate/ });
});

t.test('compileJsonObject: any JSON object at top level (json_object)', async (t) => {
  const g = compileJsonObject();
  const yes = ['{}', '{"a":1}', '{"a":{"b":[1,2.5,-3e10,true,false,null,"s"]}}', '{\n  "k": "v",\n  "n": [\n    {}\n  ]\n}',
    '{"esc":"\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0041 \\ud83d\\ude00"}', '{"":""}', '{"a":-0.0}', '{"a":0.5E+3}', '{"x":"é😀"}'];
  const no = ['[]', '1', '"s"', 'null', '{', '{"a"}', '{"a":}', '{a:1}', '{"a":1,}', '{"a":01}', '{"a":1.}', '{"a":.5}', '{"a":+1}',
    '{"a":"\u0001"}', '{"a":"\\x41"}', '{"a":"\\u12"}', '{"a":"\\ud800"}', '{"a":NaN}', '{"a":tru}', ' {}', '{} ', "{'a':1}"];
  for (const s of yes) t.ok(complete(g, s), `accepts ${s}`);
  for (const s of no) t.notOk(complete(g, s), `rejects ${s}`);
  for (let i = 0; i < 50; ++i) {
    const v = { i, s: 'x'.repeat(i % 7) + '"\\\n', a: [i, -i / 4, null, { [`k${i}`]: i % 2 === 0 }] };
    if (!complete(g, JSON.stringify(v)) || !complete(g, JSON.stringify(v, null, 2))) t.fail(JSON.stringify(v));
  }
  t.notOk(native.grammarMatch(g, '{"a":1').complete, 'an unfinished object is not complete');
  t.ok(native.grammarMatch(g, '{"a":1').accepted, 'but it is a prefix');
});

t.test('compileJsonValue: any JSON value', async (t) => {
  const g = compileJsonValue();
  for (const s of ['0', '-1.25e-7', '"x"', 'true', 'null', '[]', '[[[]]]', '{"a":[{}]}']) t.ok(complete(g, s), s);
  for (const s of ['', '-', '00', '1e', 'nul', '[,]', 'undefined']) t.notOk(complete(g, s), JSON.stringify(s));
});

t.test('compileGbnf validates user grammars with the native parser', async (t) => {
  const ok = 'root ::= "a" item*\nitem ::= [0-9] | "-"\n';
  t.equal(compileGbnf(ok), ok, 'returned unchanged');
  t.throws(() => compileGbnf('root ::= "a" missing'), { name: 'StructuredOutputError', message: /invalid GBNF grammar: grammar: line 1, column 14: unknown rule 'missing'/ });
  t.throws(() => compileGbnf('item ::= "a"'), { name: 'StructuredOutputError', message: /no 'root' rule/ });
  t.throws(() => compileGbnf('root ::= root "a"'), { message: /left recursion/ });
  t.throws(() => compileGbnf('root ::= "unterminated'), { message: /line 1, column 10: unterminated string literal/ });
  t.throws(() => compileGbnf(42), { name: 'StructuredOutputError', message: /grammar must be a string/ });
});
