// --root-path (issue 21): every route answers under the prefix /org/app exactly as at the root, no other prefix
// reaches a route (/org, /org/app2, /org/app/org/app, /other/app), Key and Bearer auth guard the API there while
// /health and the UI stay open, the UI page under the prefix loads its assets through the prefix, and every
// response carries an x-request-id (the client's when it is a plain token).
import t from 'tap';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildApp } from '../lib/server/app.js';
import { parseRootPath, RootPathError, stripRootPath } from '../lib/server/root-path.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';
import { repoRoot } from './helpers/serve-process.js';

const path = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const engine = () => normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 1 }, 'serve');
const js = readdirSync(join(repoRoot, 'dist', 'ui', 'assets')).find((f) => f.endsWith('.js'))!;
const ROOT = '/org/app';

type Call = { method: 'GET' | 'POST' | 'DELETE'; url: string; payload?: Record<string, unknown> | string };
// Every route of single-model mode (docs/api.md), with a body that reaches the handler (the model management
// routes answer that they need runner mode).
const ROUTES: Call[] = [
  { method: 'GET', url: '/' },
  { method: 'GET', url: `/ui/assets/${js}` },
  { method: 'GET', url: '/health' },
  { method: 'GET', url: '/v1/models' },
  { method: 'GET', url: '/v1/models/m' },
  { method: 'POST', url: '/v1/load_lora_adapter', payload: { lora_name: 'a', lora_path: '/nonexistent.gguf' } },  // off: a 404 that says so
  { method: 'POST', url: '/v1/unload_lora_adapter', payload: { lora_name: 'a' } },
  { method: 'POST', url: '/v1/chat/completions', payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 } },
  { method: 'POST', url: '/v1/completions', payload: { model: 'm', prompt: 'hi', max_tokens: 2, temperature: 0 } },
  { method: 'POST', url: '/tokenize', payload: { prompt: 'hello world' } },
  { method: 'POST', url: '/detokenize', payload: { tokens: [1, 2, 3] } },
  { method: 'GET', url: '/tokenizer_info' },
  { method: 'POST', url: '/rerank', payload: { query: 'q', documents: ['d'] } },
  { method: 'POST', url: '/v1/rerank', payload: { query: 'q', documents: ['d'] } },
  { method: 'POST', url: '/v2/rerank', payload: { query: 'q', documents: ['d'] } },
  { method: 'POST', url: '/score', payload: { text_1: 'a', text_2: 'b' } },
  { method: 'POST', url: '/v1/score', payload: { text_1: 'a', text_2: 'b' } },
  { method: 'POST', url: '/v1/embeddings', payload: { model: 'm', input: 'hello world' } },
  { method: 'POST', url: '/v1/responses', payload: { model: 'm', input: 'hi', max_output_tokens: 2, temperature: 0, store: false } },
  { method: 'GET', url: '/v1/responses/resp_unknown' },
  { method: 'DELETE', url: '/v1/responses/resp_unknown' },
  { method: 'POST', url: '/v1/responses/resp_unknown/cancel' },
  { method: 'POST', url: '/api/embed', payload: { model: 'm', input: 'hello world' } },
  { method: 'POST', url: '/api/embeddings', payload: { model: 'm', prompt: 'hello world' } },
  { method: 'GET', url: '/metrics' },
  { method: 'POST', url: '/api/generate', payload: { model: 'm', prompt: 'hi', stream: false, options: { num_predict: 2, temperature: 0 } } },
  { method: 'POST', url: '/api/chat', payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: false, options: { num_predict: 2, temperature: 0 } } },
  { method: 'POST', url: '/api/create', payload: { model: 'x' } },
  { method: 'POST', url: '/api/copy', payload: { source: 'm', destination: 'n' } },
  { method: 'GET', url: '/api/version' },
  { method: 'GET', url: '/api/tags' },
  { method: 'POST', url: '/api/show', payload: { model: 'm' } },
  { method: 'GET', url: '/api/ps' },
  { method: 'POST', url: '/api/pull', payload: { model: 'x', stream: false } },
  { method: 'DELETE', url: '/api/delete', payload: { model: 'x' } },
  { method: 'POST', url: `/api/blobs/sha256:${'0'.repeat(64)}`, payload: 'x' },
  { method: 'POST', url: '/generate', payload: { text: 'hi', rid: 'r', sampling_params: { max_new_tokens: 2, temperature: 0 } } },
  { method: 'POST', url: '/abort_request', payload: { rid: 'r' } },
  { method: 'GET', url: '/flush_cache' },
  { method: 'POST', url: '/flush_cache' },
  { method: 'POST', url: '/reset_prefix_cache' },
  { method: 'GET', url: '/get_model_info' },
  { method: 'GET', url: '/model_info' },
  { method: 'GET', url: '/get_server_info' },
  { method: 'GET', url: '/server_info' },
  { method: 'GET', url: '/health_generate' },
  { method: 'POST', url: '/encode', payload: { text: 'hello world', rid: 'e' } },
];

