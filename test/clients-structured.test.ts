// Tool calling and structured outputs through real, unmodified clients on a real socket: the `openai` SDK
// (create with tools, streamed deltas and its own .stream() assembler, .parse() with zodResponseFormat and
// zodFunction, .runTools(), the tool-result round trip), the Vercel AI SDK over @ai-sdk/openai-compatible
// (generateText / streamText with tools, a two-step tool loop, generateObject / Output.object, with and without
// supportsStructuredOutputs) and the `ollama` client (chat with tools, format as a JSON Schema, a zod-made
// schema or 'json', generate with format; streamed and not). The model has random weights: only the grammar
// makes outputs valid, so every schema bounds its strings and arrays, and every output is checked with ajv
// (and the client's own zod parse where it has one). A preValidation hook records what each client sent.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { generateObject, generateText, NoObjectGeneratedError, Output, stepCountIs, streamText, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { Ollama, type Tool as OllamaTool } from 'ollama';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import type { SamplingParams } from '../lib/sampling-params.js';
import { fixtureModel } from './helpers/fixtures.js';
import { TOOLS } from './helpers/structured-schemas.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const MODEL = 'tiny-qwen3';
const IM_END = 151645; // Qwen <|im_end|>: the grammar allows it only once the output is complete
const TOOL_CALL = 151657; // Qwen <tool_call>: the hermes format's call opener (the trigger in tool_choice auto)
const QUOTE = 1; // Qwen '"'
/** For a bare JSON object (json_object / format 'json'): strings that end and an answer that stops once it can. */
const JSON_BIAS = { [QUOTE]: 20, [IM_END]: 10 };

const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const app = await buildApp({
  engine: normalizeEngineOptions({ model: path, maxModelLen: 4096, threads: 2 }, 'serve'),
  servedModelNames: [MODEL],
  // Qwen3's template makes the server read a reasoning block first, which this random model would wander into
  // before the constrained answer; test/server-reasoning.test.ts covers reasoning (with a scripted model).
  reasoningParser: 'none',
});

// What the clients sent, in order.
const sent: { url: string; body: Record<string, unknown> }[] = [];
app.addHook('preValidation', async (request) => {
  sent.push({ url: request.url, body: request.body as Record<string, unknown> });
});
const lastSent = (url: string): Record<string, unknown> => {
  const s = [...sent].reverse().find((x) => x.url === url);
  if (!s) throw new Error(`nothing sent to ${url}`);
  return s.body;
};

// A test-only engine hook: extra logit biases on every submitted request while `extraBias` is set. Ollama's API
// has no tool_choice and no logit_bias, and this random model never samples <tool_call> on its own (0 of 30
// sampled 300-token replies did), so the Ollama tool-call replies (and the short format 'json' replies) come
// from biasing the engine, as a trained model's own preference would; route, grammar, parser and client are untouched.
let extraBias: [number, number][] | null = null;
const core = app.engine.core;
const submitMany = core.submitMany.bind(core);
core.submitMany = (prompts, params, options) => submitMany(prompts,
  extraBias ? params.map((p): SamplingParams => ({ ...p, logitBias: [...p.logitBias, ...extraBias!] })) : params, options);

{
  const { tokenizer } = await app.engine.ready();
  const id = (s: string): number[] => tokenizer.encode(s, { addSpecialTokens: false, parseSpecial: true });
  t.same([id('<|im_end|>'), id('<tool_call>'), id('"')], [[IM_END], [TOOL_CALL], [QUOTE]], 'the biased token ids');
}
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const port = (app.server.address() as AddressInfo).port;
const baseURL = `http://127.0.0.1:${port}/v1`;

const ajv = new (Ajv2020 as unknown as typeof Ajv2020.default)({ strict: false });
(addFormats as unknown as typeof addFormats.default)(ajv);

