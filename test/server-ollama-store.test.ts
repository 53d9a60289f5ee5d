// Ollama's own store (OLLAMA_MODELS) read in place beside Spindle's (lib/models/ollama-store.ts): the models
// `ollama pull` downloaded are listed and served by runner mode with their template, system prompt and parameters
// layers; names match case-insensitively; a manifest whose model blob is gone is skipped; the store's own names win;
// nothing under Ollama's directory is ever changed (delete refuses by name, prune never looks there, a copy points
// at Ollama's blob in place).
import t from 'tap';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ollama } from 'ollama';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { localKey, ModelStore, ReadOnlyModelError } from '../lib/models/store.js';
import { buildApp } from '../lib/server/app.js';
import { fixtureModel } from './helpers/fixtures.js';

const modelPath = await fixtureModel({ arch: 'llama', tokenizer: 'llama3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2,
  nFf: 128, tiedEmbeddings: true, seed: 11 });
const ollamaDir = mkdtempSync(join(tmpdir(), 'spindle-ollama-models-'));
const home = mkdtempSync(join(tmpdir(), 'spindle-ollama-home-'));
t.teardown(() => { rmSync(ollamaDir, { recursive: true, force: true }); rmSync(home, { recursive: true, force: true }); });

// A blob of Ollama's store; returns its layer entry.
function blob(mediaType: string, bytes: Buffer): { mediaType: string; digest: string; size: number } {
  const hex = createHash('sha256').update(bytes).digest('hex');
  mkdirSync(join(ollamaDir, 'blobs'), { recursive: true });
  writeFileSync(join(ollamaDir, 'blobs', `sha256-${hex}`), bytes);
  return { mediaType: `application/vnd.ollama.image.${mediaType}`, digest: `sha256:${hex}`, size: bytes.length };
}
function manifest(path: string[], layers: object[]): void {
  mkdirSync(join(ollamaDir, 'manifests', ...path.slice(0, -1)), { recursive: true });
  writeFileSync(join(ollamaDir, 'manifests', ...path), JSON.stringify({
    schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: 'sha256:' + '0'.repeat(64), size: 2 }, layers,
  }));
}
// as Ollama's templates: the system prompt from .System, the range over .Messages skipping the system message
const TEMPLATE = '{{ if .System }}[SYS] {{ .System }}\n{{ end }}{{ range .Messages }}{{ if ne .Role "system" }}[{{ .Role }}] {{ .Content }}\n{{ end }}{{ end }}[assistant] ';
const model = blob('model', readFileSync(modelPath));
const modelBlobPath = join(ollamaDir, 'blobs', model.digest.replace(':', '-'));
manifest(['registry.ollama.ai', 'library', 'tiny', 'latest'], [model, blob('template', Buffer.from(TEMPLATE)),
  blob('system', Buffer.from('Be terse.')), blob('params', Buffer.from(JSON.stringify({ temperature: 0, stop: ['[user]'] }))),
  blob('license', Buffer.from('MIT'))]);
manifest(['hf.co', 'SomeOrg', 'Tiny-GGUF', 'Q4_K_M'], [model]);
manifest(['registry.ollama.ai', 'library', 'gone', 'latest'], [{ ...model, digest: 'sha256:' + 'f'.repeat(64) }]); // blob missing
manifest(['registry.ollama.ai', 'library', 'junk', 'latest'], []);

