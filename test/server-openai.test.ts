// The HTTP server's OpenAI surface on a real socket with the real `openai` client (models, chat and
// completions, streamed and not, usage chunk, extra body fields, typed errors), plus abort on disconnect.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
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
const port = (app.server.address() as AddressInfo).port;
const baseURL = `http://127.0.0.1:${port}/v1`;
const client = new OpenAI({ baseURL, apiKey: 'secret-key', maxRetries: 0 });
const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Tell me about spindles.' }];

t.test('models list', async (t) => {
  const list = await client.models.list();
  t.equal(list.data.length, 1);
  t.match(list.data[0], { id: MODEL, object: 'model', owned_by: 'spindle', max_model_len: 512 });
  t.notOk((list.data[0] as unknown as { capabilities: string[] }).capabilities.includes('vision'), 'a text model takes no images');
  t.ok(['cpu', 'cuda'].includes((list.data[0] as unknown as { device: string }).device), 'the device it runs on');
  t.type(list.data[0].created, 'number');
});

t.test('chat: non-streamed shape, streamed text equals it at temperature 0, usage chunk', async (t) => {
  const r = await client.chat.completions.create({ model: MODEL, messages, temperature: 0, max_tokens: 16 });
  t.match(r.id, /^chatcmpl-/);
  t.equal(r.object, 'chat.completion');
  t.equal(r.model, MODEL);
  t.equal(r.choices.length, 1);
  t.equal(r.choices[0].message.role, 'assistant');
  t.ok(r.choices[0].message.content!.length > 0);
  t.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  t.ok(r.usage!.prompt_tokens > 5);
  t.equal(r.usage!.total_tokens, r.usage!.prompt_tokens + r.usage!.completion_tokens);

  const stream = await client.chat.completions.create({
    model: MODEL, messages, temperature: 0, max_tokens: 16, stream: true, stream_options: { include_usage: true },
  });
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const c of stream) chunks.push(c);
  t.same(chunks[0].choices[0].delta, { role: 'assistant', content: '' }, 'first chunk carries the role');
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  t.equal(text, r.choices[0].message.content, 'concatenated stream == non-streamed text');
  const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
  t.equal(finish.length, 1);
  t.equal(finish[0].choices[0].finish_reason, r.choices[0].finish_reason);
  const last = chunks.at(-1)!;
  t.same(last.choices, [], 'usage chunk has no choices');
  const { prompt_tokens, completion_tokens, total_tokens } = r.usage!;
  t.match(last.usage, { prompt_tokens, completion_tokens, total_tokens });
  // the same prompt again: its whole blocks come from the prefix cache (the last token is always computed)
  t.equal(r.usage!.prompt_tokens_details!.cached_tokens, 0);
  t.equal(last.usage!.prompt_tokens_details!.cached_tokens, Math.floor((prompt_tokens - 1) / 16) * 16);
  t.ok(chunks.every((c) => c.id === chunks[0].id && c.object === 'chat.completion.chunk'));
});

t.test('extra body fields take effect: top_k 1 at temperature 2 equals greedy', async (t) => {
  const greedy = await client.chat.completions.create({ model: MODEL, messages, temperature: 0, max_tokens: 12 });
  const body = { model: MODEL, messages, temperature: 2, max_tokens: 12, top_k: 1, seed: 5 } as OpenAI.ChatCompletionCreateParamsNonStreaming;
  const topk = await client.chat.completions.create(body);
  t.equal(topk.choices[0].message.content, greedy.choices[0].message.content);
  const free = await client.chat.completions.create({ ...body, top_k: -1 } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  t.not(free.choices[0].message.content, greedy.choices[0].message.content, 'without top_k the sample differs');
});

t.test('n > 1 and logprobs', async (t) => {
  const r = await client.chat.completions.create({ model: MODEL, messages, n: 3, seed: 1, max_tokens: 4, logprobs: true, top_logprobs: 2 });
  t.same(r.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of r.choices) {
    t.ok(c.logprobs!.content!.length >= 1 && c.logprobs!.content!.length <= 4);
    t.ok(c.logprobs!.content!.every((lp) => lp.top_logprobs.length === 2 && lp.logprob <= 0));
  }
});

t.test('completions: string and token-id prompts, echo, streamed', async (t) => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  t.match(r.id, /^cmpl-/);
  t.equal(r.object, 'text_completion');
  t.equal(r.choices[0].index, 0);
  t.ok(r.usage!.completion_tokens >= 1);
  const echo = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, echo: true });
  t.equal(echo.choices[0].text, 'Once upon a time' + r.choices[0].text);
  const batch = await client.completions.create({ model: MODEL, prompt: ['a b c', 'Once upon a time'], max_tokens: 8, temperature: 0 });
  t.same(batch.choices.map((c) => c.index), [0, 1]);
  t.equal(batch.choices[1].text, r.choices[0].text, 'batched prompt gives the same greedy text');
  const stream = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.text ?? '';
  t.equal(text, r.choices[0].text);
});

