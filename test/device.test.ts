// Device selection (`device` option, `--device` flag): 'auto' loads on CUDA when a usable GPU and driver are
// present and this build has CUDA, else on the CPU, and modelInfo.device says which; 'cpu' always loads on the
// CPU; 'cuda' without a usable GPU fails the load (ready() rejects, generate() too, the process lives on) with
// "device 'cuda' is not available: ..."; anything else is refused naming the allowed values (LLM / Engine
// options, the NativeEngine addon, `spindle serve` and `spindle bench` flags). The CUDA-less checks run where
// 'auto' chose the CPU; where it chose CUDA, 'cuda' must load there instead. `spindle serve` as a child process
// needs the built CLI (`npm run build:ts`).
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { parseBenchArgs } from '../lib/bench/offline/args.js';
import { main as benchMain } from '../lib/bench/offline/command.js';
import type { TestRecord } from '../lib/bench/offline/record.js';
import { Engine, LLM } from '../lib/index.js';
import { loadNative } from '../lib/native.js';
import { HELP as SERVE_HELP, parseServeArgs } from '../lib/server/command.js';
import { fixtureModel } from './helpers/fixtures.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli', 'main.js');
const path = await fixtureModel({ arch: 'llama', tokenizer: 'llama2', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 });
const NOT_AVAILABLE = /device 'cuda' is not available: \S/;

// The device 'auto' picks here; every CUDA-less expectation below depends on it.
async function autoDevice(): Promise<string | null> {
  const llm = new LLM({ model: path, maxModelLen: 64, threads: 2 });
  try {
    await llm.ready();
    return llm.modelInfo.device;
  } finally {
    await llm.close();
  }
}
const auto = await autoDevice();

function sink(): Writable & { text: string } {
  const w = new Writable({ write(chunk, _enc, cb) { w.text += String(chunk); cb(); } }) as Writable & { text: string };
  w.text = '';
  return w;
}

t.test("device 'auto' (the default) and 'cpu' load, generate, and report where they run", async (t) => {
  t.ok(auto === 'cpu' || auto === 'cuda', `auto chose ${auto}`);
  for (const device of [undefined, 'auto', 'cpu'] as const) {
    const llm = new LLM({ model: path, maxModelLen: 64, threads: 2, device });
    t.teardown(() => llm.close());
    await llm.ready();
    t.equal(llm.modelInfo.device, device === 'cpu' ? 'cpu' : auto, `device ${device ?? '(default)'}`);
    const [out] = await llm.generate('Hello', { temperature: 0, maxTokens: 4, ignoreEos: true });
    t.equal(out.outputs[0].tokenIds.length, 4);
  }
  const engine = new Engine({ modelPath: path, maxModelLen: 64, threads: 2, device: 'cpu' });
  t.teardown(() => engine.shutdown());
  await engine.ready();
  t.equal(engine.modelInfo.device, 'cpu', 'Engine.modelInfo too');
  t.equal(loadNative().NativeEngine.inspect(path).info.device, null, 'inspect() loads nothing: device null');
});

t.test("device 'cuda' without a usable GPU: ready() and generate() reject saying why; the process lives on", async (t) => {
  if (auto === 'cuda') {
    const llm = new LLM({ model: path, maxModelLen: 64, threads: 2, device: 'cuda' });
    t.teardown(() => llm.close());
    await llm.ready();
    t.equal(llm.modelInfo.device, 'cuda', "a usable GPU: 'cuda' loads there");
    return;
  }
  const llm = new LLM({ model: path, maxModelLen: 64, threads: 2, device: 'cuda' });
  await t.rejects(llm.ready(), NOT_AVAILABLE);
  await t.rejects(llm.generate('x'), NOT_AVAILABLE, 'generate() reports the load error');
  await llm.close();
  const engine = new Engine({ model_path: path, device: 'cuda' });
  await t.rejects(engine.ready(), NOT_AVAILABLE, 'Engine too');
  await engine.shutdown();
  const ok = new LLM({ model: path, maxModelLen: 64, threads: 2 });
  t.teardown(() => ok.close());
  const [out] = await ok.generate('x', { maxTokens: 2, ignoreEos: true });
  t.equal(out.outputs[0].tokenIds.length, 2, 'a later load still works');
});

