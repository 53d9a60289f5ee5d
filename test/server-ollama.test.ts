// The HTTP server's Ollama surface on a real socket with the real `ollama` client: chat and generate,
// streamed and not (at temperature 0 the concatenated stream equals the non-streamed text), options taking
// effect, durations in nanoseconds, tags / show / version, and errors in Ollama's `{ error }` shape.
import t, { type Test } from 'tap';
import type { AddressInfo } from 'node:net';
import { Ollama } from 'ollama';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const MODEL = 'tiny-qwen3';

const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const app = await buildApp({
  engine: normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 2 }, 'serve'),
  servedModelNames: [MODEL],
  apiKeys: ['secret-key'],
});
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const host = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const ollama = new Ollama({ host, headers: { Authorization: 'Bearer secret-key' } });
const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me about spindles.' }];
const greedy = { temperature: 0, num_predict: 16 };

function checkDurations(t: Test, r: Record<string, unknown>): void {
  for (const k of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration']) {
    t.ok(Number.isInteger(r[k]) && (r[k] as number) >= 0, `${k} is an integer number of nanoseconds`);
  }
  t.ok((r.total_duration as number) >= (r.prompt_eval_duration as number) + (r.eval_duration as number) - 1e6,
    'total_duration covers prompt evaluation and generation');
  t.ok((r.total_duration as number) < 60e9, 'total_duration is in nanoseconds, not something larger');
}

t.test('chat: non-streamed shape; streamed pieces concatenate to the same text at temperature 0', async (t) => {
  const r = await ollama.chat({ model: MODEL, messages, options: greedy });
  t.equal(r.model, MODEL);
  t.equal(r.message.role, 'assistant');
  t.ok(r.message.content.length > 0);
  t.equal(r.done, true);
  t.ok(['stop', 'length'].includes(r.done_reason));
  t.ok(r.prompt_eval_count > 5);
  t.ok(r.eval_count >= 1 && r.eval_count <= 16);
  t.ok(!Number.isNaN(Date.parse(r.created_at as unknown as string)), 'created_at is a timestamp');
  checkDurations(t, r as unknown as Record<string, unknown>);

  const stream = await ollama.chat({ model: MODEL, messages, options: greedy, stream: true });
  const parts = [];
  for await (const part of stream) parts.push(part);
  const last = parts.at(-1)!;
  t.ok(parts.slice(0, -1).every((p) => p.done === false && p.message.role === 'assistant'));
  t.equal(parts.map((p) => p.message.content).join(''), r.message.content, 'concatenated stream == non-streamed text');
  t.equal(last.done, true);
  t.equal(last.message.content, '', 'the final object carries no text');
  t.equal(last.done_reason, r.done_reason);
  t.equal(last.eval_count, r.eval_count);
  t.equal(last.prompt_eval_count, r.prompt_eval_count);
  checkDurations(t, last as unknown as Record<string, unknown>);
});

t.test('generate: non-streamed and streamed agree; context; raw mode; system', async (t) => {
  const r = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', options: greedy });
  t.equal(r.done, true);
  t.ok(r.response!.length > 0);
  t.equal(r.context.length, r.prompt_eval_count + r.eval_count, 'context = prompt ids + output ids');
  checkDurations(t, r as unknown as Record<string, unknown>);
  const stream = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', options: greedy, stream: true });
  let text = '';
  let final;
  for await (const part of stream) {
    text += part.response;
    if (part.done) final = part;
  }
  t.equal(text, r.response, 'concatenated stream == non-streamed text');
  t.same(final!.context, r.context);

  const raw = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', raw: true, options: greedy });
  t.equal(raw.context, undefined, 'raw mode returns no context (as Ollama)');
  t.ok(raw.prompt_eval_count < r.prompt_eval_count, 'raw: no chat template around the prompt');
  const sys = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', system: 'You are terse.', options: greedy });
  t.ok(sys.prompt_eval_count > r.prompt_eval_count, 'system adds a system turn');
});

