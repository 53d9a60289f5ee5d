// Reasoning parsers (lib/reasoning): the split of a reasoning model's output into reasoning and answer, streamed
// at every cut point and whole, the start read from the prompt, detection from chat templates, and the grammar
// that lets reasoning through before a constrained answer (checked with the engine's own matcher).
import t from 'tap';
import { complete, int, rng, show } from './helpers/grammar-check.js';
import {
  ReasoningStream, detectReasoningParser, getReasoningParser, reasoningStart, splitReasoning, withReasoning,
  type ReasoningParser, type ReasoningStart,
} from '../lib/reasoning/index.js';
import { compileJsonSchema, compileRegex } from '../lib/structured/index.js';
import { renderChatTemplate } from '../lib/chat/template.js';
import { loadTokenizerFiles } from '../lib/random-model/tokenizer.js';

const qwen3 = getReasoningParser('qwen3')!;
const r1 = getReasoningParser('deepseek_r1')!;

/** The stream fed in the given pieces, joined by kind (and whether it reasoned). */
function streamed(p: ReasoningParser, start: ReasoningStart, pieces: string[]) {
  const s = new ReasoningStream(p, start);
  const out = pieces.flatMap((x) => s.push(x)).concat(s.finish());
  const join = (k: string) => out.filter((x) => x.kind === k).map((x) => x.text).join('');
  for (let i = 1; i < out.length; ++i) if (out[i].kind === out[i - 1].kind && out[i].text === '') return null;
  return { reasoning: s.reasoned ? join('reasoning') : null, content: join('content') };
}

const CASES: [ReasoningParser, ReasoningStart, string, string | null, string][] = [
  [qwen3, 'by-output', '<think>\nLet me see.\n</think>\n\nThe answer is 4.', 'Let me see.', 'The answer is 4.'],
  [qwen3, 'by-output', '  <think>a < b, </thin is not the end</think>x', 'a < b, </thin is not the end', 'x'],
  [qwen3, 'by-output', 'No reasoning here.', null, 'No reasoning here.'],
  [qwen3, 'by-output', '\n\nLeading whitespace kept', null, '\n\nLeading whitespace kept'],
  [qwen3, 'by-output', '<thinking> is not the tag', null, '<thinking> is not the tag'],
  [qwen3, 'by-output', '<think>\nnever closed because max_tokens', 'never closed because max_tokens', ''],
  [qwen3, 'by-output', '<think>\n\n</think>\n\nEmpty block', '', 'Empty block'],
  [qwen3, 'by-output', '<thi', null, '<thi'],
  [qwen3, 'reasoning', 'Prompt opened it.\n</think>\n\nAnswer <think>stays</think> text', 'Prompt opened it.', 'Answer <think>stays</think> text'],
  [qwen3, 'reasoning', '<think>written again</think>A', 'written again', 'A'],
  [qwen3, 'reasoning', 'cut at <', 'cut at <', ''],
  [qwen3, 'content', '<think>not parsed</think>', null, '<think>not parsed</think>'],
  [r1, 'reasoning', 'R1 starts thinking</think>\n\nAnswer', 'R1 starts thinking', 'Answer'],
  [r1, 'reasoning', '<think>\nR1-0528 opens it</think>Answer', 'R1-0528 opens it', 'Answer'],
];

t.test('splitReasoning: reasoning and answer, the tags and the whitespace around them dropped', async (t) => {
  for (const [p, start, text, reasoning, content] of CASES) {
    t.same(splitReasoning(p, start, text), { reasoning, content }, `${p.name} ${start} ${show(text)}`);
  }
});

t.test('the stream gives the same split at every cut point, and character by character', async (t) => {
  for (const [p, start, text] of CASES) {
    const whole = splitReasoning(p, start, text);
    for (let cut = 0; cut <= text.length; ++cut) {
      const got = streamed(p, start, [text.slice(0, cut), text.slice(cut)]);
      if (JSON.stringify(got) !== JSON.stringify(whole)) t.fail(`${show(text)} cut at ${cut}: ${show(got)}`);
    }
    t.same(streamed(p, start, [...text]), whole, `char by char: ${show(text)}`);
  }
  const r = rng(7);
  const alphabet = ['<think>', '</think>', '<', '</', '</th', 'ink>', ' ', '\n', 'a', 'b c', '<th'];
  for (let i = 0; i < 400; ++i) {
    const text = Array.from({ length: int(r, 0, 12) }, () => alphabet[int(r, 0, alphabet.length - 1)]).join('');
    for (const start of ['by-output', 'reasoning', 'content'] as const) {
      const pieces: string[] = [];
      for (let at = 0; at < text.length;) { const n = int(r, 1, 4); pieces.push(text.slice(at, at + n)); at += n; }
      t.same(streamed(qwen3, start, pieces), splitReasoning(qwen3, start, text), `random ${start} ${show(text)}`);
    }
  }
});

