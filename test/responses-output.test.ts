// The Responses output assembler's logprob attribution (lib/server/responses/output.ts): a message's output_text part
// holds the entries of exactly the tokens whose text became its text, in order, whatever the pieces; reasoning (its
// tags and the whitespace after it), tool calls and empty-text pieces inside reasoning keep theirs out; held-back
// text takes its entries along when it turns into the answer; the events carry copies that do not grow afterwards.
import t from 'tap';
import { OutputAssembler, type Item } from '../lib/server/responses/output.js';
import type { ChatTokenLogprob } from '../lib/server/logprobs.js';
import { getReasoningParser } from '../lib/reasoning/parsers.js';

const lp = (token: string): ChatTokenLogprob => ({ token, logprob: -1, bytes: [...Buffer.from(token)], top_logprobs: [] });

/** Pushes each piece as one token; the message part's text and its entries' tokens. */
function assemble(pieces: string[], start: 'reasoning' | 'content' | 'by-output' | null): { text: string; tokens: string[]; items: Item[] } {
  const reasoning = start ? { parser: getReasoningParser('qwen3')!, start } : null;
  const a = new OutputAssembler(null, null, reasoning);
  for (const p of pieces) a.push(p, [lp(p)]);
  a.finish();
  const msg = a.items.find((i) => i.type === 'message')!;
  const part = (msg.content as Item[])[0];
  return { text: part.text as string, tokens: (part.logprobs as ChatTokenLogprob[]).map((e) => e.token), items: a.items };
}

t.test('plain text: one entry per token, spelling the text', async (t) => {
  const r = assemble(['Hel', 'lo', ' world', '!'], null);
  t.equal(r.text, 'Hello world!');
  t.same(r.tokens, ['Hel', 'lo', ' world', '!']);
});

t.test('reasoning: the block, its tags and the whitespace after it keep their entries out', async (t) => {
  const r = assemble(['Thinking', ' hard', '</think>', '\n\n', 'Answer', '.'], 'reasoning');
  t.same([r.text, r.tokens], ['Answer.', ['Answer', '.']]);
  const empty = assemble(['<think>', '\n\n', '</think>', '\n\n', 'Answer'], 'by-output');  // an empty block the model wrote
  t.same([empty.text, empty.tokens], ['Answer', ['Answer']]);
  const none = assemble(['Just', ' text'], 'by-output');  // no block: held while undecided, then the answer
  t.same([none.text, none.tokens], ['Just text', ['Just', ' text']]);
});

t.test('an empty-text piece (half a UTF-8 character) waits for its text; inside reasoning it is dropped', async (t) => {
  const a = new OutputAssembler(null, null, null);
  a.push('', [lp('<b1>')]);
  a.push('é', [lp('<b2>')]);
  a.finish();
  t.same(((a.items[0].content as Item[])[0].logprobs as ChatTokenLogprob[]).map((e) => e.token), ['<b1>', '<b2>']);
  const r = new OutputAssembler(null, null, { parser: getReasoningParser('qwen3')!, start: 'reasoning' });
  r.push('Think', [lp('Think')]);
  r.push('', [lp('<b1>')]);
  r.push('</think>', [lp('</think>')]);
  r.push('Answer', [lp('Answer')]);
  r.finish();
  const msg = r.items.find((i) => i.type === 'message')!;
  t.same(((msg.content as Item[])[0].logprobs as ChatTokenLogprob[]).map((e) => e.token), ['Answer']);
});

t.test('events: content_part.added carries an empty copy; deltas carry their tokens', async (t) => {
  const events: Array<{ type: string; fields: Record<string, unknown> }> = [];
  const a = new OutputAssembler(null, (type, fields) => events.push({ type, fields }), null);
  a.push('A', [lp('A')]);
  a.push('B', [lp('B')]);
  a.finish();
  const added = events.find((e) => e.type === 'response.content_part.added')!;
  t.same((added.fields.part as Item).logprobs, [], 'still empty after the part grew');
  t.same(events.filter((e) => e.type === 'response.output_text.delta').map((e) => (e.fields.logprobs as ChatTokenLogprob[]).map((x) => x.token)), [['A'], ['B']]);
  t.same((events.find((e) => e.type === 'response.output_text.done')!.fields.logprobs as ChatTokenLogprob[]).map((x) => x.token), ['A', 'B']);
});
