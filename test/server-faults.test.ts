// docs/reliability.md item 12 end to end: a forward pass that fails (the test-only native hook
// SPINDLE_TEST_FAIL_FORWARD_AT_STEP=N makes engine step N throw) fails the requests of that step (a streamed
// one with a `data: {"error": ...}` frame, a non-streamed one with a 500), frees their KV blocks, turns
// /health to 503 and counts in /metrics, while the process lives on: later requests are served and close()
// still returns.
import t from 'tap';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureModel } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const HOOK = 'SPINDLE_TEST_FAIL_FORWARD_AT_STEP';
debugAddon(); // the hook comes with the addon's test exports (SPINDLE_TEST_HOOKS): a build without them fails here

/** An app whose engine fails the forward pass of step `step` (the native engine reads the variable at construction). */
async function faultyApp(step: number): Promise<FastifyInstance> {
  process.env[HOOK] = String(step);
  const pending = buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['m'] });
  delete process.env[HOOK];
  const app = await pending;
  await app.engine.ready();
  return app;
}

const chat = (extra: Record<string, unknown>) => JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 40, ignore_eos: true, ...extra });

async function settled(app: FastifyInstance) {
  for (let i = 0; i < 300; i++) {
    const s = app.engine.stats();
    if (s.running === 0 && s.waiting === 0 && app.engine.inflight === 0) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  return app.engine.stats();
}

t.test('the addon counts failed steps', async (t) => {
  const app = await faultyApp(0);
  t.teardown(() => app.close());
  t.type((app.engine.stats() as unknown as Record<string, unknown>).failedSteps, 'number',
    'engine stats carry failedSteps (rebuild the addon / prebuilds if this fails)');
});

t.test('a failed forward pass mid-stream: error frame, blocks freed, /health 503, metrics, still serving', async (t) => {
  const app = await faultyApp(3); // step 1: prefill + first token, step 2: a decode, step 3: fails
  let closed = false;
  t.teardown(async () => { if (!closed) await app.close(); });
  t.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200, 'healthy before');

  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload: chat({ stream: true }) });
  t.equal(res.statusCode, 200, 'the stream had started');
  const frames = res.body.split('\n\n').filter(Boolean).map((f) => f.replace(/^data: /, ''));
  t.equal(frames.at(-1), '[DONE]');
  const error = JSON.parse(frames.at(-2)!);
  t.match(error, { error: { type: 'internal_server_error', message: /injected test fault/ } }, 'the failure is an error frame');
  const content = frames.slice(0, -2).map((f) => JSON.parse(f)).filter((c) => c.choices[0]?.delta?.content);
  t.equal(content.length, 2, 'the two tokens of the steps before the failure were streamed');

  const s = await settled(app);
  t.equal(s.kvBlocksUsed, 0, 'the failed request holds no KV block');
  t.equal((s as unknown as { failedSteps: number }).failedSteps, 1);
  const health = await app.inject({ method: 'GET', url: '/health' });
  t.equal(health.statusCode, 503);
  t.match(health.json(), { status: 'error', error: /forward pass failed in 1 step/ });
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /spindle:engine_failed_steps_total\{model_name="m"\} 1/);
  t.match(metrics, /spindle:request_success_total\{model_name="m",finished_reason="error"\} 1/);

  const later = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload: chat({ max_tokens: 4 }) });
  t.equal(later.statusCode, 200, 'the process and the engine keep serving');
  t.equal(later.json().usage.completion_tokens, 4);
  t.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 503, '/health stays 503');

  const start = Date.now();
  await app.close();
  closed = true;
  t.ok(Date.now() - start < 5000, 'close() returns');
});

t.test('a failed forward pass during a non-streamed request: 500 in the OpenAI error shape', async (t) => {
  const app = await faultyApp(1); // the prefill step fails
  t.teardown(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload: chat({}) });
  t.equal(res.statusCode, 500);
  t.match(res.json(), { error: { type: 'internal_server_error', message: /generation failed: injected test fault: the forward pass of step 1 failed/ } });
  const s = await settled(app);
  t.equal(s.kvBlocksUsed, 0);
  t.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 503);
  const ollama = await app.inject({ method: 'POST', url: '/api/generate', headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ model: 'm', prompt: 'Hi', stream: false, options: { num_predict: 3 } }) });
  t.equal(ollama.statusCode, 200, 'later requests are served');
});
