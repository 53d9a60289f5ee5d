// Mistral's tool calls end to end on a scripted model with Mistral Nemo's vocabulary and chat template (the parser
// detected from it): [TOOL_CALLS] is a control token the grammar and the parser see in the text, and a follow-up
// turn that sends the calls back renders (the template refuses tool-call ids other than 9 letters or digits, so the
// ids a client sends, Spindle's own included, or none at all from Ollama's clients, are mapped as vLLM maps them:
// lib/chat/mistral-tool-ids.ts) on the OpenAI chat route, the Responses API and Ollama's /api/chat.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { tokenizerGguf } from '../lib/random-model/tokenizer.js';
import { mistralToolCallId, withMistralToolCallIds } from '../lib/chat/mistral-tool-ids.js';
import type { ChatMessage } from '../lib/chat/template.js';
import { chain, writeScriptedModel } from './tooling/fixtures/index.js';

const vocab = tokenizerGguf('mistral_nemo');
const id = (piece: string): number => {
  const i = vocab.tokens.indexOf(piece);
  if (i < 0) throw new Error(`no token ${piece}`);
  return i;
};
// after [/INST]: [TOOL_CALLS][{"name":"get_time","arguments":{}}]</s> (byte-level pieces: distinct tokens)
const SCRIPT = ['[TOOL_CALLS]', '[', '{"', 'name', '":"', 'get', '_time', '","', 'arguments', '":', '{', '}}', ']', '</s>'].map(id);
const dir = mkdtempSync(join(tmpdir(), 'spindle-mistral-tools-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const modelPath = await writeScriptedModel(join(dir, 'scripted.gguf'), chain(id('[/INST]'), SCRIPT), 'mistral_nemo');

const app = await buildApp({
  engine: normalizeEngineOptions({ model: modelPath, maxModelLen: 2048, threads: 2 }, 'serve'), servedModelNames: ['scripted'],
});
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const ollama = new Ollama({ host: base });
const TOOLS = [{ type: 'function' as const, function: { name: 'get_time', description: 'The time', parameters: { type: 'object', properties: {} } } }];
const ask = [{ role: 'user' as const, content: 'What time is it?' }];

t.test('ids: 9 letters or digits kept, others cut to their last 9 or hashed, missing ones made and matched in order', async (t) => {
  t.equal(mistralToolCallId('abcDEF123'), 'abcDEF123');
  t.equal(mistralToolCallId('call_0123456789abcdef01234567'), 'bcdef01234567'.slice(-9));
  t.match(mistralToolCallId('x-1'), /^[a-z0-9]{9}$/);
  t.equal(mistralToolCallId('x-1'), mistralToolCallId('x-1'), 'the same id maps alike');
  const history: ChatMessage[] = [
    { role: 'user', content: 'q' },
    { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'a', arguments: {} } }, { type: 'function', function: { name: 'b', arguments: {} } }] },
    { role: 'tool', content: '1' },
    { role: 'tool', content: '2' },
  ];
  const out = withMistralToolCallIds(history);
  const ids = (out[1].tool_calls as { id: string }[]).map((c) => c.id);
  t.ok(ids.every((x) => /^[A-Za-z0-9]{9}$/.test(x)) && ids[0] !== ids[1], `made ids ${ids.join(', ')}`);
  t.same([out[2].tool_call_id, out[3].tool_call_id], ids, 'tool results answer the calls in order');
  t.notOk('id' in (history[1].tool_calls![0] as object), 'the messages given are not changed');
});

t.test('OpenAI chat: the call, then a follow-up turn with the ids the server returned', async (t) => {
  const r = await client.chat.completions.create({ model: 'scripted', messages: ask, tools: TOOLS, temperature: 0, max_tokens: 32 });
  const m = r.choices[0].message;
  t.equal(r.choices[0].finish_reason, 'tool_calls');
  t.same(m.tool_calls?.map((c) => [c.function.name, c.function.arguments]), [['get_time', '{}']]);
  t.equal(m.content ?? '', '', '[TOOL_CALLS] does not leak into the content');
  const follow = await client.chat.completions.create({
    model: 'scripted', tools: TOOLS, temperature: 0, max_tokens: 32,
    messages: [...ask, m, { role: 'tool', tool_call_id: m.tool_calls![0].id, content: '12:00' }],
  });
  t.equal(follow.choices.length, 1, `the follow-up rendered (the server's id ${m.tool_calls![0].id} mapped to 9 characters)`);
  const stream = await client.chat.completions.create({ model: 'scripted', messages: ask, tools: TOOLS, temperature: 0, max_tokens: 32, stream: true });
  let name = '', args = '';
  for await (const chunk of stream) {
    for (const d of chunk.choices[0]?.delta.tool_calls ?? []) { name += d.function?.name ?? ''; args += d.function?.arguments ?? ''; }
  }
  t.same([name, args], ['get_time', '{}'], 'streamed alike');
});

t.test('Responses API: a function_call item, then its output sent back', async (t) => {
  const r = await client.responses.create({ model: 'scripted', input: 'What time is it?', tools: [{ type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} }, strict: false }], temperature: 0, max_output_tokens: 32 });
  const call = r.output.find((o) => o.type === 'function_call');
  t.ok(call && call.type === 'function_call' && call.name === 'get_time');
  const follow = await client.responses.create({
    model: 'scripted', previous_response_id: r.id, temperature: 0, max_output_tokens: 32,
    tools: [{ type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} }, strict: false }],
    input: [{ type: 'function_call_output', call_id: (call as { call_id: string }).call_id, output: '12:00' }],
  });
  t.ok(['completed', 'incomplete'].includes(follow.status ?? ''), `the follow-up rendered (${follow.status}: off the script, the model runs to max_output_tokens)`);
});

t.test("Ollama /api/chat: a tool call, then history without ids (Ollama's clients send none)", async (t) => {
  const r = await ollama.chat({ model: 'scripted', messages: ask, tools: TOOLS, options: { temperature: 0, num_predict: 32 } });
  t.same(r.message.tool_calls?.map((c) => [c.function.name, c.function.arguments]), [['get_time', {}]]);
  const follow = await ollama.chat({
    model: 'scripted', tools: TOOLS, options: { temperature: 0, num_predict: 32 },
    messages: [...ask, { role: 'assistant', content: '', tool_calls: r.message.tool_calls }, { role: 'tool', content: '12:00' }],
  });
  t.ok(follow.done, 'the follow-up rendered');
});
