// Load failures reject ready() with a message naming the problem, and the process stays alive (a good model
// still loads and generates afterwards).
import t from 'tap';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, LLM } from '../lib/index.js';
import { fixtureModel } from './helpers/fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'spindle-load-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

// The load error of `path`; generate() must report the same error.
async function loadError(path: string): Promise<string> {
  const llm = new LLM({ model: path, threads: 1 });
  try {
    await llm.ready();
  } catch (e) {
    const message = (e as Error).message;
    const again = await llm.generate('x').then(() => 'resolved', (g: Error) => g.message);
    await llm.close();
    if (again !== message) throw new Error(`generate() said '${again}' after the load error '${message}'`);
    return message;
  }
  await llm.close();
  throw new Error(`${path} loaded`);
}

t.test('each bad file rejects ready() with a message naming the problem', async (t) => {
  const good = await fixtureModel({
    arch: 'llama', tokenizer: 'llama2', weights: 'F32', nEmbd: 64, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 128, seed: 3,
  });
  const bytes = readFileSync(good);
  const write = (name: string, data: Uint8Array) => {
    const p = join(dir, name);
    writeFileSync(p, data);
    return p;
  };
  const missing = join(dir, 'missing.gguf');
  t.match(await loadError(missing), /missing\.gguf/);
  t.match(await loadError(missing), /no such file|not found|does not exist|cannot open|No such file/i);
  t.match(await loadError(dir), /directory|not a regular file|is not a file/i);
  t.match(await loadError(write('empty.gguf', new Uint8Array(0))), /empty|too small|truncated/i);
  const wrongMagic = Buffer.from(bytes.subarray(0, 4096));
  wrongMagic.write('GGML', 0, 'latin1');
  t.match(await loadError(write('magic.gguf', wrongMagic)), /magic/i);
  t.match(await loadError(write('header.gguf', bytes.subarray(0, 100))), /header\.gguf: .*(truncated|end of file|past the end|bytes follow)/i);
  t.match(await loadError(write('data.gguf', bytes.subarray(0, bytes.length - 1000))), /truncated|outside|past the end|end of file|exceeds/i);
  t.match(await loadError(join(dir, 'héllo wörld.gguf')), /héllo wörld\.gguf/, 'non-ASCII paths are reported intact');

  // The process is fine: the good model loads and generates.
  const llm = new LLM({ model: good, threads: 1, maxModelLen: 64 });
  await llm.ready();
  const [out] = await llm.generate('ok', { maxTokens: 2, ignoreEos: true });
  t.equal(out.outputs[0].tokenIds.length, 2);
  await llm.close();
});

t.test('the Engine tokenizer reports a bad file synchronously', async (t) => {
  const engine = new Engine({ modelPath: join(dir, 'missing.gguf') });
  t.throws(() => engine.tokenizer, /missing\.gguf/);
  await t.rejects(engine.ready(), /missing\.gguf/);
  await engine.shutdown();
});

t.test('nobody awaiting ready() is not an unhandled rejection', async (t) => {
  const llm = new LLM({ model: join(dir, 'missing.gguf') });
  await new Promise((resolve) => setTimeout(resolve, 200));
  await llm.close();
  t.pass('no unhandledRejection crashed the test process');
});
