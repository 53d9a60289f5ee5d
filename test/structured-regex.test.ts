// Regex -> GBNF (lib/structured/regex.ts) against JS RegExp(`^(?:p)$`, 'u') through the native matcher:
// strings sampled from each pattern and random strings over its alphabet, raw and inside JSON strings;
// refused constructs name themselves and their position.
import t from 'tap';
import { complete, int, native, pick, rng, show, type Rand } from './helpers/grammar-check.js';
import { GrammarBuilder, compileRegex, parseRegex, regexRule, type RegexNode } from '../lib/structured/index.js';



const EXTRA = ['a', 'b', 'c', 'x', 'z', 'A', '0', '5', '-', '.', '@', ' ', '\n', '\r', '\t', 'é', '😀', '"', '\\', '_', ']', '\u2028', '\u0001'];

/** A string the tree matches (random choices, repetitions capped at min + 3). */
function sample(n: RegexNode, r: Rand, alphabet: readonly number[]): string {
  switch (n.kind) {
    case 'set': {
      const inSet = alphabet.filter((cp) => n.ranges.some(([lo, hi]) => cp >= lo && cp <= hi));
      if (inSet.length > 0 && r() < 0.8) return String.fromCodePoint(pick(r, inSet));
      if (n.ranges.length === 0) return '';
      const [lo, hi] = pick(r, n.ranges);
      let cp = lo + Math.floor(r() * Math.min(hi - lo + 1, 0x3000));
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41;
      return String.fromCodePoint(cp);
    }
    case 'seq': return n.items.map((i) => sample(i, r, alphabet)).join('');
    case 'alt': return sample(pick(r, n.alts), r, alphabet);
    case 'repeat': {
      const count = int(r, n.min, Math.min(n.max, n.min + 3));
      let s = '';
      for (let i = 0; i < count; ++i) s += sample(n.item, r, alphabet);
      return s;
    }
  }
}

/** Mutations of a string: drop, duplicate or replace one character, or append one. */
function mutate(s: string, r: Rand, chars: readonly string[]): string {
  const cps = [...s];
  const i = int(r, 0, Math.max(cps.length - 1, 0));
  switch (int(r, 0, 3)) {
    case 0: cps.splice(i, 1); break;
    case 1: cps.splice(i, 0, cps[i] ?? pick(r, chars)); break;
    case 2: cps[i] = pick(r, chars); break;
    default: cps.push(pick(r, chars));
  }
  return cps.join('');
}

const patterns = [
  '^\\d{3}-[a-z]+$',
  '(a|b)*c',
  '(a*)*b',
  'x(?:ab|c){2,3}y?',
  '[^"\\\\]{0,4}',
  '(a?b?)+',
  '[\\w.-]+@[a-z]+\\.(com|org)',
  '\\u{1F600}|é+',
  '(?<year>\\d{4})-(?<month>0[1-9]|1[0-2])',
  '.{2,5}',
  '[\\s\\S]?\\S\\D\\W',
  'a{2}b{0,}c{1,2}?d+?',
  '(|a)*z',
  '[^\\d\\s]+',
  '\\x41\\u0042\\t[\\-\\]\\\\]',
  '(ab|a)(bc|c)',
  '^$',
  '((a|)b?){2,3}',
  '[a-c][^a-c]\\.[.]\\/\\?',
  '\\uD83D\\uDE00?[😀-😂]',
];

for (const p of patterns) {
  t.test(`regex ${p}`, async (t) => {
    const re = new RegExp(`^(?:${p})$`, 'u');
    const gbnf = compileRegex(p);
    native.grammarCheck(gbnf);
    const tree = parseRegex(p);
    const r = rng(p.length * 7919 + p.charCodeAt(0));
    const alphabetChars = [...new Set([...EXTRA, ...[...p].filter((c) => !'\\[](){}|?*+^$'.includes(c))])];
    const alphabet = alphabetChars.map((c) => c.codePointAt(0)!);
    let n = 0, matched = 0, mismatches = 0;
    const check = (s: string) => {
      const want = re.test(s);
      matched += want ? 1 : 0;
      ++n;
      if (complete(gbnf, s) !== want) {
        ++mismatches;
        t.fail(`${show(s)}: RegExp ${want ? 'matches' : 'does not match'}, grammar disagrees`);
      }
    };
    for (let i = 0; i < 150; ++i) {
      const s = sample(tree, r, alphabet);
      check(s);
      check(mutate(s, r, alphabetChars));
    }
    for (let i = 0; i < 100; ++i) {
      let s = '';
      for (let k = int(r, 0, 7); k > 0; --k) s += pick(r, alphabetChars);
      check(s);
    }
    t.equal(mismatches, 0, `${n} strings agree with RegExp (${matched} match)`);
    t.ok(matched >= 100 || p === '^$', 'sampled strings match');
  });
}