t.test('options take effect: top_k 1 at a high temperature is greedy; num_predict; stop; seed', async (t) => {
  const base = await ollama.generate({ model: MODEL, prompt: 'Tell me a story', options: { temperature: 0, num_predict: 12 } });
  const topk = await ollama.generate({ model: MODEL, prompt: 'Tell me a story', options: { temperature: 2, top_k: 1, seed: 3, num_predict: 12 } });
  t.equal(topk.response, base.response);
  const free = await ollama.generate({ model: MODEL, prompt: 'Tell me a story', options: { temperature: 2, top_k: -1, top_p: 1, seed: 3, num_predict: 12 } });
  t.not(free.response, base.response, 'without top_k the sample differs');
  const again = await ollama.generate({ model: MODEL, prompt: 'Tell me a story', options: { temperature: 2, top_k: -1, top_p: 1, seed: 3, num_predict: 12 } });
  t.equal(again.response, free.response, 'same seed, same sample');
  const short = await ollama.generate({ model: MODEL, prompt: 'Tell me a story', options: { temperature: 0, num_predict: 3, ignore_eos: true } as Record<string, unknown> });
  t.equal(short.eval_count, 3);
  t.equal(short.done_reason, 'length');
  const stopAt = base.response!.slice(4, 8);
  if (stopAt.trim().length > 0) {
    const stopped = await ollama.generate({ model: MODEL, prompt: 'Tell me a story', options: { temperature: 0, num_predict: 12, stop: [stopAt] } });
    t.equal(stopped.done_reason, 'stop');
    t.ok(!stopped.response!.includes(stopAt), 'the stop string is not emitted');
  }
});

t.test('logprobs in Ollama shape', async (t) => {
  const r = await ollama.generate({ model: MODEL, prompt: 'Hello', logprobs: true, top_logprobs: 2, options: { num_predict: 3 } });
  t.equal(r.logprobs!.length, r.eval_count);
  t.ok(r.logprobs!.every((lp) => typeof lp.token === 'string' && lp.logprob <= 0 && lp.top_logprobs!.length === 2));
});

t.test('load requests (empty prompt / messages) answer done_reason load; unload is refused', async (t) => {
  const g = await ollama.generate({ model: MODEL, prompt: '' });
  t.match(g, { model: MODEL, done: true, done_reason: 'load', response: '' });
  const c = await ollama.chat({ model: MODEL, messages: [] });
  t.match(c, { done: true, done_reason: 'load', message: { role: 'assistant', content: '' } });
  const unload = await ollama.generate({ model: MODEL, prompt: '', keep_alive: 0 }).then(() => null, (e: unknown) => e);
  t.match(unload, { status_code: 400, error: /keep_alive/ });
  const kept = await ollama.generate({ model: MODEL, prompt: 'Hi', keep_alive: '5m', options: { num_predict: 2 } });
  t.equal(kept.done, true, 'keep_alive on a generation is accepted (the model stays loaded anyway)');
});

t.test('tags, show, version', async (t) => {
  const tags = await ollama.list();
  t.equal(tags.models.length, 1);
  const m = tags.models[0];
  t.equal(m.name, `${MODEL}:latest`);
  t.equal(m.model, `${MODEL}:latest`);
  t.ok(m.size > 1000);
  t.match(m.digest, /^[0-9a-f]{64}$/);
  t.match(m.details, { format: 'gguf', family: 'qwen3', families: ['qwen3'], quantization_level: String, parameter_size: String });
  const show = await ollama.show({ model: `${MODEL}:latest` });
  t.match(show.details, { format: 'gguf', family: 'qwen3' });
  // a text model: no 'vision'; 'tools' exactly when its chat template takes a tool list; Qwen3's reasons
  t.same(show.capabilities, ['completion', ...(/\btools\b/.test(show.template) ? ['tools'] : []), 'thinking']);
  const info = show.model_info as unknown as Record<string, unknown>;
  t.equal(info['general.architecture'], 'qwen3');
  t.ok((info['general.parameter_count'] as number) > 0);
  t.type(show.template, 'string');
  const v = await ollama.version();
  t.match(v.version, /^\d+\.\d+\.\d+/);
});

