#!/usr/bin/env node
// Vision: image encode time and time to first token for one 512x512 image, Spindle vs llama.cpp's multimodal path
// (mtmd), same run, same model files, same pixels.
// Model: the LFM2-VL-1.6B-shaped fixture (test/tooling/fixtures/vision-presets.ts lfm2Vl1_6B: text lfm2 2048 x 16
// F16, mmproj SigLIP2-so400m-shaped D 1152 x 27 layers F16; random weights), generated into bench/.models on first
// use (about 30 s, 3.3 GB). Prompt: "Describe <image> briefly." (a 512x512 image is one 256-token entry: 262 positions).
//  - Spindle: Engine.generate streaming, maxTokens 1, a new request each repetition (no cache of any kind between
//    them): TTFT = submit to first token (decode + preprocessing + encode + prefill); encode = the engine's own
//    imageEncodeSeconds (resize, normalize, encoder + projector).
//  - llama.cpp: bench/llama/llama_mtmd_bench.cpp built against llama.cpp's static libraries with GGML_NATIVE
//    (-march=native), given with --llama-mtmd BIN (see the build line below); per repetition: tokenize with the
//    image, mtmd_encode_chunk (encode), then eval every chunk (TTFT = preprocessing + encode + prefill).
//      git clone node_modules/node-llama-cpp/llama/gitRelease.bundle /tmp/llama-src
//      cmake -S /tmp/llama-src -B /tmp/llama-build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
//        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF && cmake --build /tmp/llama-build --target mtmd llama -j
//      g++ -std=c++17 -O2 -I/tmp/llama-src/tools/mtmd -I/tmp/llama-src/ggml/include -I/tmp/llama-src/include \
//        bench/llama/llama_mtmd_bench.cpp /tmp/llama-build/tools/mtmd/libmtmd.a /tmp/llama-build/vendor/hash/libvendor-hash.a \
//        /tmp/llama-build/src/libllama.a /tmp/llama-build/ggml/src/libggml.a /tmp/llama-build/ggml/src/libggml-cpu.a \
//        /tmp/llama-build/ggml/src/libggml-base.a -lpthread -lgomp -o /tmp/llama-mtmd-bench
// Engines alternate repetition by repetition; the minimum of the repetitions is reported (the machine is shared).
// --preset gemma3Vision4B: Gemma 3 4B's vision tower (SigLIP at 896 px, 4096 patches pooled to 256 embeddings: any
// image is letterboxed into the square) before a 2-layer text model of its width.
// Usage: node bench/vision.mjs [--preset lfm2Vl1_6B|gemma3Vision4B] [--threads 2] [--reps 3] [--size 512]
//        [--llama-mtmd /tmp/llama-mtmd-bench] [--json out.json]
// Needs `npm run build` (addon, dist/, dist-tooling/).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { Engine } from '../dist/index.js';
import { generateVisionFixture, generatorFingerprint, VISION_PRESETS } from '../dist-tooling/test/tooling/fixtures/index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    threads: { type: 'string', default: '2' }, reps: { type: 'string', default: '3' }, size: { type: 'string', default: '512' },
    'llama-mtmd': { type: 'string' }, json: { type: 'string' }, preset: { type: 'string', default: 'lfm2Vl1_6B' },
  },
});
const threads = Number(args.threads), reps = Number(args.reps), size = Number(args.size);

const spec = VISION_PRESETS[args.preset];
if (!spec) throw new Error(`--preset must be one of ${Object.keys(VISION_PRESETS).join(', ')}`);
const key = createHash('sha256').update(generatorFingerprint()).update(JSON.stringify(spec)).digest('hex').slice(0, 12);
const dir = join(root, 'bench', '.models', `vision-${spec.name}-${key}`);
if (!existsSync(dir)) {
  const tmp = `${dir}.tmp${process.pid}`;
  console.error(`generating ${spec.name} into ${dir} ...`);
  await generateVisionFixture(spec, tmp);
  renameSync(tmp, dir);
}
const model = join(dir, `${spec.name}.gguf`), mmproj = join(dir, `mmproj-${spec.name}.gguf`);