t.test('an unknown device is refused, naming the allowed values', async (t) => {
  t.throws(() => new LLM({ model: path, device: 'gpu' as never }), /LLM: device must be 'auto', 'cpu' or 'cuda' \(got gpu\)/);
  t.throws(() => new Engine({ modelPath: path, device: 'metal' as never }), /device must be 'auto', 'cpu' or 'cuda' \(got metal\)/);
  const { NativeEngine } = loadNative();
  const noop = () => {};
  t.throws(() => new NativeEngine(path, { device: 'gpu' as never }, noop), { name: 'TypeError', message: /device must be one of auto, cpu, cuda \(got 'gpu'\)/ });
  t.throws(() => new NativeEngine(path, { device: 1 as never }, noop), { name: 'TypeError', message: /device must be one of auto, cpu, cuda/ });
  t.throws(() => new NativeEngine(path, { device: 'CUDA' as never }, noop), /device must be one of auto, cpu, cuda/, 'case matters');
});

t.test('spindle serve --device: parsed, validated, listed in --help', async (t) => {
  t.match(SERVE_HELP, /--device auto\|cpu\|cuda/);
  t.match(SERVE_HELP, /on a GPU, the fraction of the GPU's memory Spindle may\s+use \(weights \+ KV cache, as vLLM/);
  t.match(SERVE_HELP, /on the CPU, the\s+fraction of free memory for the KV cache/);
  const cfg = parseServeArgs(['m.gguf', '--device', 'cpu']);
  t.equal(cfg !== 'help' && cfg.engine.device, 'cpu');
  const dflt = parseServeArgs(['m.gguf']);
  t.equal(dflt !== 'help' && dflt.engine.device, undefined, 'absent: the engine default (auto)');
  t.throws(() => parseServeArgs(['m.gguf', '--device', 'gpu']), /--device must be one of auto, cpu, cuda \(got 'gpu'\)/);
});

t.test('`spindle serve --device cuda` (the built CLI) without a usable GPU exits 1 saying why',
  { skip: auto === 'cuda' ? 'a usable GPU is present here' : false }, async (t) => {
  t.ok(existsSync(cli), `${cli} exists (run npm run build:ts first)`);
  const run = async (args: string[]) => {
    const child = spawn(process.execPath, [cli, 'serve', path, '--port', '0', '--threads', '1', ...args],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
    const [code] = await once(child, 'exit');
    return { code: code as number | null, stderr, stdout };
  };
  const cuda = await run(['--device', 'cuda']);
  t.equal(cuda.code, 1, cuda.stderr);
  t.match(cuda.stderr, /spindle serve: the model failed to load: (.*: )?device 'cuda' is not available: \S/);
  t.notMatch(cuda.stderr, /model is not available/, 'the load error as it is, not the 503 wording of the HTTP API');
  t.notMatch(cuda.stderr, /\n\s+at /, 'no stack trace');
  t.notMatch(cuda.stdout, /listening on/);
  const bad = await run(['--device', 'tpu']);
  t.equal(bad.code, 2, 'a bad flag: exit 2');
  t.match(bad.stderr, /--device must be one of auto, cpu, cuda \(got 'tpu'\)/);
});

t.test('spindle bench --device: validated, passed to the engine, the backend column says where it ran', async (t) => {
  t.equal(parseBenchArgs(['-m', 'a.gguf'])!.device, 'auto');
  t.equal(parseBenchArgs(['-m', 'a.gguf', '--device', 'cuda'])!.device, 'cuda');
  t.throws(() => parseBenchArgs(['-m', 'a.gguf', '--device', 'gpu']), /--device must be one of auto, cpu, cuda, got 'gpu'/);
  const bench = async (argv: string[]) => {
    const io = { stdout: sink(), stderr: sink() };
    const code = await benchMain(argv, io);
    return { code, out: io.stdout.text, err: io.stderr.text };
  };
  const cpu = await bench(['-m', path, '-p', '8', '-n', '0', '-r', '1', '-t', '1', '--no-warmup', '-o', 'json', '--device', 'cpu']);
  t.equal(cpu.code, 0, cpu.err);
  t.same((JSON.parse(cpu.out) as TestRecord[]).map((r) => r.backends), ['CPU']);
  t.match(cpu.err, /threads 1, device cpu/);
  if (auto === 'cuda') return;
  const cuda = await bench(['-m', path, '-p', '8', '-n', '0', '-r', '1', '-t', '1', '--device', 'cuda']);
  t.equal(cuda.code, 2, 'a model that cannot load: exit 2');
  t.match(cuda.err, /the model failed to load: .*device 'cuda' is not available: \S/);
  t.equal(cuda.out, '', 'no report');
});

t.test('dtype: float16 / bfloat16 keep the KV cache in 16 bits on a GPU and on the CPU (auto: the CPU\'s default); modelInfo says which', async (t) => {
  for (const dtype of [undefined, 'float32', 'float16', 'half', 'bfloat16'] as const) {
    for (const device of ['cpu', auto] as const) {
      const llm = new LLM({ model: path, maxModelLen: 64, threads: 2, device: device as 'cpu' | 'cuda', dtype });
      t.teardown(() => llm.close());
      await llm.ready();
      // auto: float16 on the CPU and on a GPU (llama.cpp's default)
      const want = dtype === undefined ? 'float16' : dtype === 'half' ? 'float16' : dtype;
      t.equal(llm.modelInfo.kvCacheDtype, want, `dtype ${dtype ?? '(default)'} on ${device}`);
      const [out] = await llm.generate('Hello', { temperature: 0, maxTokens: 4, ignoreEos: true });
      t.equal(out.outputs[0].tokenIds.length, 4);
    }
  }
  const kv = new LLM({ model: path, maxModelLen: 64, threads: 2, device: 'cpu', dtype: 'float16', kvCacheDtype: 'bf16' });
  t.teardown(() => kv.close());
  await kv.ready();
  t.equal(kv.modelInfo.kvCacheDtype, 'bfloat16', 'kvCacheDtype (vLLM\'s kv_cache_dtype) wins over dtype for the cache');
  t.equal(loadNative().NativeEngine.inspect(path).info.kvCacheDtype, null, 'inspect() loads nothing: kvCacheDtype null');
  // q8_0 (llama.cpp's / Ollama's): head dims of whole 32-value blocks on the CPU; this fixture's 16 get float16
  const q8 = new LLM({ model: path, maxModelLen: 64, threads: 2, device: 'cpu', kvCacheDtype: 'q8_0' });
  t.teardown(() => q8.close());
  await q8.ready();
  t.equal(q8.modelInfo.kvCacheDtype, 'float16', 'q8_0 with head dim 16: float16');
  const q4 = new LLM({ model: path, maxModelLen: 64, threads: 2, device: 'cpu', kvCacheDtype: 'q4_0' });
  t.teardown(() => q4.close());
  await q4.ready();
  t.equal(q4.modelInfo.kvCacheDtype, 'float16', 'q4_0 with head dim 16: float16');
  // fp8 (vLLM's / SGLang's kv_cache_dtype fp8, fp8_e4m3, fp8_e5m2): a byte per value, any head dim; it generates
  for (const [asked, want] of [['fp8', 'fp8_e4m3'], ['fp8_e5m2', 'fp8_e5m2']] as const) {
    const f8 = new LLM({ model: path, maxModelLen: 64, threads: 2, device: 'cpu', kvCacheDtype: asked });
    t.teardown(() => f8.close());
    await f8.ready();
    t.equal(f8.modelInfo.kvCacheDtype, want, `kvCacheDtype ${asked}: ${want}`);
    const [o] = await f8.generate('Hello', { temperature: 0, maxTokens: 4, ignoreEos: true });
    t.equal(o.outputs[0].tokenIds.length, 4, `${want} cache: it generates`);
  }
  t.throws(() => new LLM({ model: path, dtype: 'q8_0' as never }), /dtype must be one of auto, float16, half, bfloat16, float32 \(got q8_0\)/,
    'q8_0 is a cache type (kvCacheDtype), not a dtype');
  // enforceEager (vLLM's enforce_eager): CUDA step graphs off for this engine; the CPU has none, the same tokens
  const eager = new LLM({ model: path, maxModelLen: 64, threads: 2, enforceEager: true });
  t.teardown(() => eager.close());
  const [a] = await eager.generate('Hello', { temperature: 0, maxTokens: 6, ignoreEos: true });
  const [b] = await q8.generate('Hello', { temperature: 0, maxTokens: 6, ignoreEos: true });
  t.equal(a.outputs[0].tokenIds.length, 6);
  if (eager.modelInfo.device === 'cpu') t.same(a.outputs[0].tokenIds, b.outputs[0].tokenIds, 'enforceEager: the same greedy tokens');
});