const NO_ROUTE = /"no route /; // the body of a request that reached no route (plugins/errors.ts)

/** The routes the app registered: one per method (HEAD aside) of each `name (METHODS)` line of printRoutes. */
function registeredRouteCount(tree: string): number {
  return tree.split('\n').reduce((n, l) => n + (/\(([^)]*)\)/.exec(l)?.[1].match(/\b(GET|POST|DELETE)\b/g)?.length ?? 0), 0);
}

/** A response's comparable part: status, and the body without the fields that change per request. */
function shape(r: { statusCode: number; body: string }): string {
  return `${r.statusCode} ${r.body.replace(/"(id|created|created_at|expires_at|total_duration|load_duration|prompt_eval_duration|eval_duration|system_fingerprint|e2e_latency)":("[^"]*"|[\d.e+-]+)/g, '"$1":_')
    .replace(/spindle_[a-z_]+(seconds|bytes)[^\n]*/g, '')}`;
}

t.test('parseRootPath: what a root path may be, named in the error', async (t) => {
  t.equal(parseRootPath('/org/app/'), '/org/app');
  t.equal(parseRootPath(' /org_1/app-2.v~3 '), '/org_1/app-2.v~3');
  t.equal(parseRootPath(''), '');
  t.equal(parseRootPath('/'), '');
  for (const bad of ['org/app', '/org//app', '/org/../app', '/org/./app', '/org/app?x=1', '/org/%2e%2e', '/org/app#x', '/org app']) {
    t.throws(() => parseRootPath(bad, 'SPINDLE_ROOT_PATH'), { name: 'RootPathError', message: /SPINDLE_ROOT_PATH must .*\/org_id\/app_id/ }, bad);
  }
  t.ok(new RootPathError('x') instanceof Error);
  t.equal(stripRootPath('/org/app', ROOT), '/');
  t.equal(stripRootPath('/org/app?x=1', ROOT), '/?x=1');
  t.equal(stripRootPath('/org/app/v1/models', ROOT), '/v1/models');
  t.equal(stripRootPath('/org/apps/v1/models', ROOT), '/org/apps/v1/models', 'a longer segment is not the prefix');
  t.equal(stripRootPath('/org/app/org/app/v1', ROOT), '/org/app/v1', 'stripped once');
});

t.test('every route answers under the prefix as at the root', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], rootPath: ROOT });
  t.teardown(() => app.close());
  await app.engine.core.ready();
  t.equal(registeredRouteCount(app.printRoutes({ commonPrefix: false })), ROUTES.length, 'the list below covers every registered route');
  for (const c of ROUTES) {
    const atRoot = await app.inject({ ...c });
    const underPrefix = await app.inject({ ...c, url: `${ROOT}${c.url}` });
    t.notMatch(atRoot.body, NO_ROUTE, `${c.method} ${c.url} reaches its route at the root (${atRoot.statusCode})`);
    if (c.url === '/') t.equal(underPrefix.statusCode, 200, `${c.method} ${ROOT}/ answers (its asset URLs: the UI test below)`);
    else t.equal(shape(underPrefix), shape(atRoot), `${c.method} ${ROOT}${c.url} answers as ${c.url}`);
  }
  t.equal((await app.inject({ method: 'GET', url: ROOT })).statusCode, 200, `${ROOT} without a slash is the UI page`);
  t.equal((await app.inject({ method: 'GET', url: `${ROOT}?x=1` })).statusCode, 200, 'with a query string too');
});

t.test('nothing answers under another prefix', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], rootPath: ROOT });
  t.teardown(() => app.close());
  for (const c of ROUTES) {
    for (const other of ['/org', '/org/app2', '/org/ap', `${ROOT}${ROOT}`, '/other/app', '/ORG/APP']) {
      const r = await app.inject({ ...c, url: `${other}${c.url}` });
      t.equal(r.statusCode, 404, `${c.method} ${other}${c.url}`);
      t.match(r.body, NO_ROUTE, 'no route: nothing behind it ran');
    }
  }
});

