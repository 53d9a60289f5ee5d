// Reasoning models on every chat surface, with a scripted model (test/tooling/fixtures/scripted.ts: a qwen3 file
// whose greedy output after Qwen3's generation prompt is `<think>Reasoning.</think>\n\nHello world!`, and after a
// prompt that closed the block, `Hello world!`): /v1/chat/completions (reasoning_content / reasoning, streamed and
// whole, reasoning_tokens, enable_thinking and reasoning_effort 'none', a JSON answer and a required tool call
// constrained after the reasoning), Ollama's /api/chat and /api/generate (thinking; think false; think on a model
// that does not reason), /v1/responses (a reasoning item first; its events), capabilities, --reasoning-parser none;
// through the openai, ollama and Vercel AI SDK clients.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, streamText } from 'ai';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { tokenizerGguf } from '../lib/random-model/tokenizer.js';
import { chain, writeScriptedModel } from './tooling/fixtures/index.js';
import { fixtureModel, PRESETS } from './helpers/fixtures.js';

const vocab = tokenizerGguf('qwen3');
const id = (piece: string): number => {
  const i = vocab.tokens.indexOf(piece);
  if (i < 0) throw new Error(`no token ${piece}`);
  return i;
};
// <think> Reason ing . </think> \n\n Hello ␣world ! <|im_end|>: 10 output tokens, 5 of them reasoning
const SCRIPT = ['<think>', 'Reason', 'ing', '.', '</think>', 'ĊĊ', 'Hello', 'Ġworld', '!', '<|im_end|>'].map(id);
const dir = mkdtempSync(join(tmpdir(), 'spindle-reasoning-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const modelPath = await writeScriptedModel(join(dir, 'scripted.gguf'), chain(id('Ċ'), SCRIPT));

async function serve(extra: Record<string, unknown> = {}, path = modelPath) {
  const app = await buildApp({
    engine: normalizeEngineOptions({ model: path, maxModelLen: 1024, threads: 2 }, 'serve'),
    servedModelNames: ['scripted'], ...extra,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}
const base = await serve();
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const ollama = new Ollama({ host: base });
const user = [{ role: 'user' as const, content: 'Say hello.' }];
const greedy = { model: 'scripted', temperature: 0, max_tokens: 32 };
type Message = OpenAI.Chat.ChatCompletionMessage & { reasoning_content?: string | null; reasoning?: string | null };

t.test('chat: reasoning_content and reasoning beside the answer; reasoning_tokens', async (t) => {
  const r = await client.chat.completions.create({ ...greedy, messages: user });
  const m = r.choices[0].message as Message;
  t.equal(m.content, 'Hello world!');
  t.equal(m.reasoning_content, 'Reasoning.');
  t.equal(m.reasoning, 'Reasoning.', "vLLM's current name too");
  t.equal(r.choices[0].finish_reason, 'stop');
  t.equal(r.usage!.completion_tokens, 10);
  t.equal(r.usage!.completion_tokens_details!.reasoning_tokens, 5, '<think> Reason ing . </think>');
});

t.test('chat streamed: reasoning deltas first, then content; the same split and usage', async (t) => {
  const stream = await client.chat.completions.create({ ...greedy, messages: user, stream: true, stream_options: { include_usage: true } });
  const kinds: string[] = [];
  let reasoning = '', content = '', reasoningAlias = '';
  let usage: OpenAI.CompletionUsage | null | undefined;
  for await (const chunk of stream) {
    usage = chunk.usage ?? usage;
    const d = chunk.choices[0]?.delta as (OpenAI.Chat.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string; reasoning?: string }) | undefined;
    if (!d) continue;
    if (d.reasoning_content) { reasoning += d.reasoning_content; kinds.push('r'); }
    if (d.reasoning) reasoningAlias += d.reasoning;
    if (d.content) { content += d.content; kinds.push('c'); }
  }
  t.equal(reasoning, 'Reasoning.');
  t.equal(reasoningAlias, reasoning);
  t.equal(content, 'Hello world!');
  t.same([...new Set(kinds)], ['r', 'c'], 'every reasoning delta before the first content delta');
  t.equal(kinds.lastIndexOf('r') < kinds.indexOf('c'), true);
  t.equal(usage?.completion_tokens_details?.reasoning_tokens, 5);
});

t.test('thinking off: enable_thinking false or reasoning_effort none renders the closed block; no reasoning', async (t) => {
  for (const extra of [{ chat_template_kwargs: { enable_thinking: false } }, { reasoning_effort: 'none' }]) {
    const r = await client.chat.completions.create({ ...greedy, messages: user, ...extra } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    const m = r.choices[0].message as Message;
    t.equal(m.content, 'Hello world!', JSON.stringify(extra));
    t.notOk('reasoning_content' in m, 'no reasoning fields where the model did not reason');
    t.equal(r.usage!.completion_tokens, 4);
    t.equal(r.usage!.completion_tokens_details!.reasoning_tokens, 0);
  }
});

t.test('a JSON answer and a required tool call are constrained after the reasoning, which stays free', async (t) => {
  const schema = { type: 'object', properties: { greeting: { type: 'string', maxLength: 8 } }, required: ['greeting'], additionalProperties: false };
  const r = await client.chat.completions.create({ ...greedy, max_tokens: 64, messages: user,
    response_format: { type: 'json_schema', json_schema: { name: 'g', schema, strict: true } } });
  const m = r.choices[0].message as Message;
  t.equal(m.reasoning_content, 'Reasoning.', 'the scripted reasoning came through the grammar');
  t.match(JSON.parse(m.content!), { greeting: String }, `the answer is the schema's JSON: ${m.content}`);
  const tools = [{ type: 'function' as const, function: { name: 'wave', parameters: { type: 'object', properties: { times: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['times'] } } }];
  const c = await client.chat.completions.create({ ...greedy, max_tokens: 256, messages: user, tools, tool_choice: 'required', parallel_tool_calls: false });
  const cm = c.choices[0].message as Message;
  t.equal(cm.reasoning_content, 'Reasoning.');
  t.equal(cm.tool_calls?.length, 1, `one call: ${JSON.stringify(cm)}`);
  const call = cm.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
  t.equal(call.function.name, 'wave');
  t.match(JSON.parse(call.function.arguments), { times: Number });
  t.equal(c.choices[0].finish_reason, 'tool_calls');
});

t.test("tool_choice auto: a trigger written while thinking starts no call; the answer's text stays free", async (t) => {
  // the reasoning spells `<tool_call>` (in pieces), then the answer is plain text
  const script = ['<think>', 'I', 'Ġcould', '<', 'tool', '_call', '>', '</think>', 'ĊĊ', 'Hello', 'Ġworld', '!', '<|im_end|>'].map(id);
  const path = await writeScriptedModel(join(dir, 'scripted-trigger.gguf'), chain(id('Ċ'), script));
  const url = await serve({}, path);
  const c = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const tools = [{ type: 'function' as const, function: { name: 'wave', parameters: { type: 'object', properties: {} } } }];
  const r = await c.chat.completions.create({ ...greedy, messages: user, tools, tool_choice: 'auto' });
  const m = r.choices[0].message as Message;
  t.equal(m.reasoning_content, 'I could<tool_call>', 'the reasoning as the model wrote it');
  t.equal(m.content, 'Hello world!', 'the answer, unconstrained');
  t.notOk(m.tool_calls?.length, 'no call');
  t.equal(r.choices[0].finish_reason, 'stop');
});

t.test('ollama: message.thinking / thinking, streamed and whole; think false; capabilities', async (t) => {
  const options = { temperature: 0, num_predict: 32 };
  const chat = await ollama.chat({ model: 'scripted', messages: user, options });
  t.equal(chat.message.thinking, 'Reasoning.', 'think unset: thinking on and separated, as Ollama');
  t.equal(chat.message.content, 'Hello world!');
  let thinking = '', content = '';
  for await (const part of await ollama.chat({ model: 'scripted', messages: user, options, stream: true, think: true })) {
    thinking += part.message.thinking ?? '';
    content += part.message.content;
  }
  t.same([thinking, content], ['Reasoning.', 'Hello world!'], 'streamed');
  const off = await ollama.chat({ model: 'scripted', messages: user, options, think: false });
  t.same([off.message.thinking, off.message.content], [undefined, 'Hello world!'], 'think false: no thinking');
  const gen = await ollama.generate({ model: 'scripted', prompt: 'Say hello.', options, think: 'high' });
  t.same([gen.thinking, gen.response], ['Reasoning.', 'Hello world!'], '/api/generate; a think level');
  let gThinking = '', gResponse = '';
  for await (const part of await ollama.generate({ model: 'scripted', prompt: 'Say hello.', options, stream: true })) {
    gThinking += part.thinking ?? '';
    gResponse += part.response;
  }
  t.same([gThinking, gResponse], ['Reasoning.', 'Hello world!'], '/api/generate streamed');
  await t.rejects(ollama.chat({ model: 'scripted', messages: user, think: 'very' as 'high' }), /think must be true, false or one of "low", "medium", "high", "max" \(got "very"\)/);
  const show = await ollama.show({ model: 'scripted' });
  t.ok(show.capabilities.includes('thinking'), `capabilities: ${show.capabilities.join(', ')}`);
  const models = await client.models.list();
  t.ok((models.data[0] as unknown as { capabilities: string[] }).capabilities.includes('thinking'), '/v1/models too');
});

t.test('responses: a reasoning item before the message; its events; reasoning_tokens; effort', async (t) => {
  const r = await client.responses.create({ model: 'scripted', input: 'Say hello.', temperature: 0, max_output_tokens: 32 });
  t.equal(r.status, 'completed');
  t.equal(r.output.length, 2);
  t.match(r.output[0], { type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'Reasoning.' }], status: 'completed' });
  t.match(r.output[0].id, /^rs_/);
  t.equal(r.output_text, 'Hello world!');
  t.equal(r.usage!.output_tokens_details.reasoning_tokens, 5);
  const events: string[] = [];
  let reasoning = '';
  let done: OpenAI.Responses.Response | undefined;
  for await (const e of await client.responses.create({ model: 'scripted', input: 'Say hello.', temperature: 0, max_output_tokens: 32, stream: true })) {
    events.push(e.type);
    if (e.type === 'response.reasoning_text.delta') reasoning += e.delta;
    if (e.type === 'response.completed') done = e.response;
  }
  t.equal(reasoning, 'Reasoning.');
  t.same(events.filter((e) => !e.endsWith('.delta')), [
    'response.created', 'response.in_progress',
    'response.output_item.added', 'response.content_part.added', 'response.reasoning_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.output_item.added', 'response.content_part.added', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.completed'], 'OpenAI\'s event order, reasoning item first');
  t.same(done?.output.map((i) => ({ ...i, id: '' })), r.output.map((i) => ({ ...i, id: '' })), 'streamed items = non-streamed');
  // output logprobs: the message's tokens only (the reasoning item carries none), streamed as non-streamed
  const withLp = await client.responses.create({ model: 'scripted', input: 'Say hello.', temperature: 0, max_output_tokens: 32,
    include: ['message.output_text.logprobs'] });
  const lps = (withLp.output[1] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
  t.equal(lps.logprobs!.map((e) => e.token).join(''), 'Hello world!', "the message part's logprobs are its tokens, none of the reasoning's");
  t.ok(lps.logprobs!.every((e) => e.logprob <= 0 && e.logprob > -0.1), 'a scripted model: each token near certain');
  let streamedLp: unknown[] = [];
  for await (const e of await client.responses.create({ model: 'scripted', input: 'Say hello.', temperature: 0, max_output_tokens: 32,
    include: ['message.output_text.logprobs'], stream: true })) {
    if (e.type === 'response.output_text.done') streamedLp = e.logprobs;
  }
  t.same(streamedLp, lps.logprobs, 'streamed: the same entries');
  const none = await client.responses.create({ model: 'scripted', input: 'Say hello.', temperature: 0, max_output_tokens: 32, reasoning: { effort: 'none' } });
  t.same([none.output.length, none.output_text, none.reasoning?.effort], [1, 'Hello world!', 'none'], "effort 'none' turns thinking off");
  const next = await client.responses.create({ model: 'scripted', input: [{ type: 'item_reference', id: r.output[0].id } as never,
    { role: 'user', content: 'Again.' }], temperature: 0, max_output_tokens: 32 });
  t.equal(next.output_text, 'Hello world!', 'a stored reasoning item may be sent back');
});

t.test("a tool loop: the turn's reasoning goes back into the prompt, from the Responses store as from chat", async (t) => {
  const wave = { type: 'function' as const, name: 'wave', parameters: { type: 'object', properties: { times: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['times'] } };
  const first = await client.responses.create({ model: 'scripted', input: 'Say hello.', tools: [wave], tool_choice: 'required',
    parallel_tool_calls: false, temperature: 0, max_output_tokens: 256 });
  t.same(first.output.map((i) => i.type), ['reasoning', 'function_call']);
  const call = first.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
  const next = await client.responses.create({ model: 'scripted', previous_response_id: first.id, temperature: 0, max_output_tokens: 1,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'waved' }], tools: [wave] });
  const chatTools = [{ type: 'function' as const, function: { name: 'wave', parameters: wave.parameters } }];
  const history = (extra: Record<string, unknown>) => [...user,
    { role: 'assistant', content: null, tool_calls: [{ id: call.call_id, type: 'function', function: { name: 'wave', arguments: call.arguments } }], ...extra },
    { role: 'tool', tool_call_id: call.call_id, content: 'waved' }] as OpenAI.Chat.ChatCompletionMessageParam[];
  const withThought = await client.chat.completions.create({ ...greedy, max_tokens: 1, tools: chatTools, messages: history({ reasoning_content: 'Reasoning.' }) });
  const without = await client.chat.completions.create({ ...greedy, max_tokens: 1, tools: chatTools, messages: history({}) });
  t.equal(next.usage!.input_tokens, withThought.usage!.prompt_tokens, "the stored reasoning is rendered as the chat route's reasoning_content");
  t.ok(withThought.usage!.prompt_tokens > without.usage!.prompt_tokens, "Qwen3's template renders it within the tool loop");
});

t.test('the AI SDK reads the reasoning (openai-compatible provider)', async (t) => {
  const spindle = createOpenAICompatible({ name: 'spindle', baseURL: `${base}/v1` });
  const r = await generateText({ model: spindle('scripted'), prompt: 'Say hello.', temperature: 0, maxOutputTokens: 32 });
  t.equal(r.reasoningText, 'Reasoning.');
  t.equal(r.text, 'Hello world!');
  const s = streamText({ model: spindle('scripted'), prompt: 'Say hello.', temperature: 0, maxOutputTokens: 32 });
  let text = '';
  for await (const part of s.textStream) text += part;
  t.same([text, await s.reasoningText], ['Hello world!', 'Reasoning.']);
});

t.test('--reasoning-parser none: the raw text; a model that does not reason refuses think and effort', async (t) => {
  const raw = new OpenAI({ baseURL: `${await serve({ reasoningParser: 'none' })}/v1`, apiKey: 'unused', maxRetries: 0 });
  const r = await raw.chat.completions.create({ ...greedy, messages: user });
  t.equal(r.choices[0].message.content, '<think>Reasoning.</think>\n\nHello world!');
  t.notOk('reasoning_content' in r.choices[0].message);
  const plainBase = await serve({}, await fixtureModel(PRESETS.llama3Tiny));
  const plain = new Ollama({ host: plainBase });
  await t.rejects(plain.chat({ model: 'scripted', messages: user, think: true }), /"scripted" does not support thinking/);
  const off = await plain.chat({ model: 'scripted', messages: user, think: false, options: { num_predict: 2 } });
  t.equal(off.message.thinking, undefined, 'think false is fine anywhere');
  const plainClient = new OpenAI({ baseURL: `${plainBase}/v1`, apiKey: 'unused', maxRetries: 0 });
  await t.rejects(plainClient.responses.create({ model: 'scripted', input: 'x', reasoning: { effort: 'low' } }), /reasoning.effort: this model does not reason/);
});
