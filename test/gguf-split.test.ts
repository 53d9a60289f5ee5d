// Split GGUF models (llama.cpp's gguf-split: <name>-0000k-of-0000N.gguf): a model split into files loads from its
// first file and computes exactly what the whole file computes (greedy tokens and prompt logprobs, bit for bit),
// as llama.cpp loads the same files; the header reader counts every file; loading another file than the first, or
// a split with a file missing, is an error naming what to do; `spindle create` FROM a split file imports every file;
// a hub repository whose quantization is split pulls every file into the store and serves it by name.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Token } from 'node-llama-cpp';
import { LLM } from '../lib/llm.js';
import { readModelFileInfo } from '../lib/gguf/file-info.js';
import { resolveModel } from '../lib/models/resolve.js';
import { selectFiles } from '../lib/models/hub-select.js';
import { ModelStore, hubKey, localKey } from '../lib/models/store.js';
import { fixtureModel, referenceLlama } from './helpers/fixtures.js';
import { startHubServer } from './helpers/hub-server.js';
import { splitGguf } from './helpers/split-gguf.js';

const whole = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'Q8_0', seed: 21, arch: 'llama', tokenizer: 'llama3', tiedEmbeddings: false });
const dir = mkdtempSync(join(tmpdir(), 'spindle-split-'));
const parts = splitGguf(whole, join(dir, 'tiny-llama-Q8_0'), 3);
const IDS = [128000, 791, 4062, 14198, 39935, 35308, 927, 279, 16053, 5679, 13];

async function outputs(model: string): Promise<{ tokens: number[]; logprobs: number[] }> {
  const llm = new LLM({ model, maxModelLen: 128, threads: 2, dtype: 'float32' });
  try {
    const [o] = await llm.generate({ promptTokenIds: IDS }, { temperature: 0, maxTokens: 8, ignoreEos: true, promptLogprobs: 0 });
    return { tokens: o.outputs[0].tokenIds, logprobs: o.promptLogprobs!.slice(1).map((e, p) => e![IDS[p + 1]].logprob) };
  } finally {
    await llm.close();
  }
}

t.test('a split model computes what the whole file computes, in Spindle and in llama.cpp', async (t) => {
  t.same(parts.map((p) => basename(p)), ['tiny-llama-Q8_0-00001-of-00003.gguf', 'tiny-llama-Q8_0-00002-of-00003.gguf', 'tiny-llama-Q8_0-00003-of-00003.gguf']);
  const [a, b] = [await outputs(whole), await outputs(parts[0])];
  t.same(b.tokens, a.tokens, 'the same greedy tokens');
  t.same(b.logprobs, a.logprobs, 'the same prompt logprobs, bit for bit');
  // llama.cpp reads the same files (so they are split as gguf-split splits) and agrees with its whole file
  const llama = await referenceLlama();
  const logits = async (path: string): Promise<number[]> => {
    const model = await llama.loadModel({ modelPath: path });
    const ctx = await model.createContext({ contextSize: 128, threads: 1, flashAttention: false });
    try {
      const res = await ctx.getSequence().controlledEvaluate(IDS.map((tok) => [tok as Token, { generateNext: { logits: true } }]));
      return [...res[IDS.length - 1]!.next.logits!.values()];
    } finally {
      await ctx.dispose();
      await model.dispose();
    }
  };
  t.same(await logits(parts[0]), await logits(whole), "llama.cpp: the split model's logits are its whole file's");
});

t.test('the header reader counts every file; the other files and a broken split are errors naming what to do', async (t) => {
  const w = readModelFileInfo(whole), s = readModelFileInfo(parts[0]);
  t.same(s.files, parts);
  t.equal(s.nParams, w.nParams);
  t.equal(s.nTensors, w.nTensors);
  t.same(s.tensors.map((x) => x.name).sort(), w.tensors.map((x) => x.name).sort());
  t.throws(() => readModelFileInfo(parts[1]), /this is file 2 of a model split into 3 files: load the first one, .*tiny-llama-Q8_0-00001-of-00003\.gguf/);
  await t.rejects(new LLM({ model: parts[1], maxModelLen: 64, threads: 2 }).ready(), /this is file 2 of a model split into 3 files: load the first one/);
  const moved = `${parts[2]}.away`;
  renameSync(parts[2], moved);
  t.teardown(() => renameSync(moved, parts[2]));
  await t.rejects(new LLM({ model: parts[0], maxModelLen: 64, threads: 2 }).ready(), /tiny-llama-Q8_0-00003-of-00003\.gguf: cannot open/);
  t.throws(() => readModelFileInfo(parts[0]), /tiny-llama-Q8_0-00003-of-00003\.gguf: no such file/);
});

