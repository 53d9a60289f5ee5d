// Runner mode (`spindle serve --ollama`): the server as a local model runner, driven with the real `ollama` and
// `openai` clients on a real socket, over a fresh store (SPINDLE_HOME) and a local hub (test/helpers/hub-server.ts).
// Pull with NDJSON progress, list, models loaded on demand by name, one resident at a time (the other unloaded once
// its request finished, also under concurrent requests), keep_alive (0 unloads, load / unload with no prompt,
// forever), /api/ps and `spindle ps`, copy, delete (then 404), create from a model with system, parameters and a Go
// template (used by /api/chat, /api/generate and /v1/chat/completions), unknown models answering Ollama's 404, and
// the serve flags of runner mode.
import t from 'tap';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { main as psMain, psTable } from '../lib/cli/ps.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { localKey, ModelStore, type Manifest } from '../lib/models/store.js';
import { buildApp } from '../lib/server/app.js';
import { parseServeArgs } from '../lib/server/command.js';
import { parseHostEnv } from '../lib/server/host-env.js';
import { parseKeepAlive, parseKeepAliveFlag } from '../lib/server/keep-alive.js';
import { fixtureModel } from './helpers/fixtures.js';
import { startHubServer } from './helpers/hub-server.js';

const SMALL = { arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', tiedEmbeddings: true } as const;
const alphaPath = await fixtureModel({ ...SMALL, seed: 31 });
const betaPath = await fixtureModel({ ...SMALL, seed: 32 });

const hub = await startHubServer(new Map([['org/Beta-GGUF', { files: [{ path: 'Beta-Q4_K_M.gguf', bytes: readFileSync(betaPath) }] }]]));
t.teardown(() => hub.close());

const store = new ModelStore(mkdtempSync(join(tmpdir(), 'spindle-runner-home-')));
const alphaBlob = await store.importFile(alphaPath, 'alpha.gguf');
const manifest = (name: string): Manifest => ({
  schemaVersion: 1, name, createdAt: new Date().toISOString(), source: alphaPath, model: alphaBlob, mmproj: null,
  template: null, system: null, parameters: {}, messages: [], license: [],
});
store.write(localKey(null, 'alpha', 'latest'), manifest('alpha:latest'));

const app = await buildApp({
  engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 512, threads: 2 }, 'serve'),
  servedModelNames: [],
  runner: { store, env: { HF_ENDPOINT: hub.url, HF_TOKEN: '', HF_HUB_CACHE: mkdtempSync(join(tmpdir(), 'spindle-runner-hf-')) } },
});
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const port = (app.server.address() as AddressInfo).port;
const host = `http://127.0.0.1:${port}`;
const ollama = new Ollama({ host });
const openai = new OpenAI({ baseURL: `${host}/v1`, apiKey: 'unused', maxRetries: 0 });
const BETA = 'hf.co/org/Beta-GGUF';
const messages = [{ role: 'user', content: 'Tell me about spindles.' }];
const greedy = { temperature: 0, num_predict: 8 };

/** What a promise rejects with (null when it resolves). */
const failure = (p: Promise<unknown>): Promise<unknown> => p.then(() => null, (e: unknown) => e);
const loaded = async (): Promise<string[]> => (await ollama.ps()).models.map((m) => m.name);
/** /api/ps once the unloads the last response set off have finished (they run after the response is sent). */
async function settledPs(want: string[]): Promise<string[]> {
  let names = await loaded();
  for (let i = 0; i < 100 && JSON.stringify(names) !== JSON.stringify(want); i++) {
    await new Promise((r) => setTimeout(r, 20));
    names = await loaded();
  }
  return names;
}

t.test('pull from the hub with NDJSON progress, then list', async (t) => {
  const before = await ollama.list();
  t.same(before.models.map((m) => m.name), ['alpha:latest']);
  t.equal(before.models[0].details.format, 'gguf');
  t.equal(before.models[0].details.family, 'qwen3');
  t.match(before.models[0].digest, /^[0-9a-f]{64}$/);
  const events = [];
  for await (const e of await ollama.pull({ model: BETA, stream: true })) events.push(e);
  t.equal(events[0].status, 'pulling manifest');
  t.equal(events.at(-1)!.status, 'success');
  const progress = events.filter((e) => e.total > 0);
  t.ok(progress.length > 0, 'progress objects carry total and completed');
  t.ok(progress.some((e) => /^sha256:[0-9a-f]{64}$/.test(e.digest)), 'with the file digest');
  t.equal(progress.at(-1)!.completed, progress.at(-1)!.total, 'the last progress object is complete');
  t.ok(events.some((e) => e.status === 'verifying sha256 digest'));
  const names = (await ollama.list()).models.map((m) => m.name).sort();
  t.same(names, ['alpha:latest', `${BETA}:Q4_K_M`, `${BETA}:latest`]);
  const again = await ollama.pull({ model: BETA, stream: false });
  t.equal(again.status, 'success', 'pulling again (non-streamed) answers success');
  t.match(await failure(ollama.pull({ model: './m.gguf' })), { status_code: 400 }, 'a file path is no pull (bare names come from Ollama\'s registry: test/ollama-registry.test.ts)');
  t.match(await failure(ollama.pull({ model: 'hf.co/org/Missing-GGUF', stream: false })), { status_code: 404 });
});