/** ajv's verdict on `value` (draft-07 `$schema` markers of client-made schemas are dropped: the 2020 dialect reads them the same). */
function validates(schema: unknown, value: unknown): string | null {
  const { $schema: _, ...rest } = schema as Record<string, unknown>;
  return ajv.validate(rest, value) ? null : ajv.errorsText();
}

function toolSchema(name: string): Record<string, unknown> {
  const tool = TOOLS.find((x) => x.function.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.function.parameters;
}

type T = Parameters<Parameters<typeof t.test>[0]>[0]; // a subtest's t (the last overload: test(cb))

/** A call's arguments: a JSON object string that validates against its tool's parameters. */
function checkArguments(t: T, name: string, args: string, schema = toolSchema(name)): unknown {
  let value: unknown;
  try {
    value = JSON.parse(args);
  } catch {
    t.fail(`${name}: arguments are not JSON: ${args}`);
    return undefined;
  }
  const err = validates(schema, value);
  t.equal(err, null, `${name} arguments ${args} validate`);
  return value;
}

const question = [{ role: 'user' as const, content: 'What is the weather in Paris? Use a tool.' }];

// ---------------------------------------------------------------------------------------------- openai

const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });

t.test('openai: tool_choice required (non-streamed), then the tool result round trip', async (t) => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: question, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false,
    max_tokens: 800, temperature: 1, seed: 1,
  });
  const c = r.choices[0];
  t.equal(c.finish_reason, 'tool_calls');
  t.equal(c.message.content, null, 'no content besides the call');
  t.equal(c.message.tool_calls?.length, 1, 'one call (parallel_tool_calls false)');
  const call = c.message.tool_calls![0];
  if (call.type !== 'function') throw new Error(`a ${call.type} tool call`);
  t.match(call.id, /^call_/);
  t.ok(TOOLS.some((x) => x.function.name === call.function.name), `calls a given tool (${call.function.name})`);
  checkArguments(t, call.function.name, call.function.arguments);
  t.match(lastSent('/v1/chat/completions'), { tool_choice: 'required', parallel_tool_calls: false, tools: TOOLS });

  // The assistant message as the client got it, then the tool's answer, back to the server.
  const follow = await client.chat.completions.create({
    model: MODEL, tools: TOOLS, max_tokens: 16, seed: 2,
    messages: [...question, c.message, { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ result: 'sunny, 21 C' }) }],
  });
  t.ok(['stop', 'length', 'tool_calls'].includes(follow.choices[0].finish_reason), `follow-up answered (${follow.choices[0].finish_reason})`);
  t.ok(follow.usage!.prompt_tokens > r.usage!.prompt_tokens + 10, 'the call and its result are in the follow-up prompt');
  const back = lastSent('/v1/chat/completions').messages as Record<string, unknown>[];
  t.match(back[1], { role: 'assistant', tool_calls: [{ id: call.id, type: 'function', function: { name: call.function.name } }] });
  t.match(back[2], { role: 'tool', tool_call_id: call.id });
});

