// Tokenizer conformance against llama.cpp (node-llama-cpp, vocab-only load of the same GGUF) for the five
// fixture tokenizer families (mistral_nemo: BPE with the tekken pre-tokenizer's case-split words; gemma3: SentencePiece with no space prefix, user-defined whitespace runs and
// HTML tags, byte fallback): identical token ids for ~100 hand-picked strings and a few hundred seeded random
// ones (parseSpecial on/off, with/without BOS), identical detokenization (special on/off), identical EOG set
// and per-token text for the whole vocabulary, exact round trips where llama.cpp's decode has no clean-up,
// and the JS binding's argument validation.
// To test a private build: SPINDLE_NATIVE_PATH=build-tok/Release/spindle.node npx tap test/tokenizer-conformance.test.ts
import t from 'tap';
import { getLlama, LlamaLogLevel, type LlamaModel, type Token } from 'node-llama-cpp';
import { loadNative, type NativeTokenizer } from '../lib/native.js';
import { fixtureModel, type PresetName } from './helpers/fixtures.js';

type Family = 'llama3' | 'qwen3' | 'llama2' | 'gemma3' | 'mistral_nemo';
const FAMILIES: { family: Family; preset: PresetName; exactRoundTrip: boolean }[] = [
  { family: 'llama3', preset: 'llama3Vocab', exactRoundTrip: false }, // llama.cpp cleans " ," " 's" on decode
  { family: 'qwen3', preset: 'qwen3Vocab', exactRoundTrip: true },
  { family: 'llama2', preset: 'llama2Vocab', exactRoundTrip: true },
  { family: 'gemma3', preset: 'gemma3Vocab', exactRoundTrip: true },
  { family: 'mistral_nemo', preset: 'mistralNemoVocab', exactRoundTrip: true }, // tekken: no clean-up on decode
];

const SPECIALS = [
  '<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>',
  '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>', '<s>', '</s>', '<unk>',
  '<bos>', '<eos>', '<pad>', '<mask>', '<start_of_turn>', '<end_of_turn>', '<start_of_image>', '<unused0>', '<b>', '</td>',
  '[INST]', '[/INST]', '[TOOL_CALLS]', '[AVAILABLE_TOOLS]', '[SYSTEM_PROMPT]',
];