t.test('models load on demand by name; one resident at a time; /api/ps and spindle ps', async (t) => {
  t.same(await loaded(), [], 'nothing loaded before the first request');
  const a = await ollama.chat({ model: 'alpha', messages, options: greedy });
  t.equal(a.model, 'alpha', 'the response echoes the name as given');
  t.ok(a.eval_count >= 1);
  const ps = await ollama.ps();
  t.equal(ps.models.length, 1);
  t.equal(ps.models[0].name, 'alpha:latest');
  t.equal(ps.models[0].size_vram, 0);
  t.equal(ps.models[0].digest, (alphaBlob as { digest: string }).digest.slice(7));
  t.equal((ps.models[0] as unknown as { context_length: number }).context_length, 512, '--max-model-len is the default context');
  const left = Date.parse(ps.models[0].expires_at as unknown as string) - Date.now();
  t.ok(left > 4 * 60_000 && left <= 5 * 60_000 + 1000, 'expires in the default 5 minutes');

  const b = await ollama.chat({ model: BETA, messages, options: greedy });
  t.equal(b.model, BETA);
  t.same(await loaded(), [`${BETA}:latest`], 'loading the second unloaded the first (max loaded 1)');
  t.not(b.message.content, a.message.content, 'another model (other weights) answered');

  // concurrent requests for both models: each finishes; the second load waits for the first's request
  const [x, y] = await Promise.all([
    ollama.chat({ model: 'alpha', messages, options: { temperature: 0, num_predict: 24 } }),
    ollama.generate({ model: BETA, prompt: 'Once upon a time', options: greedy }),
  ]);
  t.equal(x.done, true);
  t.equal(y.done, true);
  t.equal((await loaded()).length, 1, 'still one model loaded');

  const out: string[] = [];
  const io = { stdout: new Writable({ write(c, _e, cb) { out.push(String(c)); cb(); } }), stderr: new Writable({ write(c, _e, cb) { out.push(String(c)); cb(); } }) };
  const saved = process.env.SPINDLE_HOST;
  process.env.SPINDLE_HOST = `127.0.0.1:${port}`;
  try {
    t.equal(await psMain([], io), 0, out.join(''));
    t.match(out.join(''), /^NAME\s+ID\s+SIZE\s+PROCESSOR\s+UNTIL\n\S+:\S+\s+[0-9a-f]{12}\s+\d+ MB\s+100% CPU\s+(\d+ minutes|About a minute) from now\n$/);
    out.length = 0;
    process.env.SPINDLE_HOST = '127.0.0.1:1';
    t.equal(await psMain([], io), 1, 'no server: exit 1');
    t.match(out.join(''), /^spindle ps: no server answered at http:\/\/127\.0\.0\.1:1 .*\n$/);
  } finally {
    if (saved === undefined) delete process.env.SPINDLE_HOST;
    else process.env.SPINDLE_HOST = saved;
  }
  t.match(psTable([{ name: 'm:latest', digest: 'ab'.repeat(32), size: 2e9, size_vram: 0, expires_at: new Date(Date.now() + 300 * 365 * 864e5).toISOString() }]),
    /m:latest\s+abababababab\s+2 GB\s+100% CPU\s+Forever/);
});