t.test('errors: Ollama shape and status, typed client errors', async (t) => {
  const anyName = await ollama.chat({ model: 'nope', messages, options: { num_predict: 1 } });
  t.equal(anyName.model, 'nope', 'any model name while one model is served (404 only with --strict-model-name)');
  const tooLong = await ollama.generate({ model: MODEL, prompt: 'x', options: { num_predict: 10_000 } }).then(() => null, (e: unknown) => e);
  t.match(tooLong, { status_code: 400, error: /maximum context length/ });
  const unauth = await new Ollama({ host }).list().then(() => null, (e: unknown) => e);
  t.match(unauth, { status_code: 401 });
  const post = (url: string, body: unknown) => app.inject({
    method: 'POST', url, headers: { authorization: 'Bearer secret-key', 'content-type': 'application/json' }, payload: JSON.stringify(body),
  });
  const cases: Array<[string, string, unknown, number, RegExp]> = [
    ['no model', '/api/chat', { messages }, 400, /model is required/],
    ['temperature as a string', '/api/generate', { model: MODEL, prompt: 'a', options: { temperature: 'hot' } }, 400, /options\.temperature/],
    ['top_p above 1', '/api/generate', { model: MODEL, prompt: 'a', options: { top_p: 2 } }, 400, /top_p/],
    ['negative repeat_penalty', '/api/generate', { model: MODEL, prompt: 'a', options: { repeat_penalty: -1 } }, 400, /repeat_penalty/],
    ['unknown format', '/api/chat', { model: MODEL, messages, format: 'xml' }, 400, /^format must be "json" or a JSON Schema/],
    ['unsupported schema keyword in format', '/api/generate', { model: MODEL, prompt: 'a', format: { type: 'object', patternProperties: {} } }, 400, /^format: unsupported JSON Schema keyword 'patternProperties'/],
    ['an unknown think level', '/api/chat', { model: MODEL, messages, think: 'deep' }, 400, /think must be true, false or one of/],
    ['raw with system', '/api/generate', { model: MODEL, prompt: 'a', raw: true, system: 's' }, 400, /raw mode does not support template, system, or context/],
    ['a Go template', '/api/generate', { model: MODEL, prompt: 'a', template: '{{ .Prompt }}' }, 400, /^template:/],
    ['suffix with raw', '/api/generate', { model: MODEL, prompt: 'a', suffix: 'b', raw: true }, 400, /^suffix \(fill-in-the-middle\) cannot be combined with raw/],
    ['images', '/api/generate', { model: MODEL, prompt: 'a', images: ['aGk='] }, 400, /^images:/],
    ['message images', '/api/chat', { model: MODEL, messages: [{ role: 'user', content: 'a', images: ['aGk='] }] }, 400, /messages\[0\]\.images/],
    ['a tool without a name', '/api/chat', { model: MODEL, messages, tools: [{ type: 'function', function: {} }] }, 400, /tools\[0\]\.function\.name is missing/],
    ['unknown role', '/api/chat', { model: MODEL, messages: [{ role: 'wizard', content: 'a' }] }, 400, /wizard/],
    ['mirostat', '/api/generate', { model: MODEL, prompt: 'a', options: { mirostat: 2 } }, 400, /options\.mirostat/],
    ['num_ctx over the server context', '/api/generate', { model: MODEL, prompt: 'a', options: { num_ctx: 100_000 } }, 400, /options\.num_ctx/],
    ['repeat_last_n below -1', '/api/generate', { model: MODEL, prompt: 'a', options: { repeat_last_n: -2 } }, 400, /repeat_last_n/],
    ['out-of-vocab context ids', '/api/generate', { model: MODEL, prompt: 'a', context: [99_999_999] }, 400, /outside the vocabulary/],
    ['invalid JSON', '/api/chat', '{"model":', 400, /invalid JSON/],
  ];
  for (const [what, url, body, status, message] of cases) {
    const res = typeof body === 'string'
      ? await app.inject({ method: 'POST', url, headers: { authorization: 'Bearer secret-key', 'content-type': 'application/json' }, payload: body })
      : await post(url, body);
    t.equal(res.statusCode, status, `${what}: ${res.body}`);
    const json = res.json();
    t.same(Object.keys(json), ['error'], `${what}: Ollama's { error } shape`);
    t.match(json.error, message, what);
  }
  const neutral = await post('/api/generate', { model: MODEL, prompt: 'a', stream: false,
    options: { mirostat: 0, typical_p: 1, tfs_z: 1, repeat_last_n: 64, num_ctx: 256, num_gpu: 1, num_thread: 2, num_predict: 2 } });
  t.equal(neutral.statusCode, 200, `neutral and load-time options are accepted: ${neutral.body}`);
});