const STRINGS: string[] = [
  // ASCII, spaces, tabs, newlines
  'Hello world', 'hello', 'Hello, world!', ' Hello', '  Hello', '   leading spaces', 'trailing spaces   ',
  'a  b   c    d', 'tab\there', '\t\tdouble tab', 'line1\nline2', 'line1\r\nline2\r\n', '\n\n\nthree newlines',
  ' \n \n ', '   ', ' ', '\t', '\n', 'x', '', 'mixed \t \n whitespace\t\n', 'end with newline\n', 'a\u00a0b nbsp',
  'ideographic\u3000space', 'line\u2028separator', '\u0085next line',
  // contractions, case
  "I'm", "DON'T", "you're we've they'll he'd it's", "I'M YOU'RE WE'VE", "'s 't 're", "O'Neil's", "rock 'n' roll",
  "can't won't shouldn't", 'ALL CAPS SENTENCE', 'camelCaseIdentifier', 'snake_case_identifier',
  // numbers
  '1234567', '3.14159', '0', '42', '1,000,000', '12 345 6789', 'x1y22z333w4444', '1e-10', '-273.15', '¹²³ ½',
  '٣٤٥ Arabic digits', 'Ⅻ roman', '$100.00!!', '99%', '2024-01-15T10:30:00Z',
  // code
  'function foo(bar) { return bar * 2; }', 'for (int i = 0; i < n; ++i) {\n    x += i;\n}',
  'def f(x):\n    return x ** 2\n', '<div class="a">b</div>', 'SELECT * FROM t WHERE id = 1;', 'a->b && c || !d',
  '    indented four', '\tindented tab', '#include <stdio.h>', 'x = [1, 2, 3]  # comment', '{"key": "value", "n": 1}',
  // punctuation runs
  'hello...world???', '!!!', '?!', '---', '...', '"quoted"', '(parenthesized)', '[brackets]', 'a, b; c: d.',
  'Hi , you ! ok ? yes .', "x ' y", 'don \'t', 'em—dash – en', '«guillemets»', '¿Qué? ¡Sí!',
  // CJK, other scripts
  '你好世界', '你好，世界！', 'こんにちは、世界！', 'カタカナ ひらがな 漢字', '안녕하세요 세계', '中文 English 混合',
  'مرحبا بالعالم', 'שלום עולם', 'Привет, мир!', 'Γειά σου Κόσμε', 'नमस्ते दुनिया', 'สวัสดีชาวโลก',
  // emoji, ZWJ, combining marks
  '👩‍👩‍👧', '👩‍👩‍👧 family', '🙂🙂🙂', '👍🏽 thumbs', '🇺🇸 flag', 'e\u0301te\u0301', 'naïve café', 'Ünïcödé',
  'a\u0300\u0301\u0302', 'Z\u0351\u0352\u0353algo', 'zero\u200bwidth', 'a\u200db', '\ufeffbom',
  // special-token text
  '<|im_start|>user\nhi<|im_end|>', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n',
  '<|begin_of_text|>', '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
  '<s>[INST] hi [/INST]', '<s> hi </s>', 'a</s>b', '<unk>', '<think>\nreasoning\n</think>\nanswer',
  '<|endoftext|>', 'x<|im_end|>y', '<|im_start|><|im_start|>', '< |im_start| >', '<|im_start', 'im_start|>',
  // Gemma: turn markers, user-defined whitespace runs (up to 31) and HTML tags, image markers, unused ids
  '<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n', '<start_of_turn>', ' <end_of_turn> ',
  'x<end_of_turn>y', '<eos>', '<pad><mask>[multimodal]', '<unused0><unused99>', '<start_of_image><end_of_image>',
  '<table><tr><td>a</td></tr></table>', '<b>bold</b> <i>it</i> <code>x</code>', '<h1>Title</h1>\n<p>text</p>',
  ' '.repeat(31), ' '.repeat(40) + 'x', '\n'.repeat(31), '\n'.repeat(45), '\t'.repeat(33), 'a \t\n \t\n b',
  '  \n\n  \t\t  ', 'x' + ' '.repeat(5) + 'y' + '\n'.repeat(3) + 'z', '\u2581already escaped \u2581\u2581',
  // tekken: case-split words (an upper run, then a lower one), letters >= 128 both, single digits, [\r\n/]* after symbols
  'HELLO world', 'HelloWorld', 'camelCaseABCdef', 'ABCdefGHI', 'ÉCOLE école ÉCole', 'ΣΊΣΥΦΟΣ σίσυφος', 'İstanbul ǅemal',
  'path/to/file.txt\n/next', 'a+/\n/b', '[INST] What is 2+2? [/INST]', '<s>[INST] hi [/INST] yo</s>', 'x[TOOL_CALLS][{"a":1}]',
  'Ǆ ǅ ǆ ʰʱ ˢ', 'e\u0301E\u0301 A\u0308b',
];

// Seeded random strings mixing the categories above (and random code points from stable blocks).
function randomStrings(n: number, seed: number): string[] {
  let s = seed >>> 0;
  const rnd = () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 4294967296; };
  const pick = <T>(a: readonly T[]) => a[Math.floor(rnd() * a.length)];
  const pieces = [
    ' ', '  ', '\t', '\n', '\r\n', 'a', 'Z', 'hello', 'World', "'s", "'T", "'re", "'LL", '0', '12', '345', '3.14',
    '你好', '世界', 'こんにちは', '한국어', '👩‍👩‍👧', '🙂', 'e\u0301', 'ñ', 'مرحبا', 'שלום', '!', '?', '...', '$', '_',
    '-', '(', ')', '{', '}', '\u00a0', '\u3000', ...SPECIALS,
  ];
  // Blocks assigned before Unicode 15.1 (llama.cpp's tables): Latin..Arabic, CJK, Hangul, symbols, emoji.
  const blocks: [number, number][] = [[0x20, 0x24f], [0x370, 0x6ff], [0x900, 0x97f], [0x2000, 0x206f],
    [0x2190, 0x23ff], [0x3040, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0x1f300, 0x1f64f]];
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let text = '';
    const parts = 1 + Math.floor(rnd() * 12);
    for (let k = 0; k < parts; k++) {
      if (rnd() < 0.8) text += pick(pieces);
      else { const [lo, hi] = pick(blocks); text += String.fromCodePoint(lo + Math.floor(rnd() * (hi - lo + 1))); }
    }
    out.push(text);
  }
  return out;
}