t.test('keep_alive: 0 unloads after the request; empty requests load and unload; negative keeps forever', async (t) => {
  await ollama.chat({ model: 'alpha', messages, options: greedy, keep_alive: 0 });
  t.same(await settledPs([]), [], 'keep_alive 0: unloaded right after the request');
  const load = await ollama.generate({ model: 'alpha', prompt: '', keep_alive: '10m' });
  t.equal(load.done_reason, 'load');
  const ps = await ollama.ps();
  t.same(ps.models.map((m) => m.name), ['alpha:latest'], 'an empty prompt loads the model');
  const left = Date.parse(ps.models[0].expires_at as unknown as string) - Date.now();
  t.ok(left > 9 * 60_000 && left <= 10 * 60_000 + 1000, 'kept for the 10 minutes asked');
  const unload = await ollama.chat({ model: 'alpha', messages: [], keep_alive: 0 });
  t.equal(unload.done_reason, 'unload');
  t.same(await loaded(), [], 'an empty chat with keep_alive 0 unloads');
  await ollama.chat({ model: 'alpha', messages: [], keep_alive: -1 });
  const forever = Date.parse((await ollama.ps()).models[0].expires_at as unknown as string);
  t.ok(forever - Date.now() > 100 * 365 * 864e5, 'negative keep_alive: far in the future');
  t.match(await failure(ollama.chat({ model: 'alpha', messages, keep_alive: '5 minutes' })), { status_code: 400, error: /keep_alive/ });
  await ollama.generate({ model: 'alpha', prompt: 'Hi', options: greedy, keep_alive: '300ms' });
  t.same(await loaded(), ['alpha:latest'], 'kept after its request');
  t.same(await settledPs([]), [], 'unloaded once its keep-alive ran out');
});

t.test('--max-loaded-models 2: both stay loaded; the least recently used goes first', async (t) => {
  const two = await buildApp({
    engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 256, threads: 1 }, 'serve'), servedModelNames: [],
    runner: { store, maxLoaded: 2, env: {} },
  });
  t.teardown(() => two.close());
  const chat = async (model: string, numCtx?: number): Promise<void> => {
    const r = await two.inject({ method: 'POST', url: '/api/chat', payload: { model, messages, stream: false, options: { ...greedy, num_ctx: numCtx } } });
    t.equal(r.statusCode, 200, r.body);
  };
  const ps = async (): Promise<string[]> => (await two.inject({ method: 'GET', url: '/api/ps' })).json().models.map((m: { name: string; context_length: number }) => `${m.name}@${m.context_length}`);
  await chat('alpha');
  await chat(BETA);
  t.same(await ps(), ['alpha:latest@256', `${BETA}:latest@256`]);
  await chat(BETA);
  await chat('alpha', 128); // another context: another engine; beta was used last, alpha@256 goes
  t.same(await ps(), [`${BETA}:latest@256`, 'alpha:latest@128']);
});

t.test('copy, delete, unknown models', async (t) => {
  await ollama.copy({ source: 'alpha', destination: 'alpha-copy' });
  await ollama.chat({ model: 'alpha', messages: [] }); // loaded under its own name
  const c = await ollama.chat({ model: 'alpha-copy', messages, options: greedy });
  t.equal(c.model, 'alpha-copy');
  t.same(await loaded(), ['alpha:latest'], 'a copy shares the loaded engine of its file');
  await ollama.delete({ model: 'alpha-copy' });
  t.match(await failure(ollama.chat({ model: 'alpha-copy', messages })), { status_code: 404, error: 'model "alpha-copy" not found, try pulling it first' });
  t.match(await failure(ollama.delete({ model: 'alpha-copy' })), { status_code: 404, error: "model 'alpha-copy' not found" });
  t.match(await failure(ollama.copy({ source: 'nope', destination: 'x' })), { status_code: 404 });
  t.match(await failure(ollama.generate({ model: 'nope', prompt: 'hi' })), { status_code: 404, error: 'model "nope" not found, try pulling it first' });
  t.match(await failure(ollama.show({ model: 'nope' })), { status_code: 404 });
  t.match(await failure(ollama.chat({ model: '/etc/passwd', messages })), { status_code: 400, error: /file path/ });
  t.ok((await ollama.list()).models.every((m) => m.name !== 'alpha-copy:latest'), 'deleted from the list');
  const junk = join(mkdtempSync(join(tmpdir(), 'spindle-runner-junk-')), 'junk.gguf');
  writeFileSync(junk, 'not a GGUF file at all');
  store.write(localKey(null, 'broken', 'latest'), { ...manifest('broken:latest'), model: await store.importFile(junk, 'junk.gguf') });
  t.match(await failure(ollama.chat({ model: 'broken', messages })), { status_code: 503, error: /broken:latest failed to load/ }, 'a bad model file: 503 naming it');
  t.ok((await ollama.list()).models.some((m) => m.name === 'broken:latest' && m.details.family === 'unknown'), 'still listed');
  t.equal((await ollama.chat({ model: 'alpha', messages, options: greedy })).done, true, 'the server keeps serving');
  const curl = await fetch(`${host}/api/show`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '{"model":"alpha"}' });
  t.equal(curl.status, 200, "`curl -d`'s form content type is read as JSON under /api/, as Ollama reads it");
  const notJson = await fetch(`${host}/api/show`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'model=alpha' });
  t.equal(notJson.status, 400);
  t.ok(store.complete(store.read(localKey(null, 'alpha', 'latest'))!), 'the shared blob stays for alpha');
});