t.test('JSON mode: the pattern matches the decoded content of a JSON string', async (t) => {
  const jsonPatterns = ['[^a]*', '.{0,3}', '[\\s\\S]{1,2}', '"\\\\?\\n?[\\x00-\\x1f]?', '[\\x00-\\x20"\\\\]+', '\\w+|\\W'];
  const chars = ['a', 'b', '"', '\\', '\n', '\t', '\b', '\f', '\r', '\u0000', '\u0001', '\u001f', ' ', 'é', '😀', '/', '\u2028'];
  for (const p of jsonPatterns) {
    const re = new RegExp(`^(?:${p})$`, 'u');
    const b = new GrammarBuilder();
    const gbnf = b.build(regexRule(b, p, { json: true, nameHint: 'pat' }));
    native.grammarCheck(gbnf);
    const r = rng(p.length);
    let bad = 0, n = 0;
    for (let i = 0; i < 300; ++i) {
      let s = '';
      for (let k = int(r, 0, 4); k > 0; --k) s += pick(r, chars);
      const text = JSON.stringify(s);
      ++n;
      if (complete(gbnf, text) !== re.test(s)) {
        ++bad;
        t.fail(`${p}: ${show(text)} RegExp ${re.test(s)}`);
      }
    }
    t.equal(bad, 0, `${p}: ${n} JSON strings agree`);
    // the \u00XX escapes accept both hex cases; raw control characters are never accepted
    if (re.test('\u001f')) t.ok(complete(gbnf, '"\\u001F"') && complete(gbnf, '"\\u001f"'), `${p}: \\u001F and \\u001f`);
    t.notOk(complete(gbnf, '"\u0001"'), `${p}: raw control character refused`);
  }
});

t.test('unsupported constructs are refused with their position', async (t) => {
  const bad: [string, RegExp][] = [
    ['a(?=b)', /lookahead '\(\?=' is not supported at position 1/],
    ['(?!x)y', /lookahead '\(\?!' is not supported at position 0/],
    ['a(?<=b)c', /lookbehind '\(\?<=' is not supported at position 1/],
    ['(?<!b)c', /lookbehind '\(\?<!' is not supported at position 0/],
    ['(a)\\1', /backreference '\\1' is not supported at position 3/],
    ['(?<n>a)\\k<n>', /named backreference '\\k<...>' is not supported at position 7/],
    ['\\bword', /word boundary '\\b' is not supported at position 0/],
    ['a\\B', /non-word-boundary '\\B' is not supported at position 1/],
    ['(?i)abc', /group modifier '\(\?i' \(inline flags\) is not supported at position 0/],
    ['\\p{L}+', /Unicode property escape '\\p\{...\}' is not supported at position 0/],
    ['a^b', /anchor '\^' inside the pattern at position 1/],
    ['a$b', /anchor '\$' inside the pattern at position 1/],
    ['(^a)', /anchor '\^' inside the pattern at position 1/],
    ['a{', /lone '\{'/],
    ['*a', /quantifier '\*' with nothing to repeat at position 0/],
    ['a**', /quantifier after a quantifier/],
    ['(ab', /unclosed '\(' at position 0/],
    ['ab)', /unmatched '\)' at position 2/],
    ['[ab', /unclosed '\[' at position 0/],
    ['[z-a]', /character class range out of order at position 1/],
    ['a{3,2}', /maximum below its minimum at position 1/],
    ['ab\\', /trailing backslash at position 2/],
    ['\\e', /unknown escape '\\e' at position 0/],
    ['[\\d-z]', /class escape used as a range endpoint/],
    ['\\uD800', /lone surrogate escape/],
  ];
  for (const [p, re] of bad) {
    t.throws(() => compileRegex(p), { name: 'StructuredOutputError', message: re }, p);
  }
});

t.test('anchors at the ends are no-ops; large counts are split for the native parser', async (t) => {
  const g = compileRegex('^ab|^cd$|ef$');
  for (const s of ['ab', 'cd', 'ef']) t.ok(complete(g, s), s);
  t.notOk(complete(g, 'abcd'));
  const big = compileRegex('a{12000,12001}');
  t.ok(native.grammarCheck(big).rules > 0, 'a{12000,12001} parses natively');
  t.ok(complete(big, 'a'.repeat(12000)) && complete(big, 'a'.repeat(12001)));
  t.notOk(complete(big, 'a'.repeat(11999)));
  t.notOk(complete(big, 'a'.repeat(12002)));
  const wide = compileRegex('b{0,25000}');
  t.ok(complete(wide, '') && complete(wide, 'b'.repeat(10000)) && complete(wide, 'b'.repeat(25000)));
  t.notOk(complete(wide, 'b'.repeat(25001)));
});