const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.disabled });
const native = loadNative();

interface Pair { model: LlamaModel; tok: NativeTokenizer; }

async function open(preset: PresetName): Promise<Pair> {
  const path = await fixtureModel(preset);  // vocabulary-only GGUF (metadata, no tensors)
  const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
  return { model, tok: native.Tokenizer.fromFile(path) };
}

// Every mismatch (up to a few) with the text that caused it; `count` of comparisons made.
function compareEncodings(p: Pair, texts: string[]): { count: number; bad: string[] } {
  const bad: string[] = [];
  let count = 0;
  const bos = p.model.tokens.bos;
  const prependBos = p.model.tokens.shouldPrependBosToken;
  const appendEos = p.model.tokens.shouldAppendEosToken;
  for (const text of texts) {
    for (const parseSpecial of [false, true]) {
      const ref = p.model.tokenize(text, parseSpecial) as number[];
      for (const addSpecial of [false, true]) {
        let expected = ref;
        if (addSpecial) {
          expected = [...(prependBos && bos != null ? [bos as number] : []), ...ref];
          if (appendEos && p.model.tokens.eos != null) expected.push(p.model.tokens.eos as number);
        }
        const ours = Array.from(p.tok.encode(text, addSpecial, parseSpecial));
        count++;
        if (JSON.stringify(ours) !== JSON.stringify(expected) && bad.length < 5) {
          bad.push(`${JSON.stringify(text)} add=${addSpecial} parse=${parseSpecial}: ours ${JSON.stringify(ours)} ` +
            `llama.cpp ${JSON.stringify(expected)}`);
        }
      }
      for (const special of [false, true]) {
        const ref2 = p.model.detokenize(ref as Token[], special);
        const ours2 = p.tok.decode(ref, !special);
        count++;
        if (ref2 !== ours2 && bad.length < 5) {
          bad.push(`decode ${JSON.stringify(text)} parse=${parseSpecial} special=${special}: ours ` +
            `${JSON.stringify(ours2)} llama.cpp ${JSON.stringify(ref2)}`);
        }
      }
    }
  }
  return { count, bad };
}

for (const { family, preset, exactRoundTrip } of FAMILIES) {
  t.test(`${family}: same tokens and text as llama.cpp`, async (t) => {
    const p = await open(preset);
    t.teardown(() => p.model.dispose());

    // node-llama-cpp reports BOS/EOS only when they are control tokens; llama.cpp's own id may be a default
    // (BPE: 11) that is an ordinary token, which we report as llama_vocab_bos does.
    const isControl = (id: number) => p.tok.decode([id], true) === '' && p.tok.decode([id], false) !== '';
    for (const [name, ours, ref] of [['BOS', p.tok.bosId, p.model.tokens.bos], ['EOS', p.tok.eosId, p.model.tokens.eos]] as const) {
      if (ref != null) t.equal(ours, ref, `${name} id`);
      else t.ok(ours < 0 || !isControl(ours), `${name}: none, or not a control token (${ours})`);
    }
    t.equal(p.tok.addBos && p.tok.bosId >= 0, p.model.tokens.shouldPrependBosToken, 'adds BOS');

    const fixed = compareEncodings(p, STRINGS);
    t.same(fixed.bad, [], `${STRINGS.length} strings, ${fixed.count} comparisons`);
    const random = compareEncodings(p, randomStrings(300, 0x5eed + family.length));
    t.same(random.bad, [], `300 random strings, ${random.count} comparisons`);

    if (exactRoundTrip) {
      // (SentencePiece reads a literal U+2581 as its escaped space, so that text comes back as ' ')
      const broken = STRINGS.filter((s) => !s.includes('\u2581') && p.tok.decode(p.tok.encode(s, false, false), false) !== s);
      t.same(broken, [], 'decode(encode(s)) === s');
    }

    // Whole vocabulary: EOG membership and each token's text, special or not.
    const eog: number[] = [];
    const badPieces: string[] = [];
    for (let id = 0; id < p.tok.nVocab; id++) {
      if (p.model.isEogToken(id as Token)) eog.push(id);
      for (const special of [false, true]) {
        const ref = p.model.detokenize([id as Token], special);
        const ours = p.tok.decode([id], !special);
        if (ref !== ours && badPieces.length < 5) badPieces.push(`${id} special=${special}: ${JSON.stringify(ours)} vs ${JSON.stringify(ref)}`);
      }
    }
    t.same(Array.from(p.tok.eogIds), eog, 'EOG set');
    t.ok(eog.every((id) => p.tok.isEog(id)), 'isEog agrees');
    t.same(badPieces, [], 'single-token text over the whole vocabulary');
  });
}