t.test('create from a model with system, parameters and a template; they apply on every route', async (t) => {
  const events = [];
  for await (const e of await ollama.create({ model: 'terse', from: 'alpha', system: 'You are terse.', parameters: { num_predict: 3, temperature: 0 }, stream: true })) {
    events.push(e.status);
  }
  t.equal(events.at(-1), 'success');
  const show = await ollama.show({ model: 'terse' });
  t.equal(show.system, 'You are terse.');
  t.match(show.parameters, /num_predict\s+3/);
  t.match(show.modelfile, /FROM terse:latest\nSYSTEM You are terse\.\nPARAMETER num_predict 3\n/);
  const terse = await ollama.chat({ model: 'terse', messages });
  t.ok(terse.eval_count <= 3, `num_predict 3 from the Modelfile (got ${terse.eval_count})`);
  const plain = await ollama.chat({ model: 'alpha', messages, options: greedy });
  t.ok(terse.prompt_eval_count > plain.prompt_eval_count, 'the SYSTEM is in the prompt');
  const longer = await ollama.chat({ model: 'terse', messages, options: { num_predict: 5 } });
  t.ok(longer.eval_count > 3 || longer.done_reason === 'stop', "the request's options win over the Modelfile's");
  const viaOpenAi = await openai.chat.completions.create({ model: 'terse', messages: [{ role: 'user', content: 'Hi' }] });
  t.ok(viaOpenAi.usage!.completion_tokens <= 3, '/v1: the Modelfile parameters are the defaults');
  t.equal(viaOpenAi.model, 'terse');

  await ollama.create({ model: 'qa', from: 'alpha', template: 'Q: {{ .Prompt }}\nA:', stream: false });
  const g = await ollama.generate({ model: 'qa', prompt: 'hi', options: greedy });
  const tok = await fetch(`${host}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'alpha', prompt: 'Q: hi\nA:', add_special_tokens: false }) });
  t.equal(g.prompt_eval_count, ((await tok.json()) as { count: number }).count, '/api/generate renders the Go TEMPLATE');
  const chat = await openai.chat.completions.create({ model: 'qa', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0 });
  t.equal(chat.usage!.prompt_tokens, g.prompt_eval_count, '/v1/chat/completions renders it too');

  t.match(await failure(ollama.create({ model: 'bad', from: 'alpha', parameters: { num_predict: 'many' } as never, stream: false })), { status_code: 400, error: /num_predict/ });
  t.match(await failure(ollama.create({ model: 'bad', from: 'nope', stream: false })), { status_code: 404 });
  const fromPath = await fetch(`${host}/api/create`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'bad', from: alphaPath }) });
  t.equal(fromPath.status, 400, 'FROM a file of the server is refused');
  t.match(((await fromPath.json()) as { error: string }).error, /file path/);
  t.same((await ollama.list()).models.filter((m) => m.name.startsWith('bad')), [], 'nothing written on a refusal');
  const fromText = await ollama.create({ model: 'mf', modelfile: 'FROM alpha\nPARAMETER num_predict 2\nSYSTEM "Short."', stream: false } as never);
  t.equal((fromText as unknown as { status: string }).status, 'success', 'the older modelfile text is accepted');
  t.equal((await ollama.show({ model: 'mf' })).system, 'Short.');
});

t.test('the OpenAI routes name store models', async (t) => {
  const list = await openai.models.list();
  t.ok(list.data.some((m) => m.id === 'alpha:latest') && list.data.some((m) => m.id === `${BETA}:Q4_K_M`));
  const one = await openai.models.retrieve(`${BETA}:Q4_K_M`);
  t.equal(one.id, `${BETA}:Q4_K_M`, '/v1/models/{name} takes names with slashes');
  const r = await openai.chat.completions.create({ model: BETA, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
  t.equal(r.model, BETA);
  t.ok(r.choices[0].message.content!.length > 0);
  t.same(await loaded(), [`${BETA}:latest`]);
  t.match(await failure(openai.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'Hi' }] })), { status: 404 });
  t.match(await failure(openai.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }] } as never)), { status: 400 });
  const health = await fetch(`${host}/health`);
  t.equal(health.status, 200);
  const metrics = await (await fetch(`${host}/metrics`)).text();
  t.match(metrics, /spindle:generation_tokens_total\{model_name="runner"\} [1-9]/);
});

t.test('a background response in runner mode runs to its end while another model is asked for', async (t) => {
  const q = await openai.responses.create({ model: 'alpha', input: 'Go on and on.', background: true, temperature: 0,
    max_output_tokens: 300, ignore_eos: true } as never) as unknown as OpenAI.Responses.Response;
  t.equal(q.status, 'queued');
  // one model resident at a time: beta waits for alpha's background work instead of unloading it under it
  const other = await openai.chat.completions.create({ model: BETA, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, temperature: 0 });
  t.equal(other.model, BETA);
  const done = await openai.responses.retrieve(q.id);
  t.equal(done.status, 'incomplete', 'it ran to max_output_tokens (not failed by an unload)');
  t.equal(done.usage!.output_tokens, 300);
});

t.test('single-model mode: management routes say they need runner mode', async (t) => {
  const single = await buildApp({ engine: normalizeEngineOptions({ model: alphaPath, maxModelLen: 256, threads: 1 }, 'serve'), servedModelNames: ['m'] });
  t.teardown(() => single.close());
  const r = await single.inject({ method: 'POST', url: '/api/pull', payload: { model: BETA } });
  t.equal(r.statusCode, 404);
  t.match(r.json().error, /runner mode/);
  await single.engine.ready();
  const ps = (await single.inject({ method: 'GET', url: '/api/ps' })).json();
  t.equal(ps.models[0].name, 'm:latest', '/api/ps lists the one served model');
});

t.test('serve flags and SPINDLE_HOST; keep_alive syntax', async (t) => {
  const run = parseServeArgs(['--ollama'], {});
  t.ok(run !== 'help' && run.runner !== null && run.serve.port === 11434 && run.serve.host === '127.0.0.1');
  t.same(run !== 'help' && run.runner, { maxLoaded: 1, keepAliveMs: 300_000 });
  const env = parseServeArgs(['--max-loaded-models', '2', '--keep-alive', '-1'], { SPINDLE_HOST: '0.0.0.0:9999' });
  t.ok(env !== 'help' && env.serve.host === '0.0.0.0' && env.serve.port === 9999);
  t.same(env !== 'help' && env.runner, { maxLoaded: 2, keepAliveMs: Infinity });
  const flags = parseServeArgs(['--ollama', '--port', '1234'], { SPINDLE_HOST: 'example:1' });
  t.ok(flags !== 'help' && flags.serve.port === 1234 && flags.serve.host === 'example', '--port wins over SPINDLE_HOST');
  const single = parseServeArgs([], {});
  t.ok(single !== 'help' && single.runner === null && single.serve.port === 8000, 'no --ollama, no SPINDLE_HOST: the demo model, as before');
  t.throws(() => parseServeArgs(['--ollama', 'm.gguf'], {}), /give no model/);
  t.throws(() => parseServeArgs(['m.gguf', '--keep-alive', '5m'], {}), /needs runner mode/);
  t.throws(() => parseServeArgs(['--ollama', '--served-model-name', 'x'], {}), /serves one model/);
  t.throws(() => parseServeArgs(['--ollama', '--keep-alive', 'soon'], {}), /--keep-alive must be/);
  t.same(parseHostEnv('https://host.example'), { scheme: 'https', host: 'host.example', port: 443 });
  t.same(parseHostEnv('[::1]:8080'), { scheme: 'http', host: '::1', port: 8080 });
  t.same(parseHostEnv(':5000'), { scheme: 'http', host: '127.0.0.1', port: 5000 });
  t.equal(parseKeepAlive('5m'), 300_000);
  t.equal(parseKeepAlive('1h30m'), 5_400_000);
  t.equal(parseKeepAlive('1.5s'), 1500);
  t.equal(parseKeepAlive(30), 30_000);
  t.equal(parseKeepAlive(1.9), 1000, 'a number is whole seconds (Ollama drops the fraction)');
  t.equal(parseKeepAlive('0'), 0);
  t.equal(parseKeepAlive(-1), Infinity);
  t.equal(parseKeepAlive('-1m'), Infinity);
  t.equal(parseKeepAlive(null), undefined);
  for (const bad of ['5', '5 m', 'm', '.s', '1d', '']) t.throws(() => parseKeepAlive(bad), /keep_alive/, JSON.stringify(bad));
  t.equal(parseKeepAliveFlag('300'), 300_000, 'the flag also takes whole seconds');
});