t.test('reasoning deltas are sent as they arrive; only a possible tag and trailing whitespace wait', async (t) => {
  const s = new ReasoningStream(qwen3, 'by-output');
  t.same(s.push('<thi'), [], 'a possible start tag waits');
  t.same(s.push('nk>\nStep one'), [{ kind: 'reasoning', text: 'Step one' }]);
  t.same(s.push(' and </th'), [{ kind: 'reasoning', text: ' and' }], 'the space and a possible end tag wait');
  t.same(s.push('ink>\n\n'), [], 'the end tag and the whitespace after it give nothing');
  t.same(s.push('Answer'), [{ kind: 'content', text: 'Answer' }]);
  t.same(s.finish(), []);
});

t.test('reasoningStart reads the rendered prompt; names, aliases and detection', async (t) => {
  t.equal(reasoningStart(qwen3, '<|im_start|>assistant\n<think>\n'), 'reasoning', 'Qwen3-Thinking / R1: block opened');
  t.equal(reasoningStart(qwen3, '<|im_start|>assistant\n<think>\n\n</think>\n\n'), 'content', 'enable_thinking false');
  t.equal(reasoningStart(qwen3, '<|im_start|>assistant\n'), 'by-output');
  t.equal(reasoningStart(r1, '<｜Assistant｜>'), 'reasoning', 'deepseek_r1 reasons from the first token');
  t.equal(getReasoningParser('DeepSeek-R1')?.name, 'deepseek_r1');
  t.equal(getReasoningParser('qwen3-thinking')?.name, 'qwen3');
  t.equal(getReasoningParser('none'), null);
  t.throws(() => getReasoningParser('granite'), /unknown reasoning parser 'granite' \(have: qwen3, deepseek_r1, deepseek-r1, qwen3-thinking, none\)/);
  const qwen3Template = loadTokenizerFiles('qwen3').config.chat_template as string;
  t.equal(detectReasoningParser(qwen3Template)?.name, 'qwen3', "Qwen3's own template");
  t.equal(detectReasoningParser(loadTokenizerFiles('llama3').config.chat_template as string), null, "Llama 3's");
});

