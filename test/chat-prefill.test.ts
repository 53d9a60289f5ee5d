// Continuing the final message (an assistant prefill): vLLM's continue_final_message on /v1/chat/completions and
// /tokenize, LLM.chat({ continueFinalMessage }) and Ollama's /api/chat with a final assistant message all feed the
// model the conversation cut right after the final message's text, and the output continues it (the same tokens as
// a raw completion of that prompt).
import t from 'tap';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { LLM } from '../lib/llm.js';
import { fixtureModel } from './helpers/fixtures.js';

const path = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 2 }, 'serve'), servedModelNames: ['m'] });
t.teardown(() => app.close());
const post = async (url: string, payload: Record<string, unknown>) => {
  const r = await app.inject({ method: 'POST', url, payload });
  return { status: r.statusCode, body: JSON.parse(r.body) as Record<string, unknown> };
};
const PREFILL = 'Sure, the answer is';
const messages = [{ role: 'user', content: 'What is 2 + 2?' }, { role: 'assistant', content: PREFILL }];

t.test("vLLM's continue_final_message: /tokenize and /v1/chat/completions continue the final message", async (t) => {
  const tok = await post('/tokenize', { messages, continue_final_message: true, add_generation_prompt: false });
  t.equal(tok.status, 200);
  const ids = tok.body.tokens as number[];
  const text = (await post('/detokenize', { tokens: ids })).body.prompt as string;
  t.ok(text.endsWith(`<|im_start|>assistant\n<think>\n\n</think>\n\n${PREFILL}`) || text.endsWith(`<|im_start|>assistant\n${PREFILL}`),
    `the prompt ends with the prefill: ${JSON.stringify(text.slice(-50))}`);
  const closed = (await post('/tokenize', { messages, add_generation_prompt: false })).body.tokens as number[];
  t.ok(closed.length > ids.length, 'without it the final message is closed (<|im_end|>)');
  const chat = await post('/v1/chat/completions', { messages, continue_final_message: true, add_generation_prompt: false, max_tokens: 8, temperature: 0 });
  t.equal(chat.status, 200);
  const raw = await post('/v1/completions', { prompt: ids, max_tokens: 8, temperature: 0 });
  const content = (chat.body.choices as { message: { content: string } }[])[0].message.content;
  t.equal(content, (raw.body.choices as { text: string }[])[0].text, 'the continuation of that very prompt');
  t.equal((chat.body.usage as { prompt_tokens: number }).prompt_tokens, ids.length);
  const implied = await post('/v1/chat/completions', { messages, continue_final_message: true, max_tokens: 8, temperature: 0 });
  t.equal((implied.body.choices as { message: { content: string } }[])[0].message.content, content, 'add_generation_prompt left out: false');
  const both = await post('/v1/chat/completions', { messages, continue_final_message: true, add_generation_prompt: true });
  t.equal(both.status, 400);
  t.match(JSON.stringify(both.body), /continue_final_message and add_generation_prompt cannot both be true/);
  const empty = await post('/v1/chat/completions', { messages: [messages[0], { role: 'assistant', content: ' ' }], continue_final_message: true });
  t.equal(empty.status, 400);
  t.match(JSON.stringify(empty.body), /the final message has no text to continue/);
});

t.test("Ollama's /api/chat continues a final assistant message; LLM.chat takes continueFinalMessage", async (t) => {
  const ids = (await post('/tokenize', { messages, continue_final_message: true })).body.tokens as number[];
  const raw = await post('/v1/completions', { prompt: ids, max_tokens: 8, temperature: 0 });
  const want = (raw.body.choices as { text: string }[])[0].text;
  const ollama = await post('/api/chat', { model: 'm', messages, stream: false, options: { num_predict: 8, temperature: 0, repeat_penalty: 1 } });
  t.equal((ollama.body.message as { content: string }).content, want, 'Ollama: a final assistant message is a prefill');
  t.equal(ollama.body.prompt_eval_count, ids.length);
  const llm = new LLM({ model: path, maxModelLen: 512, threads: 2 });
  t.teardown(() => llm.close());
  const [out] = await llm.chat(messages as never, { maxTokens: 8, temperature: 0 }, { continueFinalMessage: true });
  t.same(out.promptTokenIds, ids, 'LLM.chat: the same prompt');
  t.equal(out.outputs[0].text, want);
  const tokenizer = llm.tokenizer;
  t.same(tokenizer.applyChatTemplate(messages as never, { continue_final_message: true }), ids, 'tokenizer.applyChatTemplate too');
});

t.test("vLLM's echo on chat: a continued assistant message comes back whole", async (t) => {
  const base = await post('/v1/chat/completions', { messages, continue_final_message: true, max_tokens: 6, temperature: 0 });
  const plain = (base.body.choices as { message: { content: string } }[])[0].message.content;
  const echoed = await post('/v1/chat/completions', { messages, continue_final_message: true, echo: true, max_tokens: 6, temperature: 0 });
  t.equal((echoed.body.choices as { message: { content: string } }[])[0].message.content, PREFILL + plain, 'the prefill, then the continuation');
  const r = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: { messages, continue_final_message: true, echo: true, max_tokens: 6, temperature: 0, stream: true } });
  const chunks = r.body.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)) as { choices: { delta: { content?: string } }[] });
  t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), PREFILL + plain, 'streamed: the echo comes with the role');
  const userLast = await post('/v1/chat/completions', { messages: [messages[0]], echo: true, max_tokens: 3, temperature: 0 });
  t.notOk(((userLast.body.choices as { message: { content: string } }[])[0].message.content).startsWith('What is'), 'a final user message is not echoed (another role)');
  t.equal((await post('/v1/chat/completions', { messages, echo: 'yes' })).status, 400);
});
