// Models by hub reference against a local hub (test/helpers/hub-server.ts): pull into the store (the quantization's
// GGUF and the mmproj, verified blobs, the manifest), resume after a dropped connection (a range request from the
// partial size), a corrupted byte (the file is rejected, the store unchanged), concurrent pulls coalesced (one
// download), the Hugging Face cache used with no request, a gated repository with and without HF_TOKEN, unknown
// repositories and quantizations (the error lists what the repository has), a network failure, a full disk, and
// invalid names.
import t from 'tap';
import { randomBytes, createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DownloadError } from '../lib/models/download.js';
import { HubError, type HubConfig } from '../lib/models/hub-client.js';
import { parseModelRef, ModelRefError } from '../lib/models/ref.js';
import { resolveModel } from '../lib/models/resolve.js';
import { pullHub } from '../lib/models/pull.js';
import { ModelStore } from '../lib/models/store.js';
import { startHubServer } from './helpers/hub-server.js';

const q4 = randomBytes(1_500_000), q8 = randomBytes(900_000), mm = randomBytes(300_000), gatedBytes = randomBytes(200_000);
const hub = await startHubServer(new Map([
  ['org/Tiny-GGUF', { files: [
    { path: 'README.md', bytes: Buffer.from('# tiny') },
    { path: 'Tiny-Q4_K_M.gguf', bytes: q4 },
    { path: 'Tiny-Q8_0.gguf', bytes: q8 },
    { path: 'mmproj-Tiny-F16.gguf', bytes: mm },
  ] }],
  ['org/Gated-GGUF', { files: [{ path: 'Gated-Q4_K_M.gguf', bytes: gatedBytes }], gatedToken: 'hf_secret' }],
]));
t.teardown(() => hub.close());
const cfg: HubConfig = { endpoint: hub.url, token: null, timeoutMs: 5000 };
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const freshStore = () => new ModelStore(mkdtempSync(join(tmpdir(), 'spindle-store-')));
const noCache = { HF_HUB_CACHE: mkdtempSync(join(tmpdir(), 'spindle-nocache-')) };
const gets = (path: string) => hub.log.filter((e) => e.method === 'GET' && e.url.endsWith(path));

t.test('references parse as paths, hub references and names; bad names are refused by rule', async (t) => {
  t.match(parseModelRef('./m.gguf'), { kind: 'path' });
  t.match(parseModelRef('hf.co/org/Repo-GGUF:q4_k_m'), { kind: 'hub', repo: 'org/Repo-GGUF', quant: 'q4_k_m' });
  t.match(parseModelRef('huggingface.co/org/repo'), { kind: 'hub', quant: null });
  t.match(parseModelRef('org/repo:Q8_0'), { kind: 'name', hubRepo: 'org/repo', tag: 'Q8_0', explicitTag: true });
  t.match(parseModelRef('mymodel'), { kind: 'name', namespace: null, name: 'mymodel', tag: 'latest' });
  t.same(parseModelRef('registry.ollama.ai/library/llama3.2:1b'), { kind: 'name', namespace: null, name: 'llama3.2', tag: '1b', hubRepo: null, explicitTag: true });
  t.same(parseModelRef('ollama.com/someone/model'), { kind: 'name', namespace: 'someone', name: 'model', tag: 'latest', hubRepo: null, explicitTag: false },
    "an Ollama registry name with a namespace: never a hub reference");
  for (const bad of ['bad name', 'a/b/c', 'x:bad tag', 'hf.co/onlyorg', '-leading', 'a..b', 'registry.ollama.ai/a/b/c']) {
    t.throws(() => parseModelRef(bad), ModelRefError, bad);
  }
});