// A deterministic picture (gradients + checkerboard), as raw RGB for llama.cpp and PNG (lossless) for Spindle.
const rgb = Buffer.alloc(size * size * 3);
for (let y = 0; y < size; y++) for (let x = 0; x < size; x++) {
  const i = (y * size + x) * 3;
  rgb[i] = (x * 7) & 255; rgb[i + 1] = (y * 5 + x * 3) & 255; rgb[i + 2] = ((x >> 4) ^ (y >> 4)) & 1 ? 230 : 25;
}
const work = join(root, 'bench', '.models', 'vision-images');
mkdirSync(work, { recursive: true });
const rawPath = join(work, `img-${size}.rgb`), pngPath = join(work, `img-${size}.png`);
writeFileSync(rawPath, rgb);
await sharp(rgb, { raw: { width: size, height: size, channels: 3 } }).png().toFile(pngPath);

const engine = new Engine({ modelPath: model, contextLength: 4096, threads, mmproj });
await engine.ready();
const prompt = 'Describe <image> briefly.';
async function spindleOnce() {
  const before = engine.stats().imageEncodeSeconds;
  const t0 = performance.now();
  let ttft = null;
  let promptTokens = 0;
  for await (const c of engine.generate({ prompt, imageData: pngPath, samplingParams: { temperature: 0, maxNewTokens: 1 }, stream: true })) {
    ttft ??= performance.now() - t0;
    promptTokens = c.metaInfo.promptTokens;
  }
  return { ttft, encode: (engine.stats().imageEncodeSeconds - before) * 1000, positions: promptTokens };
}
function llamaOnce() {
  const out = execFileSync(args['llama-mtmd'], [model, mmproj, rawPath, String(size), String(size), '1', String(threads)], { encoding: 'utf8' });
  const r = JSON.parse(out.trim().split('\n').pop());
  return { ttft: r.ttft_ms[0], encode: r.encode_ms[0], positions: r.positions };
}

await spindleOnce(); // warm-up: first-use costs (weight packing) are not what this measures
const runs = { spindle: [], llama: [] };
for (let r = 0; r < reps; r++) {
  const order = r % 2 === 0 ? ['spindle', 'llama'] : ['llama', 'spindle'];
  for (const who of order) {
    if (who === 'spindle') runs.spindle.push(await spindleOnce());
    else if (args['llama-mtmd']) runs.llama.push(llamaOnce());
  }
}
await engine.shutdown();

const min = (xs, k) => Math.min(...xs.map((x) => x[k]));
const row = (name, xs) => (xs.length === 0 ? null : { name, positions: xs[0].positions, encodeMs: min(xs, 'encode'), ttftMs: min(xs, 'ttft') });
const rows = [row('spindle', runs.spindle), row('llama.cpp (mtmd, -march=native)', runs.llama)].filter(Boolean);
console.log(`vision: ${size}x${size} image, ${spec.name} (mmproj D ${spec.vision.nEmbd} x ${spec.vision.nLayer}, ${spec.vision.weights ?? 'F32'}), ${threads} threads, min of ${reps}`);
console.log('| engine | positions | encode ms | TTFT ms |');
console.log('|---|---|---|---|');
for (const r of rows) console.log(`| ${r.name} | ${r.positions} | ${r.encodeMs.toFixed(1)} | ${r.ttftMs.toFixed(1)} |`);
if (rows.length === 2) {
  console.log(`Spindle / llama.cpp speed: encode ${(rows[1].encodeMs / rows[0].encodeMs).toFixed(2)}x, TTFT ${(rows[1].ttftMs / rows[0].ttftMs).toFixed(2)}x (> 1: Spindle faster)`);
}
if (args.json) writeFileSync(args.json, JSON.stringify({ size, threads, reps, rows, runs }, null, 2));