t.test('a hub repository whose quantization is split: every file pulled, the model served by name, removed whole', async (t) => {
  const hub = await startHubServer(new Map([['org/Split-GGUF', { files: [
    { path: 'README.md', bytes: Buffer.from('# split') },
    ...parts.map((p) => ({ path: `Q8_0/${basename(p).replace('tiny-llama', 'Split')}`, bytes: readFileSync(p) })),
  ] }]]));
  t.teardown(() => hub.close());
  // a relative SPINDLE_HOME: the links still point at the blobs
  const store = new ModelStore(relative(process.cwd(), mkdtempSync(join(tmpdir(), 'spindle-store-'))));
  const env = { HF_HUB_CACHE: mkdtempSync(join(tmpdir(), 'spindle-nocache-')) };
  const r = await resolveModel('hf.co/org/Split-GGUF:Q8_0', { store, hub: { endpoint: hub.url, token: null, timeoutMs: 5000 }, env });
  t.equal(r.manifest!.parts!.length, 2, 'the other two files are parts of the manifest');
  t.same([r.manifest!.model, ...r.manifest!.parts!].map((f) => f.file), ['Q8_0/Split-Q8_0-00001-of-00003.gguf', 'Q8_0/Split-Q8_0-00002-of-00003.gguf', 'Q8_0/Split-Q8_0-00003-of-00003.gguf']);
  for (const [f, p] of [r.manifest!.model, ...r.manifest!.parts!].map((f, k) => [f, parts[k]] as const)) {
    t.equal('digest' in f && f.digest, `sha256-${createHash('sha256').update(readFileSync(p)).digest('hex')}`, `${f.file}: a verified blob`);
  }
  t.match(r.model, /models\/split\/sha256-[0-9a-f]{64}\/Split-Q8_0-00001-of-00003\.gguf$/, 'loaded through links named as the files');
  t.same((await outputs(r.model)).tokens, (await outputs(whole)).tokens, 'the pulled split model generates as the whole file');
  t.equal(store.list()[0].size, parts.reduce((n, p) => n + readFileSync(p).length, 0), 'its size: every file');
  const linkDir = join(store.home, 'models', 'split');
  t.equal(readdirSync(linkDir).length, 1);
  t.ok(store.remove(hubKey('org/Split-GGUF', 'Q8_0')));
  t.same(readdirSync(store.blobs), [], 'every file removed with the name');
  t.notOk(existsSync(join(linkDir, readdirSync(linkDir)[0] ?? 'none')), 'and the links');
});

t.test('spindle create FROM a split file imports every file; the model runs by name', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'spindle-home-'));
  writeFileSync(join(dir, 'Modelfile'), 'FROM ./tiny-llama-Q8_0-00001-of-00003.gguf\nPARAMETER temperature 0\n');
  const cli = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
  const out = execFileSync(process.execPath, [cli, 'create', 'splitmodel', '-f', join(dir, 'Modelfile')], { env: { ...process.env, SPINDLE_HOME: home }, encoding: 'utf8' });
  t.match(out, /success: created splitmodel:latest/);
  const store = new ModelStore(home);
  const m = store.read(localKey(null, 'splitmodel', 'latest'))!;
  t.same([m.model, ...m.parts!].map((f) => f.file), parts.map((p) => basename(p)), 'every file a blob, under its own name');
  const r = await resolveModel('splitmodel', { store });
  t.same((await outputs(r.model)).tokens, (await outputs(whole)).tokens, 'it generates as the whole file');
  writeFileSync(join(dir, 'Modelfile2'), 'FROM ./tiny-llama-Q8_0-00002-of-00003.gguf\n');
  let err = '';
  try {
    execFileSync(process.execPath, [cli, 'create', 'bad', '-f', join(dir, 'Modelfile2')], { env: { ...process.env, SPINDLE_HOME: home }, encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    err = String((e as { stderr: string }).stderr);
  }
  t.match(err, /this is file 2 of a model split into 3 files: load the first one/, 'FROM another file than the first: refused, naming the first');
});

t.test('hub file selection: a split set named .GGUF is found whole; a set missing a file is an error naming it', async (t) => {
  const f = (path: string) => ({ path, size: 1, sha256: null });
  const upper = selectFiles('org/r', [f('M-Q8_0-00001-of-00002.GGUF'), f('M-Q8_0-00002-of-00002.GGUF')], 'Q8_0');
  t.same([upper.model.path, ...upper.parts.map((p) => p.path)], ['M-Q8_0-00001-of-00002.GGUF', 'M-Q8_0-00002-of-00002.GGUF']);
  t.throws(() => selectFiles('org/r', [f('M-Q8_0-00001-of-00003.gguf'), f('M-Q8_0-00003-of-00003.gguf')], 'Q8_0'),
    /the split model M-Q8_0-00001-of-00003\.gguf lacks its file M-Q8_0-00002-of-00003\.gguf/);
});