t.test('pull: the Q4_K_M GGUF by default plus the mmproj, as verified blobs, then the manifest', async (t) => {
  const store = freshStore();
  const events: string[] = [];
  const r = await resolveModel('hf.co/org/Tiny-GGUF', { store, hub: cfg, env: noCache, onProgress: (e) => events.push(e.phase) });
  t.equal(sha(readFileSync(r.model)), sha(q4));
  t.equal(sha(readFileSync(r.mmproj!)), sha(mm));
  t.equal(r.model, join(store.blobs, `sha256-${sha(q4)}`));
  t.ok(events.includes('download') && events.includes('verify') && events.at(-1) === 'done');
  t.same(store.list().map((e) => e.manifest.name).sort(), ['hf.co/org/Tiny-GGUF:Q4_K_M', 'hf.co/org/Tiny-GGUF:latest']);
  const before = hub.log.length;
  const again = await resolveModel('hf.co/org/Tiny-GGUF:q4_k_m', { store, hub: cfg, env: noCache });
  t.equal(again.model, r.model, 'quantizations match case-insensitively; the store answers without the hub');
  t.equal(hub.log.length, before, 'no request for a model already pulled');
  const q8r = await resolveModel('org/Tiny-GGUF:Q8_0', { store, hub: cfg, env: noCache });
  t.equal(sha(readFileSync(q8r.model)), sha(q8), 'org/repo:quant is a hub reference when no local name has it');
  t.equal(q8r.mmproj, r.mmproj, 'the mmproj blob is shared');
  t.same(readdirSync(store.blobs).sort(), [`sha256-${sha(mm)}`, `sha256-${sha(q4)}`, `sha256-${sha(q8)}`].sort(), 'no partial or lock files left');
});

t.test('a dropped connection is resumed with a range request', async (t) => {
  const store = freshStore();
  hub.faults.dropAfter = new Map([['Tiny-Q4_K_M.gguf', 600_000]]);
  const from = hub.log.length;
  const r = await resolveModel('hf.co/org/Tiny-GGUF', { store, hub: cfg, env: noCache });
  t.equal(sha(readFileSync(r.model)), sha(q4));
  const tries = hub.log.slice(from).filter((e) => e.method === 'GET' && e.url.endsWith('Tiny-Q4_K_M.gguf'));
  t.equal(tries.length, 2);
  t.equal(tries[0].range, null);
  t.match(tries[1].range, /^bytes=\d+-$/);
  t.ok(Number(/\d+/.exec(tries[1].range!)![0]) > 0, 'resumed from the bytes already written');
});

t.test('a corrupted byte fails verification: the file is discarded and the store is unchanged', async (t) => {
  const store = freshStore();
  hub.faults.corrupt = new Set(['Tiny-Q8_0.gguf']);
  t.teardown(() => { hub.faults.corrupt = undefined; });
  await t.rejects(resolveModel('hf.co/org/Tiny-GGUF:Q8_0', { store, hub: cfg, env: noCache }), { name: 'DownloadError', code: 'verify', message: /failed verification.*discarded/ });
  t.same(store.list(), []);
  t.same(existsSync(store.blobs) ? readdirSync(store.blobs) : [], [], 'no blob, no partial file');
});