t.test('typed client errors: 400 and 401, 404 for an unknown model card', async (t) => {
  const err = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 100000 }).then(() => null, (e: unknown) => e);
  t.ok(err instanceof OpenAI.BadRequestError, 'a BadRequestError');
  const bad = err as InstanceType<typeof OpenAI.BadRequestError>;
  t.equal(bad.status, 400);
  t.equal(bad.code, 'context_length_exceeded');
  t.equal(bad.type, 'invalid_request_error');
  t.equal(bad.param, 'max_tokens');
  const wrong = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  const e401 = await wrong.models.list().then(() => null, (e: unknown) => e);
  t.ok(e401 instanceof OpenAI.AuthenticationError, 'an AuthenticationError');
  t.equal((e401 as InstanceType<typeof OpenAI.AuthenticationError>).status, 401);
  const e404 = await client.models.retrieve('nope').then(() => null, (e: unknown) => e);
  t.ok(e404 instanceof OpenAI.NotFoundError, 'a NotFoundError');
  const anyName = await client.chat.completions.create({ model: 'nope', messages, max_tokens: 1 });
  t.equal(anyName.model, 'nope', 'a request may name any model while one is served (404 only with --strict-model-name)');
});

t.test('auth: Bearer and Key prefixes, wrong scheme, /health open', async (t) => {
  const get = (headers: Record<string, string>) => app.inject({ method: 'GET', url: '/v1/models', headers });
  t.equal((await get({ authorization: 'Bearer secret-key' })).statusCode, 200);
  t.equal((await get({ authorization: 'Key secret-key' })).statusCode, 200);
  t.equal((await get({ authorization: 'Basic secret-key' })).statusCode, 401);
  t.equal((await get({ authorization: 'Bearer secret-keY' })).statusCode, 401);
  const none = await get({});
  t.equal(none.statusCode, 401);
  t.match(none.json(), { error: { type: 'authentication_error', code: 'invalid_api_key', param: null } });
  t.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200);
});

/** Starts a streamed chat on a raw socket, reads `chunks` SSE frames, then destroys the socket. */
function streamThenDisconnect(frames: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer secret-key' },
    }, (res) => {
      let seen = 0;
      res.on('data', (b: Buffer) => {
        seen += b.toString().split('\n\n').filter((f) => f.startsWith('data:')).length;
        if (seen >= frames) {
          req.destroy();
          resolve(seen);
        }
      });
    });
    req.on('error', (e) => { if (!req.destroyed) reject(e); });
    req.end(JSON.stringify({ model: MODEL, messages, max_tokens: 400, ignore_eos: true, stream: true }));
  });
}

async function waitIdle(): Promise<{ running: number; waiting: number; kvBlocksUsed?: number }> {
  for (let i = 0; i < 200; i++) {
    const s = app.engine.stats();
    if (s.running === 0 && s.waiting === 0 && app.engine.inflight === 0) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  return app.engine.stats();
}

t.test('a client that disconnects mid-stream aborts its request and frees its KV blocks', async (t) => {
  const before = app.engine.stats();
  await streamThenDisconnect(3);
  const s = await waitIdle();
  t.equal(s.running, 0);
  t.equal(s.waiting, 0);
  t.equal(app.engine.inflight, 0);
  if (s.kvBlocksUsed !== undefined) t.equal(s.kvBlocksUsed, 0, 'no KV block held');
  const after = app.engine.stats();
  t.ok(after.generatedTokens - before.generatedTokens < 400, 'stopped well before max_tokens');
});

t.test('a client that disconnects from a non-streamed request aborts it', async (t) => {
  const before = app.engine.stats();
  const controller = new AbortController();
  const p = client.chat.completions.create({ model: MODEL, messages, max_tokens: 450, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsNonStreaming,
    { signal: controller.signal });
  setTimeout(() => controller.abort(), 50);
  await t.rejects(p);
  const s = await waitIdle();
  t.equal(s.running + s.waiting, 0);
  t.ok(app.engine.stats().generatedTokens - before.generatedTokens < 450, 'stopped before max_tokens');
});

t.test('a streamed response keeps the connection unless the request says Connection: close', async (t) => {
  for (const [connection, want] of [['close', 'close'], ['keep-alive', 'keep-alive'], [undefined, 'keep-alive']] as const) {
    const r = await app.inject({ method: 'POST', url: '/v1/completions',
      headers: { 'content-type': 'application/json', authorization: 'Bearer secret-key', ...(connection ? { connection } : {}) },
      payload: { model: MODEL, prompt: 'hi', max_tokens: 2, stream: true } });
    t.equal(r.statusCode, 200);
    t.equal(r.headers.connection, want, `request Connection: ${connection ?? '(none)'}`);
  }
});