t.test('Tokenizer binding validates its arguments', async (t) => {
  const p = await open('qwen3Vocab');
  t.teardown(() => p.model.dispose());
  const tok = p.tok as unknown as Record<string, (...a: unknown[]) => unknown>;
  const n = p.tok.nVocab;
  t.throws(() => tok.encode(42), { name: 'TypeError', message: /text/ });
  t.throws(() => tok.encode('x', 'yes'), { name: 'TypeError', message: /addSpecial/ });
  t.throws(() => tok.encode('x', false, 1), { name: 'TypeError', message: /parseSpecial/ });
  t.throws(() => tok.decode('abc'), { name: 'TypeError', message: /ids/ });
  t.throws(() => tok.decode([1, 'a']), { name: 'TypeError', message: /ids\[1\]/ });
  t.throws(() => tok.decode([1, 2.5]), { name: 'RangeError', message: /ids\[1\]/ });
  t.throws(() => tok.decode([n]), { name: 'RangeError', message: /ids\[0\]/ });
  t.throws(() => tok.decode(Int32Array.from([0, -1])), { name: 'RangeError', message: /ids\[1\]/ });
  t.throws(() => tok.decode(new Uint32Array(2)), { name: 'TypeError', message: /ids/ });
  t.throws(() => tok.decode([0], 'no'), { name: 'TypeError', message: /skipSpecial/ });
  t.throws(() => tok.tokenToPiece(), { name: 'TypeError', message: /id/ });
  t.throws(() => tok.tokenToPiece(n), { name: 'RangeError', message: /id/ });
  t.throws(() => tok.tokenToPiece(NaN), { name: 'RangeError', message: /id/ });
  t.throws(() => tok.isEog('1'), { name: 'TypeError', message: /id/ });
  t.throws(() => tok.isEog(-1), { name: 'RangeError', message: /id/ });
  const Ctor = native.Tokenizer as unknown as new (...a: unknown[]) => unknown;
  t.throws(() => new Ctor(), { name: 'TypeError', message: /fromFile/ });
  t.throws(() => native.Tokenizer.fromFile(42 as unknown as string), { name: 'TypeError', message: /path/ });
  t.throws(() => native.Tokenizer.fromFile('/nonexistent/file.gguf'), /nonexistent/);

  t.same(Array.from(p.tok.encode('')), []);
  t.equal(p.tok.decode([]), '');
  const ids = p.tok.encode('héllo 世界');
  t.equal(p.tok.decode(Array.from(ids)), 'héllo 世界');
  t.equal(p.tok.decode(ids), 'héllo 世界');
  t.type(p.tok.tokenToPiece(ids[0]), Buffer);
  t.equal(Buffer.concat(Array.from(ids, (id) => p.tok.tokenToPiece(id))).toString(), 'héllo 世界');
});