t.test('concurrent pulls of the same file share one download', async (t) => {
  const store = freshStore();
  hub.faults.bytesPerMs = 300; // slow enough for the pulls to overlap
  t.teardown(() => { hub.faults.bytesPerMs = undefined; });
  const from = gets('Tiny-Q8_0.gguf').length;
  const [a, b, c] = await Promise.all([1, 2, 3].map(() => resolveModel('hf.co/org/Tiny-GGUF:Q8_0', { store, hub: cfg, env: noCache })));
  t.equal(a.model, b.model);
  t.equal(b.model, c.model);
  t.equal(gets('Tiny-Q8_0.gguf').length - from, 1, 'one GET for three pulls');
  // one caller leaving (its client went away) cancels its own wait only; the last one leaving stops the download
  const other = freshStore();
  const quit = new AbortController();
  const gone = resolveModel('hf.co/org/Tiny-GGUF:Q8_0', { store: other, hub: cfg, env: noCache, signal: quit.signal });
  const stays = resolveModel('hf.co/org/Tiny-GGUF:Q8_0', { store: other, hub: cfg, env: noCache });
  setTimeout(() => quit.abort(), 300);
  await t.rejects(gone, { name: 'DownloadError', code: 'interrupted' });
  t.equal((await stays).model, a.model.replace(store.home, other.home), 'the other pull finished the shared download');
  const alone = new AbortController();
  const lone = pullHub(freshStore(), 'org/Tiny-GGUF', 'Q8_0', { cfg, env: noCache, signal: alone.signal });
  setTimeout(() => alone.abort(), 300);
  await t.rejects(lone, { name: 'DownloadError', code: 'interrupted', message: /cancelled \(resumable/ }, 'its only caller leaving stops it');
});

t.test('files in the Hugging Face cache are used with no request', async (t) => {
  const cache = mkdtempSync(join(tmpdir(), 'spindle-hfcache-'));
  const snap = join(cache, 'models--org--Cached-GGUF', 'snapshots', 'abc123');
  mkdirSync(snap, { recursive: true });
  mkdirSync(join(cache, 'models--org--Cached-GGUF', 'refs'), { recursive: true });
  writeFileSync(join(cache, 'models--org--Cached-GGUF', 'refs', 'main'), 'abc123');
  writeFileSync(join(snap, 'Cached-Q4_K_M.gguf'), q8);
  writeFileSync(join(snap, 'Cached-Q8_0.gguf'), q4);
  const store = freshStore();
  const before = hub.log.length;
  const r = await resolveModel('hf.co/org/Cached-GGUF', { store, hub: cfg, env: { HF_HUB_CACHE: cache } });
  t.equal(r.model, join(snap, 'Cached-Q4_K_M.gguf'));
  t.equal(hub.log.length, before, 'no request made');
  t.match(store.list()[0].manifest.source, /Hugging Face cache/);
});

t.test('a gated repository needs HF_TOKEN; the token is sent', async (t) => {
  const store = freshStore();
  await t.rejects(resolveModel('hf.co/org/Gated-GGUF', { store, hub: cfg, env: noCache }), { name: 'HubError', code: 'gated', message: /HF_TOKEN/ });
  const r = await resolveModel('hf.co/org/Gated-GGUF', { store, hub: { ...cfg, token: 'hf_secret' }, env: noCache });
  t.equal(sha(readFileSync(r.model)), sha(gatedBytes));
  t.ok(hub.log.filter((e) => e.url.includes('Gated')).at(-1)!.auth === 'Bearer hf_secret');
});

t.test('unknown repository or quantization, network failure, full disk: clear errors, store unchanged', async (t) => {
  const store = freshStore();
  await t.rejects(resolveModel('hf.co/org/Nope-GGUF', { store, hub: cfg, env: noCache }), { code: 'not_found', message: /hf\.co\/org\/Nope-GGUF was not found/ });
  await t.rejects(resolveModel('hf.co/org/Tiny-GGUF:Q5_K_M', { store, hub: cfg, env: noCache }), { code: 'no_file', message: /no Q5_K_M GGUF; it has: Q4_K_M, Q8_0/ });
  await t.rejects(resolveModel('hf.co/org/Tiny-GGUF', { store, hub: { ...cfg, endpoint: 'http://127.0.0.1:1' }, env: noCache }), { code: 'network', message: /could not reach/ });
  await t.rejects(pullHub(store, 'org/Tiny-GGUF', null, { cfg, env: noCache, freeBytes: () => 1000 }), { name: 'DownloadError', code: 'disk_full', message: /not enough disk space/ });
  await t.rejects(resolveModel('unknownname', { store, hub: cfg, env: { ...noCache, OLLAMA_REGISTRY: 'http://127.0.0.1:1' } }),
    { name: 'ModelRefError', message: /not in the store .*, and Ollama's registry: could not reach/ });
  await t.rejects(resolveModel('unknownname', { store, hub: cfg, env: noCache, pull: false }), { name: 'ModelRefError', message: /not in the store/ });
  t.same(store.list(), []);
  t.same(existsSync(store.blobs) ? readdirSync(store.blobs) : [], []);
  t.ok(HubError && DownloadError);
});