t.test('openai: a named function, streamed deltas assemble to the non-streamed call; the SDK .stream() agrees', async (t) => {
  const body = {
    model: MODEL, messages: question, tools: TOOLS, tool_choice: { type: 'function' as const, function: { name: 'book_meeting' } },
    parallel_tool_calls: false, max_tokens: 800, temperature: 1, seed: 7,
  };
  const r = await client.chat.completions.create(body);
  const whole = r.choices[0].message.tool_calls!;
  t.equal(whole.length, 1);
  if (whole[0].type !== 'function') throw new Error('not a function call');
  t.equal(whole[0].function.name, 'book_meeting');
  checkArguments(t, 'book_meeting', whole[0].function.arguments);
  // As OpenAI and vLLM: a forced named function finishes with 'stop'.
  t.equal(r.choices[0].finish_reason, 'stop');

  // Raw chunks: the first delta of a call carries index, id, type, name and '' arguments; then fragments.
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const calls: { id: string; name: string; arguments: string }[] = [];
  let finish: string | null = null;
  let fragments = 0;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    for (const d of ch.delta.tool_calls ?? []) {
      if (d.id !== undefined) {
        t.match(d, { index: calls.length, type: 'function', function: { arguments: '' } }, 'first delta of a call');
        calls.push({ id: d.id, name: d.function!.name!, arguments: d.function!.arguments ?? '' });
      } else {
        fragments++;
        calls[d.index].arguments += d.function?.arguments ?? '';
      }
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  t.equal(calls.length, 1);
  t.ok(fragments >= 1, `${fragments} argument fragments`);
  t.same({ name: calls[0].name, arguments: calls[0].arguments }, whole[0].function, 'assembled stream == non-streamed call (same seed)');
  t.equal(finish, r.choices[0].finish_reason);

  // The SDK's own chunk assembler.
  const helper = client.chat.completions.stream(body);
  const final = await helper.finalChatCompletion();
  const fc = final.choices[0].message.tool_calls!;
  t.equal(fc.length, 1);
  if (fc[0].type !== 'function') throw new Error('not a function call');
  t.same({ name: fc[0].function.name, arguments: fc[0].function.arguments }, whole[0].function, 'SDK-assembled call == non-streamed call');
});

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(150),
  tags: z.array(z.string().max(6)).max(3),
  role: z.enum(['admin', 'user']),
});

t.test('openai: .parse() with zodResponseFormat, and .stream() with it', async (t) => {
  const r = await client.chat.completions.parse({
    model: MODEL, messages: [{ role: 'user', content: 'Describe a person.' }], max_tokens: 800, seed: 3,
    response_format: zodResponseFormat(Person, 'person'),
  });
  const m = r.choices[0].message;
  t.equal(r.choices[0].finish_reason, 'stop');
  t.ok(m.parsed, `parsed: ${m.content}`);
  t.ok(Person.safeParse(m.parsed).success, 'parsed validates with zod');
  const rf = lastSent('/v1/chat/completions').response_format as { type: string; json_schema: { name: string; strict: boolean; schema: unknown } };
  t.equal(rf.type, 'json_schema');
  t.equal(rf.json_schema.name, 'person');
  t.equal(rf.json_schema.strict, true);
  t.equal(validates(rf.json_schema.schema, m.parsed), null, 'parsed validates against the schema sent');

  const helper = client.chat.completions.stream({
    model: MODEL, messages: [{ role: 'user', content: 'Describe a person.' }], max_tokens: 800, seed: 3,
    response_format: zodResponseFormat(Person, 'person'),
  });
  const final = await helper.finalChatCompletion();
  t.same(final.choices[0].message.parsed, m.parsed, 'streamed parse == non-streamed parse (same seed)');
});

t.test('openai: .parse() with a zodFunction tool', async (t) => {
  const Add = z.object({ a: z.number().int().min(-100).max(100), b: z.number().int().min(-100).max(100) });
  const r = await client.chat.completions.parse({
    model: MODEL, messages: [{ role: 'user', content: 'Add 2 and 3.' }], max_tokens: 800, seed: 4,
    tools: [zodFunction({ name: 'add', description: 'Adds two integers', parameters: Add })], tool_choice: 'required', parallel_tool_calls: false,
  });
  const calls = r.choices[0].message.tool_calls ?? [];
  t.equal(calls.length, 1);
  const call = calls[0];
  if (call.type !== 'function') throw new Error('not a function call');
  t.equal(call.function.name, 'add');
  t.ok(Add.safeParse(call.function.parsed_arguments).success, `parsed_arguments ${JSON.stringify(call.function.parsed_arguments)} validate with zod`);
  t.same(call.function.parsed_arguments, JSON.parse(call.function.arguments));
  const tools = lastSent('/v1/chat/completions').tools as { function: { strict?: boolean; parameters: unknown } }[];
  t.equal(tools[0].function.strict, true, 'zodFunction sends a strict tool');
  t.equal(validates(tools[0].function.parameters, call.function.parsed_arguments), null);
});