t.test('the store lists and reads Ollama\'s manifests beside its own, read-only', async (t) => {
  const store = new ModelStore(home, ollamaDir);
  const names = store.list().map((e) => e.manifest.name).sort();
  t.same(names, ['hf.co/SomeOrg/Tiny-GGUF:Q4_K_M', 'tiny:latest'], 'manifests without a model layer or its blob are skipped');
  const tiny = store.read(localKey(null, 'TINY', 'Latest'))!;
  t.equal(tiny.external, 'ollama');
  t.equal(tiny.template, TEMPLATE);
  t.equal(tiny.system, 'Be terse.');
  t.same(tiny.parameters, { temperature: 0, stop: ['[user]'] });
  t.same(tiny.license, ['MIT']);
  t.equal(store.filePath(tiny.model), modelBlobPath, 'the model is Ollama\'s blob, in place');
  t.ok(store.complete(tiny));
  t.equal(store.read(localKey(null, 'gone', 'latest')), null, 'a missing model blob: no such model');
  t.throws(() => store.remove(localKey(null, 'tiny', 'latest')), ReadOnlyModelError);
  t.throws(() => store.remove(localKey(null, 'tiny', 'latest')), /belongs to Ollama's store .* remove it with `ollama rm`/);
  store.prune(0);
  t.ok(existsSync(modelBlobPath), 'prune never touches Ollama\'s blobs');
  t.equal(new ModelStore(home, null).list().length, 0, 'without OLLAMA_MODELS: not read');
});

t.test('runner mode serves them: tags, show, chat with their template and parameters; delete refuses; copy works', async (t) => {
  const store = new ModelStore(home, ollamaDir);
  const app = await buildApp({
    engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 256, threads: 1 }, 'serve'), servedModelNames: [],
    runner: { store, env: {} },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const host = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const ollama = new Ollama({ host });
  const tags = await ollama.list();
  t.same(tags.models.map((m) => m.name).sort(), ['hf.co/SomeOrg/Tiny-GGUF:Q4_K_M', 'tiny:latest']);
  const show = await ollama.show({ model: 'tiny' });
  t.equal(show.template, TEMPLATE);
  t.equal(show.system, 'Be terse.');
  t.match(show.parameters, /temperature\s+0/);
  const chat = await ollama.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], options: { num_predict: 4 } });
  t.equal(chat.done, true);
  const rendered = await fetch(`${host}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }] }) });
  const { tokens } = (await rendered.json()) as { tokens: number[] };
  const text = await fetch(`${host}/detokenize`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', tokens }) });
  t.match(((await text.json()) as { prompt: string }).prompt, /\[SYS\] Be terse\.\n\[user\] Hi\n\[assistant\] $/, 'its template and system prompt');
  const del = await fetch(`${host}/api/delete`, { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny' }) });
  t.equal(del.status, 400);
  t.match(((await del.json()) as { error: string }).error, /belongs to Ollama's store/);
  await ollama.copy({ source: 'tiny', destination: 'mine' });
  t.equal(store.read(localKey(null, 'mine', 'latest'))!.template, TEMPLATE, 'a copy is the store\'s own, pointing at the blob');
  await ollama.delete({ model: 'mine' });
  t.ok(existsSync(modelBlobPath), 'deleting the copy leaves Ollama\'s blob');
  t.same(readdirSync(join(ollamaDir, 'manifests', 'registry.ollama.ai', 'library')).sort(), ['gone', 'junk', 'tiny'], 'nothing of Ollama\'s changed');
  copyFileSync(modelPath, join(home, 'own.gguf'));
});

t.test('the store\'s own name wins over Ollama\'s of the same name', async (t) => {
  const store = new ModelStore(home, ollamaDir);
  const own = await store.importFile(modelPath, 'own.gguf');
  store.write(localKey(null, 'tiny', 'latest'), { schemaVersion: 1, name: 'tiny:latest', createdAt: new Date().toISOString(),
    source: modelPath, model: own, mmproj: null, template: null, system: 'Mine.', parameters: {}, messages: [], license: [] });
  t.equal(store.read(localKey(null, 'tiny', 'latest'))!.system, 'Mine.');
  t.same(store.list().filter((e) => e.manifest.name === 'tiny:latest').map((e) => e.manifest.system), ['Mine.'], 'listed once');
  t.ok(store.remove(localKey(null, 'tiny', 'latest')), 'the own one can be removed');
  t.equal(store.read(localKey(null, 'tiny', 'latest'))!.external, 'ollama', 'then Ollama\'s shows again');
});

t.test('Ollama\'s store in the same directory as Spindle\'s: its blobs are never pruned', async (t) => {
  const shared = mkdtempSync(join(tmpdir(), 'spindle-shared-home-'));
  t.teardown(() => rmSync(shared, { recursive: true, force: true }));
  const bytes = readFileSync(modelPath);
  const hex = createHash('sha256').update(bytes).digest('hex');
  mkdirSync(join(shared, 'models', 'blobs'), { recursive: true });
  writeFileSync(join(shared, 'models', 'blobs', `sha256-${hex}`), bytes);
  mkdirSync(join(shared, 'models', 'manifests', 'registry.ollama.ai', 'library', 'm'), { recursive: true });
  writeFileSync(join(shared, 'models', 'manifests', 'registry.ollama.ai', 'library', 'm', 'latest'), JSON.stringify({
    schemaVersion: 2, layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${hex}`, size: bytes.length }] }));
  const store = new ModelStore(shared, join(shared, 'models'));
  t.same(store.list().map((e) => e.manifest.name), ['m:latest']);
  t.same(store.prune(0).blobs, 0);
  t.ok(existsSync(join(shared, 'models', 'blobs', `sha256-${hex}`)), 'the blob an Ollama manifest names stays');
});

t.test('runner mode caps a context over the model\'s trained one (OLLAMA_CONTEXT_LENGTH, num_ctx), as Ollama', async (t) => {
  const app = await buildApp({
    engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 8192, threads: 1 }, 'serve'), servedModelNames: [],
    runner: { store: new ModelStore(home, ollamaDir), env: {} },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const ollama = new Ollama({ host: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
  const r = await ollama.generate({ model: 'tiny', prompt: 'Hi', options: { num_predict: 2 } });
  t.equal(r.done, true, 'the 4096-token fixture loads at 4096, not 8192');
  const big = await ollama.generate({ model: 'tiny', prompt: 'Hi', options: { num_predict: 2, num_ctx: 100000 } });
  t.equal(big.done, true, 'a request num_ctx over it too');
  const ps = await ollama.ps();
  t.ok(ps.models.every((m) => (m as { context_length?: number }).context_length === 4096), 'loaded at the trained context');
});
