// The web UI's routes without a browser: `/` serves the built index.html with a strict Content-Security-Policy,
// `/ui/assets/*` the hashed assets (gzipped when asked, cached for good), nothing outside the build is
// reachable, the UI stays open under --api-key while the API does not, `--no-ui` (ui: false) leaves it out, and
// the npm package ships dist/ui. Needs `npm run build:ui`.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { buildApp } from '../lib/server/app.js';
import { parseServeArgs } from '../lib/server/command.js';
import { uiDir } from '../lib/server/routes/ui.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';
import { repoRoot } from './helpers/serve-process.js';

const path = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const engine = () => normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 1 }, 'serve');

t.equal(uiDir(), join(repoRoot, 'dist', 'ui'), 'the built UI is found from the TypeScript sources');
const assets = readdirSync(join(repoRoot, 'dist', 'ui', 'assets'));
const js = assets.find((f) => f.endsWith('.js'))!;
t.ok(js, 'a built script');

t.test('/ serves index.html with a CSP; assets are served, gzipped on request and cached', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], apiKeys: ['k'] });
  t.teardown(() => app.close());
  const index = await app.inject({ method: 'GET', url: '/' });
  t.equal(index.statusCode, 200, 'open without the API key');
  t.match(index.headers['content-type'], /^text\/html/);
  t.equal(index.headers['cache-control'], 'no-cache');
  t.match(index.headers['content-security-policy'], /script-src 'self'/);
  t.notMatch(index.headers['content-security-policy'], /unsafe-inline|unsafe-eval/);
  t.match(index.body, `/ui/assets/${js}`, 'the page names its hashed script');
  const plain = await app.inject({ method: 'GET', url: `/ui/assets/${js}` });
  t.equal(plain.statusCode, 200);
  t.match(plain.headers['content-type'], /^text\/javascript/);
  t.match(plain.headers['cache-control'], /immutable/);
  const gz = await app.inject({ method: 'GET', url: `/ui/assets/${js}`, headers: { 'accept-encoding': 'gzip, br' } });
  t.equal(gz.headers['content-encoding'], 'gzip');
  t.ok(gz.rawPayload.length < plain.rawPayload.length / 2, `gzipped ${gz.rawPayload.length} of ${plain.rawPayload.length} bytes`);
  t.equal(gunzipSync(gz.rawPayload).toString(), plain.body, 'the same bytes once unzipped');
  t.equal((await app.inject({ method: 'GET', url: '/v1/models' })).statusCode, 401, 'the API still needs the key');
  t.equal((await app.inject({ method: 'POST', url: '/', payload: {} })).statusCode, 401, 'only GET is open');
});

t.test('nothing outside the build is reachable', async (t) => {
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'] });
  t.teardown(() => app.close());
  for (const url of ['/ui/assets/nope.js', '/ui/../package.json', '/ui/%2e%2e/package.json', '/ui/index.html', '/ui/']) {
    const r = await app.inject({ method: 'GET', url });
    t.equal(r.statusCode, 404, url);
    t.notMatch(r.body, /"name": "spindle"/, `${url}: no file from outside dist/ui`);
  }
  const missing = await app.inject({ method: 'GET', url: '/ui/assets/nope.js' });
  t.match(JSON.parse(missing.body), { error: { message: 'no such file of the web UI: /ui/assets/nope.js' } });
});

t.test('--no-ui leaves the UI out', async (t) => {
  const cfg = parseServeArgs(['m.gguf', '--no-ui']);
  t.equal(cfg !== 'help' && cfg.serve.ui, false, '--no-ui');
  const dflt = parseServeArgs(['m.gguf']);
  t.equal(dflt !== 'help' && dflt.serve.ui, true, 'on by default');
  const app = await buildApp({ engine: engine(), servedModelNames: ['m'], ui: false });
  t.teardown(() => app.close());
  t.equal((await app.inject({ method: 'GET', url: '/' })).statusCode, 404);
  t.equal((await app.inject({ method: 'GET', url: `/ui/assets/${js}` })).statusCode, 404);
});

t.test('the npm package ships the built UI', async (t) => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repoRoot, encoding: 'utf8' });
  const files = (JSON.parse(out) as Array<{ files: Array<{ path: string }> }>)[0].files.map((f) => f.path);
  t.ok(files.includes('dist/ui/index.html'), 'dist/ui/index.html');
  t.ok(files.includes(`dist/ui/assets/${js}`), `dist/ui/assets/${js}`);
  t.notOk(files.some((f) => f.startsWith('ui/')), 'not the UI sources');
});