t.test('openai: .runTools() calls a zodFunction with parsed arguments and sends its result back', async (t) => {
  const Add = z.object({ a: z.number().int().min(-100).max(100), b: z.number().int().min(-100).max(100) });
  const got: z.infer<typeof Add>[] = [];
  const before = sent.length;
  // tool_choice 'required' asks for a call every turn; two turns: call, result sent back, call again.
  const runner = client.chat.completions.runTools({
    model: MODEL, messages: [{ role: 'user', content: 'Add 2 and 3.' }], max_tokens: 800, seed: 5,
    tool_choice: 'required', parallel_tool_calls: false,
    tools: [zodFunction({ name: 'add', description: 'Adds two integers', parameters: Add, function: (args) => { got.push(args); return { sum: args.a + args.b }; } })],
  }, { maxChatCompletions: 2 });
  await runner.done();
  t.equal(got.length, 2, 'the function ran once per turn');
  for (const args of got) t.ok(Add.safeParse(args).success, `args ${JSON.stringify(args)} validate`);
  const requests = sent.slice(before).filter((x) => x.url === '/v1/chat/completions');
  t.equal(requests.length, 2);
  const second = requests[1].body.messages as { role: string; tool_call_id?: string; content?: string; tool_calls?: { id: string }[] }[];
  t.same(second.map((m) => m.role), ['user', 'assistant', 'tool']);
  t.equal(second[2].tool_call_id, second[1].tool_calls![0].id, 'the tool result answers the call');
  t.same(JSON.parse(second[2].content!), { sum: got[0].a + got[0].b });
});

// ------------------------------------------------------------------------------------------- AI SDK

// supportsStructuredOutputs: without it the provider sends response_format json_object (and warns) even when a
// schema is given; with it, response_format json_schema { name, schema, strict: true }.
const spindle = createOpenAICompatible({ name: 'spindle', baseURL, supportsStructuredOutputs: true });
// providerOptions.<provider name> keys the provider does not know go into the body as they are.
const noParallel = { spindle: { parallel_tool_calls: false } };

const Weather = z.object({ city: z.string().max(12), unit: z.enum(['celsius', 'fahrenheit']).optional() });

t.test('ai: generateText with a tool and toolChoice required runs the tool with valid input', async (t) => {
  const inputs: unknown[] = [];
  const r = await generateText({
    model: spindle(MODEL), prompt: 'What is the weather in Paris?', toolChoice: 'required', maxRetries: 0, maxOutputTokens: 800, seed: 5,
    providerOptions: noParallel,
    tools: {
      get_weather: tool({
        description: 'Weather for a city', inputSchema: Weather,
        execute: async (input) => { inputs.push(input); return { forecast: 'sunny' }; },
      }),
    },
  });
  t.equal(r.finishReason, 'tool-calls');
  t.equal(r.toolCalls.length, 1);
  const call = r.toolCalls[0];
  t.equal(call.toolName, 'get_weather');
  t.ok(Weather.safeParse(call.input).success, `input ${JSON.stringify(call.input)} validates`);
  t.same(inputs, [call.input], 'execute ran once with that input');
  t.same(r.toolResults.map((x) => x.output), [{ forecast: 'sunny' }]);
  const body = lastSent('/v1/chat/completions');
  t.match(body, { tool_choice: 'required', parallel_tool_calls: false, tools: [{ type: 'function', function: { name: 'get_weather' } }] });
  const params = (body.tools as { function: { parameters: unknown } }[])[0].function.parameters;
  t.equal(validates(params, call.input), null, 'input validates against the JSON Schema the SDK sent');
});

