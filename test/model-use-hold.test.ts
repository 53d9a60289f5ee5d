// useModel's lease in runner mode (lib/server/model-use.ts): released once, on the reply's close, or when later,
// once every work a route holds the model for (ModelUse.hold: a background response) has settled, whether it
// resolved or rejected. A fake runner counts the releases; the store is real (one fixture model).
import t from 'tap';
import { EventEmitter } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { localKey, ModelStore } from '../lib/models/store.js';
import { useModel } from '../lib/server/model-use.js';
import { fixtureModel } from './helpers/fixtures.js';

const path = await fixtureModel({ arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 3 });
const store = new ModelStore(mkdtempSync(join(tmpdir(), 'spindle-hold-')));
const blob = await store.importFile(path, 'm.gguf');
store.write(localKey(null, 'm', 'latest'), {
  schemaVersion: 1, name: 'm:latest', createdAt: new Date().toISOString(), source: path, model: blob, mmproj: null,
  template: null, system: null, parameters: {}, messages: [], license: [],
});

let releases = 0;
const app = {
  store,
  runner: { contextFor: () => 256, acquire: async () => ({ engine: {}, release: () => { releases++; } }) },
} as unknown as FastifyInstance;
const replyOf = (): { reply: FastifyReply; raw: EventEmitter & { destroyed: boolean } } => {
  const raw = Object.assign(new EventEmitter(), { destroyed: false });
  return { reply: { raw } as unknown as FastifyReply, raw };
};
const use = async (reply: FastifyReply) => useModel(app, reply, 'm', { single: () => 'm', adapters: true });
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('no hold: released on close, once', async (t) => {
  releases = 0;
  const { reply, raw } = replyOf();
  await use(reply);
  t.equal(releases, 0);
  raw.emit('close');
  raw.emit('close');
  t.equal(releases, 1);
});

t.test('held: the close waits for the work; a rejection releases too', async (t) => {
  releases = 0;
  const { reply, raw } = replyOf();
  const u = await use(reply);
  let finish!: () => void, fail!: (e: Error) => void;
  u.hold(new Promise<void>((r) => { finish = r; }));
  u.hold(new Promise<void>((_, j) => { fail = j; }));
  raw.emit('close');
  await tick();
  t.equal(releases, 0, 'the reply closed, the work goes on: still leased');
  finish();
  await tick();
  t.equal(releases, 0, 'one hold left');
  fail(new Error('x'));
  await tick();
  await tick();
  t.equal(releases, 1, 'released once the last hold settled');
});

t.test('hold after the lease went (the client left first) throws instead of running unheld', async (t) => {
  releases = 0;
  const { reply, raw } = replyOf();
  const u = await use(reply);
  raw.emit('close');
  t.equal(releases, 1);
  t.throws(() => u.hold(Promise.resolve()), /after the lease was released/);
});

t.test('held work that ends before the reply closes: released on the close', async (t) => {
  releases = 0;
  const { reply, raw } = replyOf();
  const u = await use(reply);
  u.hold(Promise.resolve());
  await tick();
  await tick();
  t.equal(releases, 0);
  raw.emit('close');
  t.equal(releases, 1);
});