t.test('withReasoning: free reasoning, then exactly the original grammar', async (t) => {
  const json = { kind: 'json' as const, gbnf: compileJsonSchema({ type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] }), triggers: [] };
  const answer = '{"a": 12}';
  const either = withReasoning(json, qwen3, 'by-output').gbnf;
  const open = withReasoning(json, qwen3, 'reasoning').gbnf;
  const reasonings = ['', 'plain', 'a < b and <</ and </thin and </think and </thinK>', '<think> inside', 'ünïcödé 😀', '<',
    '</<b', 'x</think<y', '</thi</think', '<<</th<</', '</think</thin'];
  for (const r of reasonings) {
    t.ok(complete(either, `<think>\n${r}\n</think>\n\n${answer}`), `block then answer: ${show(r)}`);
    t.ok(complete(open, `${r}</think>${answer}`), `opened block: ${show(r)}`);
    t.notOk(complete(open, `${r}</think>x</think>${answer}`), 'no second end tag before the answer');
  }
  t.ok(complete(either, answer), 'qwen3 by-output: the block may be absent');
  t.notOk(complete(open, answer), 'an opened block must close first');
  t.notOk(complete(either, '<think>x</think>{"a": "no"}'), 'the answer is still constrained');
  t.notOk(complete(either, '<think>x</think>\n\nfree text'), 'free text after the block is not allowed');
  // against the definition: every text of up to 4 characters over an alphabet that spells the tag, and random
  // texts from pieces of it, are accepted as reasoning exactly when they do not contain the end tag
  const texts: string[] = [];
  const letters = ['<', '/', 't', 'h', 'i', 'n', 'k', '>', 'x'];
  const spell = (prefix: string): void => {
    if (prefix.length > 0) texts.push(prefix);
    if (prefix.length < 4) for (const c of letters) spell(prefix + c);
  };
  spell('');
  const r = rng(3);
  const pieces = ['<', '</', '</thi', 'nk>', 'ink', 'k', '>', 'x', '</think', '<t', '</think>', 'hink>'];
  for (let i = 0; i < 1500; ++i) texts.push(Array.from({ length: int(r, 1, 6) }, () => pieces[int(r, 0, pieces.length - 1)]).join(''));
  let wrong = 0;
  for (const x of texts) if (complete(open, `${x}</think>${answer}`) === x.includes('</think>')) { wrong++; t.fail(show(x)); }
  t.equal(wrong, 0, `${texts.length} texts checked against the definition`);
  const user = { kind: 'grammar' as const, gbnf: 'root ::= reasoning-answer\nreasoning-answer ::= "ok" reasoning-text0?\nreasoning-text0 ::= "!"', triggers: [] };
  const wrapped = withReasoning(user, qwen3, 'reasoning').gbnf;
  t.ok(complete(wrapped, 'hm</think>ok!'), "a user grammar's own rule names are kept apart from the reasoning rules");
  t.notOk(complete(wrapped, 'hm</think>okay'));
  const rootRef = { kind: 'grammar' as const, gbnf: 'root ::= "(" root? ")" # root in a comment\nx ::= "root" [root]', triggers: [] };
  const nested = withReasoning(rootRef, qwen3, 'reasoning').gbnf;
  t.ok(complete(nested, 'r</think>(())'), 'a recursive root keeps recursing in the answer');
  t.notOk(complete(nested, 'r</think>(()'), 'and stays balanced');
  const regex = { kind: 'regex' as const, gbnf: compileRegex('yes|no'), triggers: [] };
  t.equal(withReasoning(regex, qwen3, 'content'), regex, 'a prompt that closed the block: unchanged');
  const lazy = { kind: 'tools' as const, gbnf: regex.gbnf, triggers: [{ text: '<tool_call>', atStart: false }] };
  t.same(withReasoning(lazy, qwen3, 'by-output'), { ...lazy, reasoning: { startTag: '<think>', endTag: '</think>', inBlock: false } },
    'a lazy grammar: the same grammar, its triggers looked for after the thinking block (the engine)');
  t.same(withReasoning(lazy, qwen3, 'reasoning').reasoning, { startTag: '<think>', endTag: '</think>', inBlock: true });
  t.equal(withReasoning(lazy, qwen3, 'content'), lazy, 'a prompt that closed the block: unchanged');
});

t.test("an assistant turn's reasoning reaches Qwen3's template by either name (it renders it within a tool loop)", async (t) => {
  const qwen3Template = loadTokenizerFiles('qwen3').config.chat_template as string;
  const call = { id: 'c1', type: 'function', function: { name: 'wave', arguments: '{"times":1}' } };
  for (const key of ['reasoning_content', 'reasoning']) {
    const text = renderChatTemplate(qwen3Template, [
      { role: 'user', content: 'Wave.' },
      { role: 'assistant', content: '', tool_calls: [call], [key]: 'I should wave once.' },
      { role: 'tool', tool_call_id: 'c1', content: 'waved' },
    ]);
    t.match(text, /<\|im_start\|>assistant\n<think>\nI should wave once.\n<\/think>\n\n<tool_call>/, key);
  }
});

t.test('reasoningStart of a continued final message: its own tags decide; plain text is an answer', async (t) => {
  const qwen3 = getReasoningParser('qwen3')!;
  const r1 = getReasoningParser('deepseek_r1')!;
  t.equal(reasoningStart(qwen3, '<|im_start|>assistant\n<think>\nLet me', '<think>\nLet me'), 'reasoning', 'an open block in the prefill');
  t.equal(reasoningStart(r1, 'x</think>\n\nThe answer is', '</think>\n\nThe answer is'), 'content', 'a closed block: the answer');
  t.equal(reasoningStart(r1, '<|Assistant|>Sure,', 'Sure,'), 'content', 'plain text: an answer being written, whatever the parser');
  t.equal(reasoningStart(qwen3, '<|im_start|>assistant\n<think>\nHmm', 'Hmm'), 'reasoning', 'plain text right after an open block the prompt holds');
  t.equal(reasoningStart(qwen3, '<|im_start|>assistant\n'), 'by-output', 'not continuing: the prompt decides, as before');
});