t.test('ai: a two-step generateText sends the tool result back (prepareStep turns the tools off for step 2)', async (t) => {
  const before = sent.length;
  const r = await generateText({
    model: spindle(MODEL), prompt: 'What is the weather in Paris?', maxRetries: 0, maxOutputTokens: 32, seed: 6,
    providerOptions: noParallel, stopWhen: stepCountIs(2),
    prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'none', maxOutputTokens: stepNumber === 0 ? 800 : 16 }),
    tools: { get_weather: tool({ description: 'Weather for a city', inputSchema: Weather, execute: async () => ({ forecast: 'sunny' }) }) },
  });
  t.equal(r.steps.length, 2);
  t.equal(r.steps[0].toolCalls.length, 1);
  t.ok(Weather.safeParse(r.steps[0].toolCalls[0].input).success);
  t.type(r.text, 'string');
  const requests = sent.slice(before).filter((x) => x.url === '/v1/chat/completions');
  t.equal(requests.length, 2);
  const second = requests[1].body;
  t.equal(second.tool_choice, 'none');
  const messages = second.messages as { role: string; tool_call_id?: string; content?: string; tool_calls?: { id: string }[] }[];
  t.same(messages.map((m) => m.role), ['user', 'assistant', 'tool']);
  t.equal(messages[2].tool_call_id, messages[1].tool_calls![0].id);
  t.same(JSON.parse(messages[2].content!), { forecast: 'sunny' });
});