t.test('Key and Bearer auth under the prefix; /health and the UI stay open', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], rootPath: ROOT, apiKeys: ['secret-1', 'secret-2'] });
  t.teardown(() => app.close());
  await app.engine.core.ready();
  const get = (url: string, authorization?: string) => app.inject({ method: 'GET', url, headers: authorization ? { authorization } : {} });
  for (const base of [ROOT, '']) {
    t.equal((await get(`${base}/v1/models`)).statusCode, 401, `${base}/v1/models without a key`);
    t.equal((await get(`${base}/v1/models`, 'Key secret-1')).statusCode, 200, `${base}/v1/models with Key`);
    t.equal((await get(`${base}/v1/models`, 'Bearer secret-2')).statusCode, 200, `${base}/v1/models with Bearer`);
    t.equal((await get(`${base}/v1/models`, 'key secret-1')).statusCode, 200, 'the scheme is case-insensitive');
    t.equal((await get(`${base}/v1/models`, 'Key wrong')).statusCode, 401, 'a wrong key');
    t.equal((await get(`${base}/v1/models`, 'Basic c2VjcmV0LTE=')).statusCode, 401, 'another scheme');
    t.equal((await get(`${base}/metrics`)).statusCode, 401, `${base}/metrics needs the key`);
    t.equal((await get(`${base}/health`)).statusCode, 200, `${base}/health is open`);
    t.equal((await get(`${base}/`)).statusCode, 200, `${base}/ (the UI page) is open`);
  }
  const chat = await app.inject({ method: 'POST', url: `${ROOT}/v1/chat/completions`, headers: { authorization: 'Key secret-1' },
    payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0 } });
  t.equal(chat.statusCode, 200, 'a chat completion under the prefix with Key auth');
  t.equal(JSON.parse(chat.body).object, 'chat.completion');
  const denied = await app.inject({ method: 'POST', url: `${ROOT}/v1/chat/completions`, payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } });
  t.equal(denied.statusCode, 401);
  t.match(JSON.parse(denied.body), { error: { code: 'invalid_api_key' } });
});

t.test('the UI page under the prefix loads its assets through the prefix', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], rootPath: ROOT });
  t.teardown(() => app.close());
  const under = (await app.inject({ method: 'GET', url: `${ROOT}/` })).body;
  t.match(under, `src="${ROOT}/ui/assets/${js}"`);
  t.notMatch(under, /"\/ui\//, 'no asset URL outside the prefix');
  const root = (await app.inject({ method: 'GET', url: '/' })).body;
  t.match(root, `src="/ui/assets/${js}"`, 'the page at the root is unchanged');
  t.match(under, `<meta name="spindle-root-path" content="${ROOT}">`, 'the app learns the prefix for its API calls');
  t.notMatch(root, /spindle-root-path/, 'at the root: no prefix');
  t.equal((await app.inject({ method: 'GET', url: `${ROOT}/ui/assets/${js}` })).statusCode, 200);
});

t.test('x-request-id on every response: the client\'s plain token, else a fresh UUID', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], rootPath: ROOT, apiKeys: ['k'] });
  t.teardown(() => app.close());
  const mine = await app.inject({ method: 'GET', url: `${ROOT}/health`, headers: { 'x-request-id': 'req-42.a:b@c_d' } });
  t.equal(mine.headers['x-request-id'], 'req-42.a:b@c_d');
  const denied = await app.inject({ method: 'GET', url: `${ROOT}/v1/models`, headers: { 'x-request-id': 'abc' } });
  t.equal(denied.statusCode, 401);
  t.equal(denied.headers['x-request-id'], 'abc', 'also on an error');
  for (const bad of ['has space', 'x'.repeat(129), 'semi;colon', '']) {
    const r = await app.inject({ method: 'GET', url: '/health', headers: { 'x-request-id': bad } });
    t.match(r.headers['x-request-id'], /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, `'${bad.slice(0, 20)}' replaced by a UUID`);
  }
  const a = await app.inject({ method: 'GET', url: '/health' });
  const b = await app.inject({ method: 'GET', url: '/health' });
  t.not(a.headers['x-request-id'], b.headers['x-request-id'], 'fresh per request');
});
