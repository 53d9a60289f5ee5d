// Pulling by Ollama name from Ollama's registry (lib/models/ollama-registry.ts) against a local registry: the OCI
// manifest's model layer becomes a verified blob (fetched through a redirect, as the registry sends blobs to its
// CDN), the template / system / params / messages / license layers the manifest's settings; a bare name reads
// namespace 'library', 'user/model' is a hub reference as before; a name not in the store resolves by pulling it
// (resolveModel, as `ollama run`); an unknown name is not_found, a corrupted
// model blob or text layer fails verification with the store unchanged; `spindle pull llama3.2`, and POST /api/pull
// in runner mode (NDJSON progress with the layers' digests), then the model serves with its Modelfile settings.
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { main as pullMain } from '../lib/cli/models/pull.js';
import { DownloadError } from '../lib/models/download.js';
import { ollamaRegistry, pullOllama } from '../lib/models/ollama-registry.js';
import { resolveModel } from '../lib/models/resolve.js';
import { localKey, ModelStore } from '../lib/models/store.js';
import { LLM } from '../lib/llm.js';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const gguf = readFileSync(await fixtureModel({ arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 5, tiedEmbeddings: true }));
const TEMPLATE = '{{ if .System }}<|system|>{{ .System }}{{ end }}<|user|>{{ .Prompt }}<|assistant|>';
const layersOf = (parts: Record<string, Buffer | Buffer[]>) => Object.entries(parts).flatMap(([kind, b]) =>
  (Array.isArray(b) ? b : [b]).map((x) => ({ mediaType: `application/vnd.ollama.image.${kind}`, digest: `sha256:${sha(x)}`, size: x.length, bytes: x })));