t.test('ai: streamText with a tool assembles a valid call from the streamed deltas', async (t) => {
  const errors: unknown[] = [];
  const inputs: unknown[] = [];
  const s = streamText({
    model: spindle(MODEL), prompt: 'What is the weather in Paris?', toolChoice: { type: 'tool', toolName: 'get_weather' }, maxRetries: 0,
    maxOutputTokens: 800, seed: 6, providerOptions: noParallel, onError: ({ error }) => { errors.push(error); },
    tools: { get_weather: tool({ description: 'Weather for a city', inputSchema: Weather, execute: async (input) => { inputs.push(input); return 'sunny'; } }) },
  });
  const calls = await s.toolCalls;
  t.same(errors, []);
  t.equal(calls.length, 1);
  t.equal(calls[0].toolName, 'get_weather');
  t.ok(Weather.safeParse(calls[0].input).success, `input ${JSON.stringify(calls[0].input)} validates`);
  t.same(inputs, [calls[0].input]);
  t.match(lastSent('/v1/chat/completions'), { stream: true, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
});

t.test('ai: generateObject and Output.object send json_schema; the object validates', async (t) => {
  const r = await generateObject({ model: spindle(MODEL), schema: Person, prompt: 'Describe a person.', maxRetries: 0, maxOutputTokens: 800, seed: 7 });
  t.ok(Person.safeParse(r.object).success, `object ${JSON.stringify(r.object)} validates`);
  t.equal(r.finishReason, 'stop');
  const rf = lastSent('/v1/chat/completions').response_format as { type: string; json_schema: { name: string; strict: boolean; schema: unknown } };
  t.equal(rf.type, 'json_schema', 'supportsStructuredOutputs: the SDK sends json_schema');
  t.equal(rf.json_schema.strict, true);
  t.equal(validates(rf.json_schema.schema, r.object), null);

  const o = await generateText({ model: spindle(MODEL), output: Output.object({ schema: Person }), prompt: 'Describe a person.', maxRetries: 0, maxOutputTokens: 800, seed: 8 });
  t.ok(Person.safeParse(o.output).success, `output ${JSON.stringify(o.output)} validates`);
  t.equal((lastSent('/v1/chat/completions').response_format as { type: string }).type, 'json_schema');
});

t.test('ai: without supportsStructuredOutputs the provider sends json_object; the server returns a JSON object', async (t) => {
  const plain = createOpenAICompatible({ name: 'plain', baseURL });
  // It warns "JSON response format schema is only supported with structuredOutputs" on the console; the body says it too.
  (globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
  // Only the schema is lost: any JSON object is valid output, which a random model fills with long strings, so
  // logit_bias (sent through providerOptions) favours '"' and <|im_end|>; a few seeds, at least one finishing.
  const runs = await Promise.all([1, 2, 6].map(async (seed) => {
    try {
      const r = await generateObject({
        model: plain(MODEL), schema: Person, prompt: 'Describe a person.', maxRetries: 0, maxOutputTokens: 800, seed,
        providerOptions: { plain: { logit_bias: JSON_BIAS } },
      });
      return { seed, finish: r.finishReason as string, text: JSON.stringify(r.object), valid: true };
    } catch (e) {
      if (!NoObjectGeneratedError.isInstance(e)) throw e;
      return { seed, finish: e.finishReason as string, text: e.text ?? '', valid: false };
    }
  }));
  t.match(lastSent('/v1/chat/completions'), { response_format: { type: 'json_object' }, logit_bias: JSON_BIAS });
  const finished = runs.filter((x) => x.finish === 'stop');
  t.ok(finished.length >= 1, `${finished.length} of ${runs.length} finished: ${JSON.stringify(runs.map((x) => [x.seed, x.finish, x.text.length]))}`);
  for (const x of runs) {
    t.ok(x.text.startsWith('{'), `seed ${x.seed}: an object opens`);
    if (x.finish !== 'stop') continue;
    const v = JSON.parse(x.text) as unknown;
    t.ok(typeof v === 'object' && v !== null && !Array.isArray(v), `seed ${x.seed}: a JSON object${x.valid ? ' (it even fits the schema)' : ''}`);
  }
});

// ------------------------------------------------------------------------------------------- ollama

const ollama = new Ollama({ host: `http://127.0.0.1:${port}` });
const PersonSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
  },
  required: ['name', 'age', 'tags'],
};

t.test('ollama: chat and generate with format as a JSON Schema, streamed and not', async (t) => {
  const messages = [{ role: 'user', content: 'Describe a person.' }];
  const options = { seed: 10, num_predict: 800 };
  const r = await ollama.chat({ model: MODEL, messages, format: PersonSchema, options });
  t.equal(r.done_reason, 'stop');
  t.equal(validates(PersonSchema, JSON.parse(r.message.content)), null, `chat: ${r.message.content}`);
  t.same(lastSent('/api/chat').format, PersonSchema, 'the client sends the schema object as format');

  let streamed = '';
  let last: { done: boolean; done_reason?: string } | undefined;
  for await (const part of await ollama.chat({ model: MODEL, messages, format: PersonSchema, options, stream: true })) {
    streamed += part.message.content;
    last = part;
  }
  t.equal(streamed, r.message.content, 'streamed chat == non-streamed (same seed)');
  t.match(last, { done: true, done_reason: 'stop' });

  const g = await ollama.generate({ model: MODEL, prompt: 'Describe a person.', format: PersonSchema, options });
  t.equal(g.done_reason, 'stop');
  t.equal(validates(PersonSchema, JSON.parse(g.response ?? '')), null, `generate: ${g.response}`);
  // The pattern of Ollama's docs: format from a zod schema, the reply checked with it.
  const z2 = await ollama.chat({ model: MODEL, messages, format: z.toJSONSchema(Person), options });
  t.ok(Person.safeParse(JSON.parse(z2.message.content)).success, `zod-made format: ${z2.message.content}`);
  let gs = '';
  for await (const part of await ollama.generate({ model: MODEL, prompt: 'Describe a person.', format: PersonSchema, options, stream: true })) gs += part.response;
  t.equal(gs, g.response, 'streamed generate == non-streamed (same seed)');
});

t.test("ollama: format 'json' gives a JSON object", async (t) => {
  // Any JSON object is allowed, so a random model runs on in long strings; with no logit_bias in Ollama's API,
  // the engine hook adds JSON_BIAS. A reply cut off at num_predict is a prefix; every finished one an object.
  extraBias = Object.entries(JSON_BIAS).map(([id, b]) => [Number(id), b]);
  try {
    const runs = await Promise.all([11, 12, 13].map(async (seed) => {
      const r = await ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'Reply in JSON.' }], format: 'json', options: { seed, num_predict: 800 } });
      return { seed, reason: r.done_reason, content: r.message.content };
    }));
    t.equal(lastSent('/api/chat').format, 'json');
    const finished = runs.filter((x) => x.reason === 'stop');
    t.ok(finished.length >= 1, `${finished.length} of ${runs.length} finished: ${JSON.stringify(runs.map((x) => [x.seed, x.reason, x.content.length]))}`);
    for (const x of runs) {
      t.ok(x.content.startsWith('{'), `seed ${x.seed}: an object opens`);
      if (x.reason !== 'stop') continue;
      const v = JSON.parse(x.content) as unknown;
      t.ok(typeof v === 'object' && v !== null && !Array.isArray(v), `seed ${x.seed}: a JSON object`);
    }
    let streamed = '';
    for await (const part of await ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'Reply in JSON.' }], format: 'json', options: { seed: runs[0].seed, num_predict: 800 }, stream: true })) {
      streamed += part.message.content;
    }
    t.equal(streamed, runs[0].content, 'streamed == non-streamed (same seed)');
  } finally {
    extraBias = null;
  }
});

