// The Responses API (POST /v1/responses, GET / DELETE /v1/responses/{id}, POST /v1/responses/{id}/cancel) through
// the real `openai` client on a
// real socket: the output equals the chat route's for the same messages (greedy), streamed events come in
// OpenAI's order with increasing sequence numbers and assemble to the non-streamed output, previous_response_id
// continues the stored conversation (and store: false keeps none), function tools give function_call items whose
// arguments validate (streamed: arguments deltas), a function_call_output continues the turn, text.format
// json_schema constrains the text, background responses (queued at once, polled, cancelled; streamed, the stream
// resumed after starting_after) and GET of one still streaming, and what this server does not take is a 400 naming it; then the Vercel AI
// SDK's OpenAI provider (@ai-sdk/openai, which speaks the Responses API by default): text, stream, a tool loop.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import Ajv2020 from 'ajv/dist/2020.js';
import OpenAI from 'openai';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';
import { TOOLS } from './helpers/structured-schemas.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const MODEL = 'tiny-qwen3';
const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const app = await buildApp({
  engine: normalizeEngineOptions({ model: path, maxModelLen: 4096, threads: 2 }, 'serve'),
  servedModelNames: [MODEL],
  // Qwen3's template makes the server read a reasoning block first, which this random model would wander into
  // before the constrained answer; test/server-reasoning.test.ts covers reasoning (with a scripted model).
  reasoningParser: 'none',
});
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const baseURL = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`;
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
const ajv = new (Ajv2020 as unknown as typeof Ajv2020.default)({ strict: false });

// Responses tools are flat: { type: 'function', name, description, parameters }.
const FLAT_TOOLS = TOOLS.map((x) => ({ type: 'function' as const, name: x.function.name, description: x.function.description,
  parameters: x.function.parameters as Record<string, unknown>, strict: true }));
const greedy = { temperature: 0, max_output_tokens: 12 };

async function chatText(messages: OpenAI.Chat.ChatCompletionMessageParam[], maxTokens = 12): Promise<{ text: string; prompt: number }> {
  const r = await client.chat.completions.create({ model: MODEL, messages, temperature: 0, max_tokens: maxTokens });
  return { text: r.choices[0].message.content ?? '', prompt: r.usage!.prompt_tokens };
}

t.test('text: the chat route\'s output for the same messages; usage; GET returns it; DELETE forgets it', async (t) => {
  const r = await client.responses.create({ model: MODEL, input: 'Tell me about spindles.', instructions: 'Be brief.', ...greedy });
  t.match(r.id, /^resp_[0-9a-f]{32}$/);
  t.equal(r.object, 'response');
  t.equal(r.status, 'incomplete', '12 tokens of a random model: cut by max_output_tokens');
  t.same(r.incomplete_details, { reason: 'max_output_tokens' });
  t.equal(r.output.length, 1);
  const item = r.output[0];
  if (item.type !== 'message') throw new Error(`a ${item.type} item`);
  t.match(item, { role: 'assistant', status: 'incomplete', content: [{ type: 'output_text', annotations: [] }] }, 'cut: the item says so too');
  const chat = await chatText([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me about spindles.' }]);
  t.equal(r.output_text, chat.text, 'instructions are the system message; same greedy text as chat');
  t.same(r.usage, { input_tokens: chat.prompt, input_tokens_details: { cached_tokens: r.usage!.input_tokens_details.cached_tokens },
    output_tokens: 12, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: chat.prompt + 12 });
  t.same(await client.responses.retrieve(r.id), r, 'GET /v1/responses/{id}');
  const del = await fetch(`${baseURL}/responses/${r.id}`, { method: 'DELETE' });
  t.same(await del.json(), { id: r.id, object: 'response', deleted: true });
  await t.rejects(client.responses.retrieve(r.id), { status: 404 });
});

t.test('streamed: OpenAI\'s event order, sequence numbers, deltas = the non-streamed output', async (t) => {
  const input = [{ role: 'user' as const, content: [{ type: 'input_text' as const, text: 'Hello there' }] }];
  const whole = await client.responses.create({ model: MODEL, input, ...greedy });
  const stream = await client.responses.create({ model: MODEL, input, ...greedy, stream: true });
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const e of stream) events.push(e);
  t.same(events.map((e) => e.type), ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.content_part.added', ...events.filter((e) => e.type === 'response.output_text.delta').map(() => 'response.output_text.delta'),
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete']);
  t.same(events.map((e) => e.sequence_number), events.map((_, i) => i), 'sequence_number counts from 0');
  const text = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
  t.equal(text, whole.output_text, 'the deltas are the non-streamed text');
  const last = events[events.length - 1];
  if (last.type !== 'response.incomplete') throw new Error(last.type);
  t.same(last.response.output.map((o) => (o.type === 'message' ? o.content : o)), whole.output.map((o) => (o.type === 'message' ? o.content : o)));
  t.equal(last.response.usage!.output_tokens, 12);
});

t.test('previous_response_id continues the stored conversation; store: false keeps none; unknown ids are 404s', async (t) => {
  const first = await client.responses.create({ model: MODEL, input: 'First question?', ...greedy });
  const second = await client.responses.create({ model: MODEL, input: 'Second question?', previous_response_id: first.id, ...greedy });
  t.equal(second.previous_response_id, first.id);
  const chat = await chatText([{ role: 'user', content: 'First question?' }, { role: 'assistant', content: first.output_text },
    { role: 'user', content: 'Second question?' }]);
  t.equal(second.output_text, chat.text, 'the same as chat over the whole history');
  t.equal(second.usage!.input_tokens, chat.prompt);
  // the same history by item_reference (as the AI SDK's OpenAI provider sends stored items)
  const byRef = await client.responses.create({ model: MODEL, ...greedy,
    input: [{ role: 'user', content: 'First question?' }, { type: 'item_reference', id: first.output[0].id! }, { role: 'user', content: 'Second question?' }] });
  t.equal(byRef.output_text, second.output_text);
  const unstored = await client.responses.create({ model: MODEL, input: 'Hi', store: false, ...greedy });
  t.equal(unstored.store, false);
  await t.rejects(client.responses.retrieve(unstored.id), { status: 404 });
  await t.rejects(client.responses.create({ model: MODEL, input: 'x', previous_response_id: unstored.id }),
    { status: 404, message: new RegExp(`Previous response with id '${unstored.id}' not found`) });
});

t.test('function tools: a function_call item that validates, streamed as arguments deltas; its output continues the turn', async (t) => {
  const body = { model: MODEL, input: 'What is the weather in Paris? Use a tool.', tools: FLAT_TOOLS, tool_choice: 'required' as const,
    parallel_tool_calls: false, max_output_tokens: 800, temperature: 1, seed: 3 };
  const r = await client.responses.create(body);
  const calls = r.output.filter((o) => o.type === 'function_call');
  t.equal(calls.length, 1, 'one call (parallel_tool_calls false)');
  const call = calls[0];
  if (call.type !== 'function_call') throw new Error('not a call');
  t.match(call, { status: 'completed', call_id: /^call_/, id: /^fc_/ });
  const schema = FLAT_TOOLS.find((x) => x.name === call.name)?.parameters;
  t.ok(schema, `a given tool (${call.name})`);
  t.ok(ajv.validate(schema!, JSON.parse(call.arguments)), `arguments ${call.arguments} validate`);

  const stream = await client.responses.create({ ...body, stream: true });
  let args = '';
  let done: OpenAI.Responses.Response | null = null;
  const types: string[] = [];
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.function_call_arguments.delta') args += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') done = e.response;
  }
  t.ok(types.includes('response.function_call_arguments.done'));
  const streamed = done!.output.find((o) => o.type === 'function_call');
  if (streamed?.type !== 'function_call') throw new Error('no streamed call');
  t.equal(args, streamed.arguments, 'the deltas are the arguments');
  t.same({ name: streamed.name, arguments: streamed.arguments }, { name: call.name, arguments: call.arguments }, 'the same call as non-streamed (same seed)');

  const follow = await client.responses.create({
    model: MODEL, tools: FLAT_TOOLS, previous_response_id: r.id, max_output_tokens: 8, temperature: 0,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ forecast: 'sunny' }) }],
  });
  t.ok(['completed', 'incomplete'].includes(follow.status!), `the turn continues (${follow.status})`);
  t.ok(follow.usage!.input_tokens > r.usage!.input_tokens + 10, 'the call and its output are in the prompt');
  // The same history given as items instead of by id gives the same prompt.
  const items = await client.responses.create({
    model: MODEL, tools: FLAT_TOOLS, max_output_tokens: 8, temperature: 0,
    input: [{ role: 'user', content: body.input }, { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ forecast: 'sunny' }) }],
  });
  t.equal(items.usage!.input_tokens, follow.usage!.input_tokens);
  t.equal(items.output_text, follow.output_text);
});

t.test('text.format json_schema: the text validates', async (t) => {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
  const r = await client.responses.create({
    model: MODEL, input: 'Answer in JSON.', max_output_tokens: 200, temperature: 1, seed: 1,
    text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } },
    // @ts-expect-error logit_bias: a Spindle extension here (the chat route's), to end the object soon on random weights
    logit_bias: { 151645: 10 },
  });
  t.equal(r.status, 'completed');
  t.ok(ajv.validate(schema, JSON.parse(r.output_text)), `${r.output_text} validates`);
});

t.test('what this server does not take is a 400 naming it', async (t) => {
  await t.rejects(client.responses.create({ model: MODEL, input: [{ type: 'item_reference', id: 'msg_1' }] }),
    { status: 400, message: /input\[0\]: item_reference: no stored item with id "msg_1"/ });
  await t.rejects(client.responses.create({ model: MODEL, input: [{ type: 'computer_call_output', call_id: 'c' }] as never }),
    { status: 400, message: /input\[0\]: item type "computer_call_output" is not supported/ });
  await t.rejects(client.responses.create({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] as never }),
    { status: 400, message: /tools\[0\]: tool type "web_search" is not supported/ });
  await t.rejects(client.responses.create({ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] as never }),
    { status: 400, message: /input\[0\]\.content\[0\]: content part type "input_file" is not supported/ });
  await t.rejects(client.responses.create({ model: MODEL, input: 'x', background: true, store: false }), { status: 400, message: /background: a background response is stored/ });
  await t.rejects(client.responses.create({ model: MODEL, input: 'x', reasoning: { effort: 'high' } }), { status: 400, message: /reasoning/ });
  // include: what there is nothing to add for is accepted (Codex sends reasoning.encrypted_content)
  const inc = await client.responses.create({ model: MODEL, input: 'x', ...greedy, max_output_tokens: 2, include: ['reasoning.encrypted_content'] });
  t.equal(inc.status, 'incomplete', 'include reasoning.encrypted_content: answered');
  t.same((inc.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0], { type: 'output_text', text: inc.output_text, annotations: [], logprobs: [] },
    'no logprobs asked for: none');
  await t.rejects(client.responses.create({ model: MODEL, input: 'x', include: ['bogus'] as never }),
    { status: 400, message: /include\[0\]: "bogus" is not one of message\.output_text\.logprobs, reasoning\.encrypted_content/ });
  await t.rejects(client.responses.create({ model: MODEL, input: 'x', top_logprobs: 21 }), { status: 400, message: /top_logprobs/ });
});

t.test('output logprobs (include message.output_text.logprobs, top_logprobs): the chat route\'s, on the part and its deltas', async (t) => {
  const input = 'Tell me about spindles.';
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: input }], temperature: 0,
    max_tokens: 12, logprobs: true, top_logprobs: 3 });
  const want = chat.choices[0].logprobs!.content!;
  t.equal(want.length, 12);
  const r = await client.responses.create({ model: MODEL, input, ...greedy, include: ['message.output_text.logprobs'], top_logprobs: 3 });
  const part = (r.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
  t.same(part.logprobs, want, 'one entry per output token (token, logprob, bytes, 3 top_logprobs), as chat completions gives them');
  t.equal(part.logprobs!.map((e) => e.token).join(''), part.text, 'the tokens spell the text');
  t.equal(r.top_logprobs, 3, 'the response echoes top_logprobs');
  const topOnly = await client.responses.create({ model: MODEL, input, ...greedy, top_logprobs: 2 });
  const topPart = (topOnly.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
  t.same(topPart.logprobs, [], 'top_logprobs without include: none (as vLLM reads it: include asks, top_logprobs says how many)');
  const justInclude = await client.responses.create({ model: MODEL, input, ...greedy, include: ['message.output_text.logprobs'] });
  const justPart = (justInclude.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
  t.same(justPart.logprobs!.map((e) => [e.token, e.logprob, e.top_logprobs.length]), want.map((e) => [e.token, e.logprob, 0]),
    'include alone: the sampled tokens\' logprobs, no alternatives');
  // streamed: each output_text delta carries its tokens'; together (and the done event's) the part's
  const stream = await client.responses.create({ model: MODEL, input, ...greedy, include: ['message.output_text.logprobs'], top_logprobs: 3, stream: true });
  const deltas: unknown[] = [];
  let done: unknown = null, final: OpenAI.Responses.Response | null = null;
  for await (const e of stream) {
    if (e.type === 'response.output_text.delta') deltas.push(...e.logprobs);
    if (e.type === 'response.output_text.done') done = e.logprobs;
    if (e.type === 'response.incomplete') final = e.response;
  }
  t.same(deltas, want, 'the deltas\' logprobs are the tokens\'');
  t.same(done, want, 'output_text.done carries them all');
  t.same(((final!.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText).logprobs, want);
});

/** A response without the client's own output_text (the `openai` client adds it to create / retrieve, not cancel). */
function bare(r: OpenAI.Responses.Response): Record<string, unknown> {
  const { output_text: _, ...rest } = r;
  return rest;
}

async function settled(id: string): Promise<OpenAI.Responses.Response> {
  for (;;) {
    const r = await client.responses.retrieve(id);
    if (r.status !== 'queued' && r.status !== 'in_progress') return r;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

t.test('background: answered at once as queued, polled with GET, the same output as a foreground response', async (t) => {
  const input = 'Spin a long yarn.';
  const q = await client.responses.create({ model: MODEL, input, background: true, ...greedy, max_output_tokens: 24 });
  t.match(q, { object: 'response', status: 'queued', background: true, output: [], usage: null });
  const done = await settled(q.id);
  const fg = await client.responses.create({ model: MODEL, input, ...greedy, max_output_tokens: 24 });
  t.equal(fg.background, false);
  t.ok(done.status === 'completed' || done.status === 'incomplete', `ended ${done.status}`);
  t.equal(done.status, fg.status);
  t.equal(done.output_text, fg.output_text, 'greedy: the text a foreground request gets');
  t.same(done.usage, fg.usage);
  t.same(bare(await client.responses.cancel(q.id)), bare(done), 'cancelling a finished background response returns it as it ended');
  // continues like any stored response
  const next = await client.responses.create({ model: MODEL, input: 'Go on.', previous_response_id: q.id, ...greedy });
  t.equal(next.previous_response_id, q.id);
});

t.test('background: cancel stops the generation; the response is stored cancelled, with the output so far', async (t) => {
  const q = await client.responses.create({ model: MODEL, input: 'Keep going.', background: true, temperature: 0,
    max_output_tokens: 3000, ignore_eos: true } as never) as unknown as OpenAI.Responses.Response;
  let seen: OpenAI.Responses.Response;
  do seen = await client.responses.retrieve(q.id); while (seen.status === 'queued');
  t.equal(seen.status, 'in_progress', 'GET while it runs');
  const c = await client.responses.cancel(q.id);
  t.equal(c.status, 'cancelled');
  t.equal(c.error, null);
  t.ok(c.usage!.output_tokens < 3000, `stopped after ${c.usage!.output_tokens} tokens`);
  t.equal(c.incomplete_details, null);
  t.same(bare(await client.responses.retrieve(q.id)), bare(c), 'stored as cancelled');
  t.same(bare(await client.responses.cancel(q.id)), bare(c), 'cancel again: the same');
  await t.rejects(client.responses.cancel('resp_0'), { status: 404 });
  // a cancel racing the last step: cancelled (nothing more), or the response as it ended
  const short = await Promise.all([1, 2, 3, 4, 5, 6].map(() => client.responses.create({ model: MODEL, input: 'Hi', background: true,
    temperature: 0, max_output_tokens: 1 })));
  for (const s of await Promise.all(short.map((r) => client.responses.cancel(r.id)))) {
    if (s.status === 'cancelled') t.equal(s.incomplete_details, null, 'cancelled: no incomplete_details');
    else t.same([s.status, s.incomplete_details], ['incomplete', { reason: 'max_output_tokens' }], 'ended first: as it ended');
  }
  // a background flag that is not a boolean is refused, not read as a foreground request
  await t.rejects(client.responses.create({ model: MODEL, input: 'x', background: 'true' } as never), { status: 400, message: /background/ });
});

t.test('GET shows a foreground response while it streams (in_progress, its items so far); cancel refuses it', async (t) => {
  const stream = await client.responses.create({ model: MODEL, input: 'Stream on.', temperature: 0, max_output_tokens: 400,
    ignore_eos: true, stream: true } as never) as unknown as AsyncIterable<OpenAI.Responses.ResponseStreamEvent>;
  let id = '';
  let checked = false;
  for await (const e of stream) {
    if (e.type === 'response.created') id = e.response.id;
    if (e.type === 'response.output_text.delta' && !checked) {
      checked = true;
      const r = await client.responses.retrieve(id);
      t.equal(r.status, 'in_progress');
      t.equal(r.background, false);
      t.equal(r.output[0]?.type, 'message', 'the message item being written');
      await t.rejects(client.responses.cancel(id), { status: 400, message: /only responses created with background: true can be cancelled/ });
      const del = await fetch(`${baseURL}/responses/${id}`, { method: 'DELETE' });
      t.equal(del.status, 400, 'DELETE waits for the end');
    }
  }
  t.ok(checked);
  t.equal((await client.responses.retrieve(id)).status, 'incomplete', 'stored when done');
  const resumed = await fetch(`${baseURL}/responses/${id}?stream=true`);
  t.equal(resumed.status, 400, 'a foreground response keeps no events to stream again');
  t.match(await resumed.json(), { error: { message: /stream: response 'resp_[0-9a-f]+' was not created with background: true and stream: true/ } });
});

type StreamEvent = OpenAI.Responses.ResponseStreamEvent;

t.test('background with stream: its events as they come; a client that left resumes after starting_after; the stream again after the end', async (t) => {
  const input = 'Spin a streamed yarn.';
  const stream = await client.responses.create({ model: MODEL, input, background: true, stream: true, ...greedy, max_output_tokens: 24 });
  const first: StreamEvent[] = [];
  for await (const e of stream) {
    first.push(e);
    if (e.type === 'response.output_text.delta' && first.filter((x) => x.type === 'response.output_text.delta').length === 3) break;  // the client goes
  }
  t.same(first.slice(0, 3).map((e) => [e.type, (e as { response?: { status: string } }).response?.status]),
    [['response.created', 'queued'], ['response.queued', 'queued'], ['response.in_progress', 'in_progress']], 'created and queued, then in_progress');
  t.same(first.map((e) => e.sequence_number), first.map((_, i) => i), 'numbered from 0');
  const id = (first[0] as OpenAI.Responses.ResponseCreatedEvent).response.id;
  t.equal((first[0] as OpenAI.Responses.ResponseCreatedEvent).response.background, true);
  // the response went on without the client: resume after the last event seen
  const last = first[first.length - 1].sequence_number;
  const rest: StreamEvent[] = [];
  for await (const e of await client.responses.retrieve(id, { stream: true, starting_after: last })) rest.push(e);
  t.same(rest.map((e) => e.sequence_number), rest.map((_, i) => last + 1 + i), 'the events after starting_after, none missed or repeated');
  const end = rest[rest.length - 1];
  t.ok(end.type === 'response.completed' || end.type === 'response.incomplete', `ends with ${end.type}`);
  const final = (end as OpenAI.Responses.ResponseCompletedEvent).response;
  const text = [...first, ...rest].filter((e) => e.type === 'response.output_text.delta').map((e) => (e as OpenAI.Responses.ResponseTextDeltaEvent).delta).join('');
  const fg = await client.responses.create({ model: MODEL, input, ...greedy, max_output_tokens: 24 });
  t.equal(text, fg.output_text, 'the deltas spell the greedy text a foreground request gets');
  t.same(final.output, (await client.responses.retrieve(id)).output, 'the terminal event holds the stored response');
  // after the end: the whole stream again, or from any point
  const again: StreamEvent[] = [];
  for await (const e of await client.responses.retrieve(id, { stream: true })) again.push(e);
  t.same(again, [...first, ...rest], 'GET ?stream=true after the end: every event, the same');
  const tail = await fetch(`${baseURL}/responses/${id}?stream=true&starting_after=${again.length - 2}`);
  t.match(await tail.text(), /^event: response\.(completed|incomplete)\ndata: /, 'starting_after the next to last: the last event alone');
  const bad = await fetch(`${baseURL}/responses/${id}?stream=true&starting_after=-3`);
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: { message: /starting_after must be a non-negative integer/, param: 'starting_after' } });
  t.equal((await fetch(`${baseURL}/responses/resp_0?stream=true`)).status, 404);
});

t.test('background with stream: cancel ends the stream (no terminal event, as OpenAI has none for it); stored cancelled', async (t) => {
  const stream = await client.responses.create({ model: MODEL, input: 'Keep streaming.', background: true, stream: true,
    temperature: 0, max_output_tokens: 3000, ignore_eos: true } as never) as unknown as AsyncIterable<StreamEvent>;
  const seen: StreamEvent[] = [];
  let cancelled: OpenAI.Responses.Response | null = null;
  for await (const e of stream) {
    seen.push(e);
    if (e.type === 'response.output_text.delta' && !cancelled) cancelled = await client.responses.cancel((seen[0] as OpenAI.Responses.ResponseCreatedEvent).response.id);
  }
  t.equal(cancelled!.status, 'cancelled');
  t.notOk(seen.some((e) => /^response\.(completed|incomplete|failed)$/.test(e.type)), 'no terminal response event');
  t.equal(seen[seen.length - 1].type, 'response.output_item.done', 'the open item closed, then the stream ended');
  t.equal((seen[seen.length - 1] as OpenAI.Responses.ResponseOutputItemDoneEvent).item.status, 'incomplete');
  t.equal((await client.responses.retrieve(cancelled!.id)).status, 'cancelled');
});

t.test('the store is bounded by count and by bytes: the oldest go first, their items too', async (t) => {
  const { ResponseStore } = await import('../lib/server/responses/store.js');
  const entry = (n: number, text: string) => ({
    response: { id: `resp_${n}`, output: [{ id: `msg_${n}`, type: 'message', content: [{ type: 'output_text', text }] }] },
    conversation: [{ role: 'user' as const, content: text }],
  });
  const byCount = new ResponseStore(2);
  for (let n = 0; n < 3; n++) byCount.put(`resp_${n}`, entry(n, 'x'));
  t.notOk(byCount.get('resp_0'));
  t.notOk(byCount.item('msg_0'), 'its items go with it');
  t.ok(byCount.get('resp_1') && byCount.get('resp_2') && byCount.item('msg_2'));
  const byBytes = new ResponseStore(100, 1000);
  byBytes.put('resp_a', entry(1, 'y'.repeat(300)));
  byBytes.put('resp_b', entry(2, 'y'.repeat(300)));
  t.notOk(byBytes.get('resp_a'), 'over 1000 bytes: the oldest went');
  t.ok(byBytes.get('resp_b'));
  t.ok(byBytes.delete('resp_b'));
  t.notOk(byBytes.delete('resp_b'));
});

t.test('the Vercel AI SDK\'s OpenAI provider (the Responses API by default): text, stream, a tool loop', async (t) => {
  const { createOpenAI } = await import('@ai-sdk/openai');
  const { generateText, streamText, tool, stepCountIs } = await import('ai');
  const { z } = await import('zod');
  const sent: { url: string; body: Record<string, unknown> }[] = [];
  const provider = createOpenAI({
    baseURL, apiKey: 'unused',
    fetch: async (url, init) => {
      sent.push({ url: String(url), body: JSON.parse(String(init?.body ?? '{}')) as Record<string, unknown> });
      return fetch(url, init);
    },
  });
  const model = provider(MODEL);
  const r = await generateText({ model, prompt: 'Tell me about spindles.', temperature: 0, maxOutputTokens: 12, maxRetries: 0 });
  t.ok(sent[sent.length - 1].url.endsWith('/responses'), 'it called /v1/responses');
  t.equal(r.text, (await chatText([{ role: 'user', content: 'Tell me about spindles.' }])).text, 'the chat route\'s greedy text');
  t.equal(r.finishReason, 'length');

  const s = streamText({ model, prompt: 'Tell me about spindles.', temperature: 0, maxOutputTokens: 12, maxRetries: 0 });
  let streamed = '';
  for await (const piece of s.textStream) streamed += piece;
  t.equal(streamed, r.text, 'streamed text = generated text');

  const calls: unknown[] = [];
  const loop = await generateText({
    model, prompt: 'What is the weather in Paris? Use a tool.', toolChoice: 'required', maxRetries: 0, maxOutputTokens: 400, seed: 5,
    providerOptions: { openai: { parallelToolCalls: false } },
    tools: {
      get_weather: tool({
        description: 'Weather for a city', inputSchema: z.object({ city: z.string().max(12) }),
        execute: async (input) => { calls.push(input); return { forecast: 'sunny' }; },
      }),
    },
    stopWhen: stepCountIs(2),
    prepareStep: ({ stepNumber }) => (stepNumber === 1 ? { toolChoice: 'none' as const, maxOutputTokens: 8 } : {}),
  });
  t.equal(calls.length, 1, 'the tool ran once');
  t.equal(loop.steps.length, 2);
  const second = sent[sent.length - 1].body.input as Record<string, unknown>[];
  t.ok(second.some((i) => i.type === 'function_call_output'), 'the second step sent the tool output');
  t.ok(second.some((i) => i.type === 'function_call' || i.type === 'item_reference'), 'and the call (as an item or a reference)');
});
