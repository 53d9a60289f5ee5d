// Ollama's blob upload and create from uploaded files (runner mode), as the `ollama create` CLI does it against a
// remote server: POST /api/blobs/sha256:<hex> (201; 200 when present; a wrong digest is a 400 and keeps nothing),
// HEAD /api/blobs (200 / 404), then /api/create with `files` (a GGUF model) and `adapters` (a LoRA adapter); the
// created models answer /api/generate; refusals name the field.
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { ModelStore, localKey } from '../lib/models/store.js';
import { buildApp } from '../lib/server/app.js';
import { fixtureModel } from './helpers/fixtures.js';
import { splitGguf } from './helpers/split-gguf.js';
import { resolveSpec, tensorPlan, tokenizerGguf, writeLoraAdapter } from './tooling/fixtures/index.js';

const SPEC = { arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 41, tiedEmbeddings: true } as const;
const modelPath = await fixtureModel(SPEC);
const dir = mkdtempSync(join(tmpdir(), 'spindle-blobs-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const resolved = resolveSpec(SPEC);
const adapterPath = join(dir, 'adapter.gguf');
await writeLoraAdapter(adapterPath, resolved.arch, tensorPlan(resolved, tokenizerGguf(resolved.tokenizer).nVocab), { seed: 5 });
const store = new ModelStore(join(dir, 'home'));
const app = await buildApp({ engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: [], runner: { store } });
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const digestOf = (bytes: Buffer): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
const upload = (digest: string, bytes: Buffer) => fetch(`${base}/api/blobs/${digest}`, { method: 'POST', body: bytes });
const post = async (path: string, body: Record<string, unknown>) => {
  const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
};

t.test('blobs: upload, present, refused on a wrong digest', async (t) => {
  const bytes = readFileSync(modelPath);
  const digest = digestOf(bytes);
  t.equal((await fetch(`${base}/api/blobs/${digest}`, { method: 'HEAD' })).status, 404, 'not there yet');
  t.equal((await upload(digest, bytes)).status, 201);
  t.equal((await fetch(`${base}/api/blobs/${digest}`, { method: 'HEAD' })).status, 200);
  t.equal((await upload(digest, bytes)).status, 200, 'already there');
  const wrong = `sha256:${'0'.repeat(64)}`;
  const bad = await upload(wrong, Buffer.from('not the right bytes'));
  t.equal(bad.status, 400);
  t.match((await bad.json() as { error: string }).error, /digest mismatch, expected "sha256:0{64}", got "sha256:[0-9a-f]{64}"/);
  t.notOk(existsSync(store.blobPath(`sha256-${'0'.repeat(64)}`)), 'nothing kept');
  t.notOk(readdirSync(store.blobs).some((f) => f.endsWith('.tmp')), 'no temporary file left');
  t.equal((await fetch(`${base}/api/blobs/sha256:xyz`, { method: 'HEAD' })).status, 400, 'a malformed digest');
  t.equal((await fetch(`${base}/api/blobs/${digest.toUpperCase().replace('SHA256', 'sha256')}`, { method: 'HEAD' })).status, 200, 'upper-case hex too, as Ollama');
  const typed = await fetch(`${base}/api/blobs/${digestOf(Buffer.from('x'))}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: 'x' });
  t.equal(typed.status, 201, 'whatever the content type');
});

t.test('create from uploaded files (a model, then a LoRA adapter); the models generate', async (t) => {
  const model = digestOf(readFileSync(modelPath));
  const adapterBytes = readFileSync(adapterPath);
  const adapter = digestOf(adapterBytes);
  t.equal((await upload(adapter, adapterBytes)).status, 201);
  const created = await post('/api/create', { model: 'uploaded', files: { 'model.gguf': model }, stream: false });
  t.equal(created.status, 200, created.text);
  const gen = await post('/api/generate', { model: 'uploaded', prompt: 'Hello', raw: true, stream: false, options: { num_predict: 4, temperature: 0 } });
  t.equal(gen.status, 200, gen.text);
  const plain = JSON.parse(gen.text).response as string;
  const withAdapter = await post('/api/create', { model: 'adapted', files: { 'model.gguf': model }, adapters: { 'adapter.gguf': adapter }, stream: false });
  t.equal(withAdapter.status, 200, withAdapter.text);
  const fromStore = await post('/api/create', { model: 'adapted2', from: 'uploaded', adapters: { 'adapter.gguf': adapter }, stream: false });
  t.equal(fromStore.status, 200, 'FROM a store model plus an uploaded adapter');
  const a = await post('/api/generate', { model: 'adapted', prompt: 'Hello', raw: true, stream: false, options: { num_predict: 4, temperature: 0 } });
  const b = await post('/api/generate', { model: 'adapted2', prompt: 'Hello', raw: true, stream: false, options: { num_predict: 4, temperature: 0 } });
  t.equal(JSON.parse(a.text).response, JSON.parse(b.text).response, 'the same adapter either way');
  t.type(plain, 'string');
  const show = await post('/api/show', { model: 'adapted' });
  t.equal(show.status, 200);
});

t.test('create from uploads: refusals name the field', async (t) => {
  const model = digestOf(readFileSync(modelPath));
  const adapter = digestOf(readFileSync(adapterPath));
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ model: 'x', files: { 'm.gguf': `sha256:${'1'.repeat(64)}` } }, /files\.m\.gguf: blob sha256:1{64} not found; upload it first/],
    [{ model: 'x', files: { 'm.gguf': 'nope' } }, /files\.m\.gguf must be a blob digest/],
    [{ model: 'x', files: { 'a.gguf': adapter } }, /files\.a\.gguf is a LoRA adapter; give it in adapters/],
    [{ model: 'x', files: { 'm.gguf': model }, adapters: { 'b.gguf': model } }, /adapters\.b\.gguf is not a LoRA adapter/],
    [{ model: 'x', files: { 'a.gguf': model, 'b.gguf': model } }, /files: one model file at most/],
    [{ model: 'x' }, /from is required/],
    [{ model: 'x', from: 'adapted', adapters: { 'a.gguf': adapter } }, /has a LoRA adapter already/],
    [{ model: 'x', from: 'uploaded', files: { 'm.gguf': model } }, /give from \(a store model\) or files with a model, not both/],
    [{ model: 'x', from: 'uploaded', draft_files: { 'd.gguf': model } }, /draft_files: draft models are not kept/],
    [{ model: 'x', from: 'uploaded', renderer: 'qwen3' }, /renderer: custom renderers are not supported/],
  ];
  for (const [body, re] of cases) {
    const r = await post('/api/create', { ...body, stream: false });
    t.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
    t.match(r.text, re);
  }
});

t.test('create FROM a split store model plus an uploaded adapter: the split model read through its links; it generates', async (t) => {
  const parts = splitGguf(modelPath, join(dir, 'split-model'), 2);
  const [first, ...rest] = await Promise.all(parts.map((p) => store.importFile(p, basename(p))));
  store.write(localKey(null, 'splitbase', 'latest'), { schemaVersion: 1, name: 'splitbase:latest', createdAt: new Date().toISOString(),
    source: 'test', model: first, parts: rest, mmproj: null });
  const adapterBytes = readFileSync(adapterPath);
  await upload(digestOf(adapterBytes), adapterBytes);
  const created = await post('/api/create', { model: 'split-adapted', from: 'splitbase', adapters: { 'adapter.gguf': digestOf(adapterBytes) }, stream: false });
  t.equal(created.status, 200, created.text);
  const a = await post('/api/generate', { model: 'split-adapted', prompt: 'Hello', raw: true, stream: false, options: { num_predict: 4, temperature: 0 } });
  const b = await post('/api/generate', { model: 'adapted', prompt: 'Hello', raw: true, stream: false, options: { num_predict: 4, temperature: 0 } });
  t.equal(a.status, 200, a.text);
  t.equal(JSON.parse(a.text).response, JSON.parse(b.text).response, 'the same as the whole model with the same adapter');
  const tags = JSON.parse((await (await fetch(`${base}/api/tags`)).text()) as string) as { models: { name: string; size: number }[] };
  t.equal(tags.models.find((m) => m.name === 'split-adapted:latest')?.size, parts.reduce((n, p) => n + readFileSync(p).length, 0) + adapterBytes.length,
    'its size: every file of the model, and the adapter');
});

t.test("prune (at a runner's start, as Ollama's): unused blobs and stale temporary files go, the models' stay", async (t) => {
  const { utimesSync, writeFileSync } = await import('node:fs');
  const unused = store.blobPath(`sha256-${createHash('sha256').update(Buffer.from('x')).digest('hex')}`);
  t.ok(existsSync(unused), 'an upload no model uses');
  const stale = join(store.blobs, 'sha256-abc.1.0000.tmp');
  const fresh = join(store.blobs, 'sha256-def.1.0000.tmp');
  writeFileSync(stale, 'partial');
  writeFileSync(fresh, 'partial');
  const old = new Date(Date.now() - 2 * 24 * 3600_000);
  utimesSync(stale, old, old);
  const pruned = store.prune();
  t.same(pruned, { blobs: 1, bytes: 1, tmp: 1 });
  t.notOk(existsSync(unused));
  t.notOk(existsSync(stale));
  t.ok(existsSync(fresh), 'a recent temporary file may be an upload still running');
  const gen = await post('/api/generate', { model: 'adapted', prompt: 'Hello', raw: true, stream: false, options: { num_predict: 2 } });
  t.equal(gen.status, 200, "the models' blobs stayed");
  rmSync(fresh);
});