// (ollama's Tool type describes a few JSON Schema keywords only; the server takes any schema)
const ollamaTools = TOOLS.filter((x) => x.function.name === 'get_weather' || x.function.name === 'add') as unknown as OllamaTool[];

t.test('ollama: chat with tools (auto): the tools reach the prompt, replies are well formed', async (t) => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const bare = await ollama.chat({ model: MODEL, messages, options: { seed: 1, num_predict: 1 } });
  const runs = await Promise.all([1, 2, 3].map((seed) => ollama.chat({ model: MODEL, messages, tools: ollamaTools, options: { seed, num_predict: 64 } })));
  for (const r of runs) {
    t.ok(r.prompt_eval_count > bare.prompt_eval_count + 50, 'the tools are rendered into the prompt');
    t.type(r.message.content, 'string');
    for (const c of r.message.tool_calls ?? []) checkArguments(t, c.function.name, JSON.stringify(c.function.arguments));
  }
  t.same(lastSent('/api/chat').tools, ollamaTools);
});

t.test('ollama: chat with tools, the model nudged to call: arguments are objects that validate; the round trip', async (t) => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  extraBias = [[TOOL_CALL, 30], [IM_END, 10]];
  try {
    const r = await ollama.chat({ model: MODEL, messages, tools: ollamaTools, options: { seed: 1, num_predict: 800 } });
    t.equal(r.done_reason, 'stop');
    const calls = r.message.tool_calls ?? [];
    t.ok(calls.length >= 1, `tool calls: ${JSON.stringify(calls)} (content ${JSON.stringify(r.message.content)})`);
    for (const c of calls) {
      t.type(c.function.arguments, 'object', 'arguments are an object, not a string');
      checkArguments(t, c.function.name, JSON.stringify(c.function.arguments));
    }

    let streamedCalls: typeof calls = [];
    let content = '';
    for await (const part of await ollama.chat({ model: MODEL, messages, tools: ollamaTools, options: { seed: 1, num_predict: 800 }, stream: true })) {
      content += part.message.content;
      if (part.message.tool_calls) streamedCalls = [...streamedCalls, ...part.message.tool_calls];
    }
    t.same(streamedCalls, calls, 'streamed calls == non-streamed (same seed)');
    t.equal(content, r.message.content);

    extraBias = null;
    const follow = await ollama.chat({
      model: MODEL, tools: ollamaTools, options: { seed: 2, num_predict: 16 },
      messages: [...messages, r.message, { role: 'tool', content: JSON.stringify({ result: 'sunny' }), tool_name: calls[0]?.function.name ?? 'get_weather' }],
    });
    t.ok(follow.done, 'the follow-up with the call and its result is answered');
    t.ok(follow.prompt_eval_count > r.prompt_eval_count + 10, 'the call and its result are in the follow-up prompt');
  } finally {
    extraBias = null;
  }
});
