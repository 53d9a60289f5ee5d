// Load failures reject ready() with a message naming the file and the problem, and the process stays alive (a
// good model still loads and generates afterwards). Cases: missing file, directory, empty file, wrong magic,
// truncated header, truncated data, unsupported architecture, unsupported and unknown tensor types, wrong
// tensor shape, missing tensor (the last five patched into a valid fixture's header).
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

// Offset just past the GGUF string `s` (u64 length, then bytes) in `buf`: where a key's value type or a tensor
// info's n_dims follows.
function afterString(buf: Buffer, s: string): number {
  const enc = Buffer.alloc(8 + Buffer.byteLength(s));
  enc.writeBigUInt64LE(BigInt(Buffer.byteLength(s)), 0);
  enc.write(s, 8);
  const at = buf.indexOf(enc);
  if (at < 0) throw new Error(`'${s}' is not in the file`);
  return at + enc.length;
}

// A copy of `bytes` with tensor `name`'s info patched: dims (GGUF order) and / or ggml type id.
function patchTensor(bytes: Buffer, name: string, patch: { ne?: number[]; type?: number }): Buffer {
  const out = Buffer.from(bytes);
  const at = afterString(out, name);
  const nDims = out.readUInt32LE(at);
  if (patch.ne) {
    if (patch.ne.length !== nDims) throw new Error(`${name} has ${nDims} dims`);
    patch.ne.forEach((n, i) => out.writeBigUInt64LE(BigInt(n), at + 4 + 8 * i));
  }
  if (patch.type !== undefined) out.writeUInt32LE(patch.type, at + 4 + 8 * nDims);
  return out;
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

  // Well-formed GGUF files that are not a model Spindle can run.
  const arch = Buffer.from(bytes);
  const archAt = afterString(arch, 'general.architecture') + 4 + 8; // value type u32, length u64
  t.equal(arch.toString('latin1', archAt, archAt + 5), 'llama');
  arch.write('mamba', archAt, 'latin1');
  t.match(await loadError(write('arch.gguf', arch)), /arch\.gguf: unsupported architecture 'mamba' \(supported: llama, qwen2, qwen3, qwen3moe, gemma3, granite, lfm2, lfm2moe\)/);
  const MXFP4 = 39; // a ggml type the GGUF reader knows and no Spindle backend runs
  t.match(await loadError(write('mxfp4.gguf', patchTensor(bytes, 'blk.0.ffn_up.weight', { type: MXFP4 }))),
    /mxfp4\.gguf: tensor 'blk\.0\.ffn_up\.weight' has type mxfp4, which the cpu backend does not support \(supported: f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, bf16\)/);
  t.match(await loadError(write('type99.gguf', patchTensor(bytes, 'blk.0.ffn_up.weight', { type: 99 }))),
    /type99\.gguf: tensor 'blk\.0\.ffn_up\.weight': unknown ggml type id 99/);
  t.match(await loadError(write('shape.gguf', patchTensor(bytes, 'blk.0.attn_q.weight', { ne: [64, 32] }))),
    /shape\.gguf: tensor 'blk\.0\.attn_q\.weight' has wrong shape \[64, 32\], expected \[64, 64\]/);
  const renamed = Buffer.from(bytes);
  renamed.write('output_nrrm', afterString(renamed, 'output_norm.weight') - 'output_norm.weight'.length, 'latin1');
  t.match(await loadError(write('missing-tensor.gguf', renamed)),
    /missing-tensor\.gguf: tensor 'output_norm\.weight' not found \(required by architecture llama/);

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