const models: Record<string, ReturnType<typeof layersOf>> = {
  'library/tiny:latest': layersOf({
    model: gguf, template: Buffer.from(TEMPLATE), system: Buffer.from('You are terse.'),
    params: Buffer.from(JSON.stringify({ temperature: 0.25, stop: ['<|user|>'] })),
    license: [Buffer.from('LICENSE A'), Buffer.from('POLICY B')],
  }),
  'library/tiny:other': layersOf({ model: gguf }),
  'library/corrupt:latest': layersOf({ model: randomBytes(20_000) }),  // its own bytes: the server corrupts them
  'library/badtext:latest': layersOf({ model: gguf, template: Buffer.from('x') }),
  'library/slow:latest': layersOf({ model: randomBytes(2_000_000) }),  // its CDN blob trickles
};
const slowDigest = models['library/slow:latest'][0].digest;
const corruptDigest = models['library/corrupt:latest'][0].digest;
const badTextDigest = models['library/badtext:latest'][1].digest;
const log: string[] = [];
const server = createServer((req, res) => {
  log.push(`${req.method} ${req.url}`);
  const m = /^\/v2\/([^/]+)\/([^/]+)\/(manifests|blobs)\/([^/?]+)$/.exec(req.url ?? '');
  const cdn = /^\/cdn\/(sha256:[0-9a-f]{64})$/.exec(req.url ?? '');
  const blobOf = (digest: string): Buffer | undefined => Object.values(models).flat().find((l) => l.digest === digest)?.bytes;
  if (cdn) {
    let b = blobOf(cdn[1])!;
    if (cdn[1] === corruptDigest) b = Buffer.concat([b.subarray(0, 100), Buffer.from([b[100] ^ 1]), b.subarray(101)]);
    res.writeHead(200, { 'content-length': b.length });
    if (cdn[1] !== slowDigest) return void res.end(b);
    let at = 0; // 20 KB every 20 ms: 2 s for the whole blob
    const tick = setInterval(() => {
      if (res.destroyed || at >= b.length) {
        clearInterval(tick);
        if (!res.destroyed) res.end();
        return;
      }
      res.write(b.subarray(at, at + 20_000));
      at += 20_000;
    }, 20);
    return;
  }
  if (!m) return void res.writeHead(404).end();
  const [, ns, name, what, ref] = m;
  if (what === 'manifests') {
    const layers = models[`${ns}/${name}:${decodeURIComponent(ref)}`];
    if (!layers) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN"}]}');
    res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' });
    res.end(JSON.stringify({ schemaVersion: 2, config: { digest: `sha256:${'0'.repeat(64)}`, size: 2 }, layers: layers.map(({ bytes: _, ...l }) => l) }));
    return;
  }
  const b = blobOf(ref);
  if (!b) return void res.writeHead(404).end();
  if (b.length > 4096) return void res.writeHead(307, { location: `/cdn/${ref}` }).end(); // big blobs: to the "CDN"
  res.writeHead(200).end(ref === badTextDigest ? Buffer.from('y') : b);
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
t.teardown(() => server.close());
const REGISTRY = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const env = { OLLAMA_REGISTRY: REGISTRY };
const freshStore = () => new ModelStore(mkdtempSync(join(tmpdir(), 'spindle-ollama-pull-')));

/** SPINDLE_HOME = home and OLLAMA_REGISTRY = the local registry for one test (what the CLI and LLM read), restored after. */
function useStoreAndRegistry(t: Test, home: string): void {
  const saved = { SPINDLE_HOME: process.env.SPINDLE_HOME, OLLAMA_REGISTRY: process.env.OLLAMA_REGISTRY };
  process.env.SPINDLE_HOME = home;
  process.env.OLLAMA_REGISTRY = REGISTRY;
  t.teardown(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}

t.test('pull by Ollama name: the model as a verified blob (through the redirect), the other layers as settings', async (t) => {
  const store = freshStore();
  const files: string[] = [];
  const m = await pullOllama(store, null, 'tiny', 'latest', { env, onFiles: (fs) => fs.forEach((f) => files.push(`${f.file} ${f.sha256}`)) });
  t.same(files.slice(0, 1), [`model.gguf ${sha(gguf)}`]);
  t.equal(files.length, 6, 'the model, then the template, system, params and two license layers');
  t.match(m, { name: 'tiny:latest', template: TEMPLATE, system: 'You are terse.', parameters: { temperature: 0.25, stop: ['<|user|>'] },
    license: ['LICENSE A', 'POLICY B'], mmproj: null, source: /^ollama:127\.0\.0\.1:\d+\/library\/tiny:latest$/ });
  t.same(m.model, { digest: `sha256-${sha(gguf)}`, size: gguf.length, file: 'model.gguf' });
  t.ok(existsSync(store.blobPath(`sha256-${sha(gguf)}`)));
  t.same(store.read(localKey(null, 'tiny', 'latest')), m, 'written under the local name');
  t.ok(log.includes(`GET /cdn/sha256:${sha(gguf)}`), 'the model blob came through the redirect');
  const other = await pullOllama(store, null, 'tiny', 'other', { env });
  t.equal(other.template, null);
  t.equal(log.filter((l) => l === `GET /cdn/sha256:${sha(gguf)}`).length, 1, 'a blob already in the store is not fetched again');
});

t.test('a name not in the store resolves by pulling it from the registry (as ollama run); pull: false does not', async (t) => {
  const store = freshStore();
  await t.rejects(resolveModel('tiny', { store, env, pull: false }), { name: 'ModelRefError', message: /not in the store/ });
  const r = await resolveModel('tiny', { store, env });
  t.equal(r.name, 'tiny:latest');
  t.equal(r.model, store.blobPath(`sha256-${sha(gguf)}`));
  t.equal(r.manifest?.system, 'You are terse.');
  await t.rejects(resolveModel('nope', { store, env }), { name: 'ModelRefError', message: /'nope' is not in the store .* nor in Ollama's registry \(nope:latest was not found/ });
  await t.rejects(resolveModel('corrupt', { store, env }), DownloadError, 'found, then a failed download: that failure, not "not in the registry"');
  t.same([ollamaRegistry({}), ollamaRegistry({ OLLAMA_REGISTRY: 'myreg.local:5000' }), ollamaRegistry({ OLLAMA_REGISTRY: 'http://h:1/' })],
    ['https://registry.ollama.ai', 'https://myreg.local:5000', 'http://h:1'], 'OLLAMA_REGISTRY as a URL or a host[:port] (https)');
});

t.test('unknown names, corrupted blobs and layers: clear errors, nothing written', async (t) => {
  const store = freshStore();
  await t.rejects(pullOllama(store, null, 'nope', 'latest', { env }), { name: 'HubError', code: 'not_found',
    message: /nope:latest was not found in Ollama's registry \(127\.0\.0\.1:\d+\); check the name and tag/ });
  await t.rejects(pullOllama(store, 'someone', 'tiny', 'latest', { env }), { code: 'not_found', message: /^someone\/tiny:latest was not found/ });
  await t.rejects(pullOllama(store, null, 'corrupt', 'latest', { env }), DownloadError);
  t.equal(store.read(localKey(null, 'corrupt', 'latest')), null);
  await t.rejects(pullOllama(store, null, 'badtext', 'latest', { env }), { code: 'bad_response', message: /template layer does not match its sha256 digest/ });
  t.equal(store.read(localKey(null, 'badtext', 'latest')), null);
  await t.rejects(pullOllama(store, null, 'tiny', 'latest', { env: { OLLAMA_REGISTRY: 'http://127.0.0.1:1' } }), { code: 'network' });
});

t.test('`spindle pull tiny` and `spindle pull registry.ollama.ai/library/tiny:other` pull from the registry', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'spindle-ollama-cli-'));
  useStoreAndRegistry(t, home);
  let out = '';
  const sink = new Writable({ write(c, _e, cb) { out += String(c); cb(); } });
  t.equal(await pullMain(['tiny'], { stdout: sink, stderr: sink }), 0);
  t.match(out, /success: tiny:latest \(model\.gguf, from Ollama's registry\)/);
  t.match(new ModelStore(home).read(localKey(null, 'tiny', 'latest')), { system: 'You are terse.' });
  out = '';
  t.equal(await pullMain(['registry.ollama.ai/library/tiny:other'], { stdout: sink, stderr: sink }), 0, 'the registry named in full');
  t.match(out, /success: tiny:other/);
});

t.test('POST /api/pull with an Ollama name (runner mode): NDJSON progress with the digest, then the model serves', async (t) => {
  const store = freshStore();
  const app = await buildApp({
    engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 256, threads: 2 }, 'serve'),
    servedModelNames: [],
    runner: { store, env: { ...env, HF_HUB_CACHE: mkdtempSync(join(tmpdir(), 'spindle-ollama-hf-')) } },
  });
  t.teardown(() => app.close());
  const r = await app.inject({ method: 'POST', url: '/api/pull', payload: { model: 'tiny' } });
  t.equal(r.statusCode, 200);
  const lines = r.body.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.same(lines[0], { status: 'pulling manifest' });
  t.ok(lines.some((l) => l.digest === `sha256:${sha(gguf)}` && l.status === `pulling ${sha(gguf).slice(0, 12)}` && l.completed === gguf.length),
    'a progress line names the model layer by digest');
  t.same(lines.at(-1), { status: 'success' });
  const layerLines = lines.filter((l) => typeof l.digest === 'string' && l.completed === l.total).map((l) => l.digest);
  t.equal(new Set(layerLines).size, 6, 'every layer (the model, the template, system, params and two licenses): a complete line with its digest');
  const again = await app.inject({ method: 'POST', url: '/api/pull', payload: { model: 'tiny' } });
  const againDigests = new Set(again.body.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => typeof l.digest === 'string' && l.completed === l.total).map((l) => l.digest));
  t.ok(againDigests.has(`sha256:${sha(gguf)}`), 'pulled again: the model already there still gets its line, complete');
  const tags = (await app.inject({ method: 'GET', url: '/api/tags' })).json() as { models: { name: string }[] };
  t.ok(tags.models.some((m) => m.name === 'tiny:latest'));
  const show = (await app.inject({ method: 'POST', url: '/api/show', payload: { model: 'tiny' } })).json() as Record<string, unknown>;
  t.equal(show.system, 'You are terse.');
  t.match(String(show.parameters), /temperature\s+0\.25/);
  const gen = await app.inject({ method: 'POST', url: '/api/generate', payload: { model: 'tiny', prompt: 'Hi', stream: false, options: { num_predict: 3 } } });
  t.equal(gen.statusCode, 200);
  t.equal((gen.json() as { done: boolean }).done, true);
  const missing = await app.inject({ method: 'POST', url: '/api/pull', payload: { model: 'nope', stream: false } });
  t.equal(missing.statusCode, 404);
  t.match(missing.json(), { error: /pull: nope:latest was not found in Ollama's registry/ });
});

t.test('LLM({ model: name }) pulls the name before loading; close() during the pull cancels it', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'spindle-ollama-llm-'));
  useStoreAndRegistry(t, home);
  const llm = new LLM({ model: 'slow', threads: 1 });
  const ready = llm.ready().then(() => null, (e: Error) => e);
  while (!log.includes(`GET /cdn/${slowDigest}`)) await new Promise((r) => setTimeout(r, 10));
  await llm.close();
  const err = await ready;
  t.match(err, { name: 'DownloadError', code: 'interrupted', message: /was cancelled/ }, 'the pull stopped with the engine');
  t.equal(new ModelStore(home).read(localKey(null, 'slow', 'latest')), null, 'nothing written');
  const tiny = new LLM({ model: 'tiny', threads: 1, maxModelLen: 64 });
  t.teardown(() => tiny.close());
  const [out] = await tiny.generate('Hi', { temperature: 0, maxTokens: 2, ignoreEos: true });
  t.equal(out.outputs[0].tokenIds.length, 2, 'a name the store lacks: pulled, loaded, generating');
});
