#!/usr/bin/env node
// Spindle vs llama.cpp (node-llama-cpp's prebuilt CPU binary) on the same GGUF file, same thread count, in
// the same run, alternating engine by engine per repetition so machine noise hits both alike.
// Measures, per model:  pp  = prompt tokens/s for one prompt of --pp tokens (time to the first output token);
//                       tg  = decode tokens/s of one sequence ((n - 1) tokens over first -> last token, both
//                             engines timed inside one streamed run) after a prompt of --depth tokens (default 8;
//                             llama-bench's "tg128 @ d4096": decode reading a long context's K / V);
//                       batch = total output tokens/s of --seqs sequences decoding --tg tokens each, and
//                       batch decode = the same after each sequence's first token (prefill excluded, as in tg).
// Models are performance-shaped random-weight fixtures (test/tooling/fixtures, compiled into dist-tooling/ by
// `npm run build:ts`), cached in bench/.models/.
// Also measures the streaming-read memory bandwidth on the same threads (bench/membw) and reports decode as a
// percentage of its floor (bandwidth / bytes a decoded token reads: the file, less an untied embedding table,
// with MoE experts at their used share), and Spindle's batched/single decode scaling.
// Usage: node bench/cpu-compare.mjs [--models llama1b-q4_k_m,llama1b-q8_0,qwen3-0.6b-q8_0] [--threads 2]
//        [--pp 512] [--tg 128] [--seqs 16] [--reps 3] [--json out.json] [--markdown BENCHMARKS.md]
//        [--skip-batch] [--generate-only] [--depth 8] [--dtype auto|float16|bfloat16|float32]
//        [--kv-cache-dtype q8_0|q4_0|fp8_e4m3|fp8_e5m2]
// --dtype is Spindle's KV cache type (llama.cpp keeps its default, an F16 KV cache). --kv-cache-dtype q8_0 / q4_0
// gives both that cache (llama.cpp's -ctk / -ctv, with the flash attention its quantized V cache needs); an fp8 type
// is Spindle's alone (llama.cpp has no fp8 cache: it keeps F16).
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { getLlama } from 'node-llama-cpp';
import { Engine } from '../dist/index.js';
import { measureBandwidth, median, modelPath, promptIds, root } from './common.mjs';
import { decodeBytesPerToken, readModelFileInfo } from '../dist/gguf/file-info.js';

const { values: args } = parseArgs({
  options: {
    models: { type: 'string', default: 'llama1b-q4_k_m,llama1b-q8_0' },
    threads: { type: 'string', default: '2' },
    pp: { type: 'string', default: '512' },
    tg: { type: 'string', default: '128' },
    seqs: { type: 'string', default: '16' },
    reps: { type: 'string', default: '3' },
    json: { type: 'string' },
    markdown: { type: 'string' },
    'skip-batch': { type: 'boolean', default: false },
    'generate-only': { type: 'boolean', default: false },
    depth: { type: 'string', default: '8' },
    dtype: { type: 'string', default: 'auto' },
    'kv-cache-dtype': { type: 'string', default: 'auto' },
  },
});
const threads = Number(args.threads), ppLen = Number(args.pp), tgLen = Number(args.tg);
const nSeqs = Number(args.seqs), reps = Number(args.reps), depth = Number(args.depth);

// Batched figures from per-sequence runs { tFirst, tLast, n } started at t0 (ms): total output tokens/s including
// the prompts' prefill, and decode tokens/s after each sequence's first token (as tg is timed).
function batchFigures(runs, t0) {
  const n = runs.reduce((s, r) => s + r.n, 0);
  const tFirst = Math.max(...runs.map((r) => r.tFirst)), tLast = Math.max(...runs.map((r) => r.tLast));
  return { total: n / ((tLast - t0) / 1000), decode: (n - runs.length) / ((tLast - tFirst) / 1000) };
}

// ---- Spindle ----
// Through the SGLang-style Engine, streaming, so that decode is timed from each sequence's first token to its
// last inside one run, exactly as the llama.cpp side below is.
// Prefix caching off: every repetition's prompt is the same, and a cached prompt would time a cache hit, not
// prefill (llama.cpp's side starts each repetition with an empty context too).
async function spindleRun(path) {
  const engine = new Engine({
    modelPath: path, threads, enablePrefixCaching: false, dtype: args.dtype, kvCacheDtype: args['kv-cache-dtype'],
    contextLength: Math.max(4096, ppLen + 16, depth + tgLen + 16),
  });
  await engine.ready();
  const greedy = { temperature: 0, ignoreEos: true };
  // Streams one request; resolves to { tFirst, tLast, n }: times of its first and last token, tokens received.
  const decode = async (inputIds, maxNewTokens) => {
    let n = 0, tFirst = 0;
    for await (const chunk of engine.generate({ inputIds, samplingParams: { ...greedy, maxNewTokens }, stream: true })) {
      if (n === 0 && chunk.outputIds.length > 0) tFirst = performance.now();
      n += chunk.outputIds.length;
    }
    return { tFirst, tLast: performance.now(), n };
  };
  return {
    async pp() {
      const t0 = performance.now();
      await engine.generate({ inputIds: promptIds(ppLen, 1), samplingParams: { ...greedy, maxNewTokens: 1 } });
      return ppLen / ((performance.now() - t0) / 1000);
    },
    async tg() {
      const { tFirst, tLast, n } = await decode(promptIds(depth, 2), tgLen + 1);
      return (n - 1) / ((tLast - tFirst) / 1000);
    },
    async batch() {
      const t0 = performance.now();
      return batchFigures(await Promise.all(Array.from({ length: nSeqs }, (_, i) => decode(promptIds(8, 10 + i), tgLen))), t0);
    },
    close: () => engine.shutdown(),
  };
}

// ---- llama.cpp through node-llama-cpp ----
let llamaInstance;
const llamaBlockType = { q8_0: 'Q8_0', q4_0: 'Q4_0' }[args['kv-cache-dtype']];
const llamaKvCache = llamaBlockType
  ? { flashAttention: true, experimentalKvCacheKeyType: llamaBlockType, experimentalKvCacheValueType: llamaBlockType }
  : { flashAttention: false };
async function llamaCppRun(path) {
  llamaInstance ??= await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const model = await llamaInstance.loadModel({ modelPath: path });
  const ctx = await model.createContext({
    contextSize: Math.max(1024, ppLen + 16, depth + tgLen + 16), batchSize: 512, threads, ...llamaKvCache,
  });
  const seq = ctx.getSequence();
  const decode = async (s, ids, n) => {
    let count = 0, tFirst = 0;
    for await (const _ of s.evaluate(ids, { temperature: 0 })) {
      if (++count === 1) tFirst = performance.now();
      if (count === n) break;
    }
    return { tFirst, tLast: performance.now(), n: count };
  };
  return {
    async pp() {
      await seq.clearHistory();
      const t0 = performance.now();
      await seq.evaluateWithoutGeneratingNewTokens(promptIds(ppLen, 1));
      return ppLen / ((performance.now() - t0) / 1000);
    },
    async tg() {
      await seq.clearHistory();
      const { tFirst, tLast } = await decode(seq, promptIds(depth, 2), tgLen + 1);
      return tgLen / ((tLast - tFirst) / 1000);
    },
    async batch() {
      const bctx = await model.createContext({ contextSize: nSeqs * (tgLen + 16), sequences: nSeqs, batchSize: 512, threads, flashAttention: false });
      try {
        const t0 = performance.now();
        return batchFigures(await Promise.all(
          Array.from({ length: nSeqs }, (_, i) => decode(bctx.getSequence(), promptIds(8, 10 + i), tgLen))), t0);
      } finally {
        await bctx.dispose();
      }
    },
    close: async () => { await ctx.dispose(); await model.dispose(); },
  };
}

if (args['generate-only']) {
  for (const name of args.models.split(',')) console.log(await modelPath(name));
  process.exit(0);
}

const results = [];
for (const name of args.models.split(',')) {
  const path = await modelPath(name);
  const bytes = statSync(path).size;
  const engines = { spindle: await spindleRun(path), llamacpp: await llamaCppRun(path) };
  const figures = { spindle: { pp: [], tg: [], batch: [], batchdec: [] }, llamacpp: { pp: [], tg: [], batch: [], batchdec: [] } };
  const runs = args['skip-batch'] ? ['pp', 'tg'] : ['pp', 'tg', 'batch'];
  for (let r = 0; r < reps; ++r) {
    for (const kind of runs) {
      for (const which of r % 2 === 0 ? ['spindle', 'llamacpp'] : ['llamacpp', 'spindle']) {
        const figure = await engines[which][kind]();
        if (kind !== 'batch') figures[which][kind].push(figure);
        else figures[which].batch.push(figure.total), figures[which].batchdec.push(figure.decode);
      }
    }
  }
  const kinds = args['skip-batch'] ? ['pp', 'tg'] : ['pp', 'tg', 'batch', 'batchdec'];
  for (const e of Object.values(engines)) await e.close();
  // bytes one decoded token reads: the file less an untied embedding table, experts at their used share
  const decodeBytes = decodeBytesPerToken(readModelFileInfo(path));
  const row = { model: name, bytes, decode_bytes: decodeBytes, threads, pp: ppLen, tg: tgLen, seqs: nSeqs, depth, dtype: args.dtype,
    kv_cache_dtype: args['kv-cache-dtype'] };
  for (const kind of kinds) {
    row[`${kind}_spindle`] = median(figures.spindle[kind]);
    row[`${kind}_llamacpp`] = median(figures.llamacpp[kind]);
    row[`${kind}_ratio`] = row[`${kind}_spindle`] / row[`${kind}_llamacpp`];
  }
  results.push(row);
  console.log(JSON.stringify(row));
}

// Bandwidth measured after the runs (the model files are out of the way by then) and before the report.
const gbps = measureBandwidth(threads);
for (const r of results) {
  r.bandwidth_gbps = gbps;
  r.floor_tg = (gbps * 1e9) / r.decode_bytes;  // tokens/s if decode read each weight it needs once at full bandwidth
  r.tg_spindle_floor_pct = (100 * r.tg_spindle) / r.floor_tg;
  r.tg_llamacpp_floor_pct = (100 * r.tg_llamacpp) / r.floor_tg;
  if (r.batch_spindle !== undefined) {
    r.batch_scaling_spindle = r.batch_spindle / r.tg_spindle;
    r.batchdec_scaling_spindle = r.batchdec_spindle / r.tg_spindle;  // like for like: tg excludes prefill too
  }
}

const f1 = (x) => x.toFixed(1);
const lines = [
  `| model | MB | pp${ppLen} Spindle | llama.cpp | ratio | tg${tgLen}${depth !== 8 ? ` @ d${depth}` : ''} Spindle | llama.cpp | ratio | Spindle % floor | llama.cpp % floor |` +
    (args['skip-batch'] ? '' : ` ${nSeqs}-seq Spindle | llama.cpp | ratio | ${nSeqs}-seq decode Spindle | llama.cpp | ` +
      `Spindle ${nSeqs}-seq / 1-seq (decode) |`),
  '|---|---|---|---|---|---|---|---|---|---|' + (args['skip-batch'] ? '' : '---|---|---|---|---|---|'),
];
for (const r of results) {
  let line = `| ${r.model} | ${(r.bytes / 1e6).toFixed(0)} | ${f1(r.pp_spindle)} | ${f1(r.pp_llamacpp)} | ${r.pp_ratio.toFixed(2)}x | ` +
    `${f1(r.tg_spindle)} | ${f1(r.tg_llamacpp)} | ${r.tg_ratio.toFixed(2)}x | ${f1(r.tg_spindle_floor_pct)}% | ${f1(r.tg_llamacpp_floor_pct)}% |`;
  if (!args['skip-batch']) {
    line += ` ${f1(r.batch_spindle)} | ${f1(r.batch_llamacpp)} | ${r.batch_ratio.toFixed(2)}x | ${f1(r.batchdec_spindle)} | ` +
      `${f1(r.batchdec_llamacpp)} | ${r.batch_scaling_spindle.toFixed(2)}x (${r.batchdec_scaling_spindle.toFixed(2)}x) |`;
  }
  lines.push(line);
}
console.log('\n' + lines.join('\n'));
console.log(`\nbandwidth ${gbps.toFixed(1)} GB/s on ${threads} threads (decode floor = bandwidth / bytes read per decoded token)`);
if (args.json) writeFileSync(args.json, JSON.stringify(results, null, 2) + '\n');
if (args.markdown) writeMarkdown(args.markdown, lines, gbps);

// Replaces the section between the CPU-compare markers of the markdown file (creating it if needed).
function writeMarkdown(file, tableLines, bandwidth) {
  const begin = '<!-- cpu-compare:begin -->', end = '<!-- cpu-compare:end -->';
  const command = `node bench/cpu-compare.mjs ${process.argv.slice(2).join(' ')}`;
  const section = [
    begin,
    `Measured ${new Date().toISOString().slice(0, 10)} on ${cpus()[0]?.model ?? 'unknown CPU'}, ${threads} threads, ` +
      `Spindle vs llama.cpp (node-llama-cpp ${llamaCppVersion()} prebuilt CPU binary) alternating in one run, ` +
      `median of ${reps} repetitions. Streaming-read bandwidth: ${bandwidth.toFixed(1)} GB/s.`,
    '',
    ...tableLines,
    '',
    `Reproduce: \`${command}\``,
    end,
  ].join('\n');
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n\n' + begin + '\n' + end + '\n';
  const a = text.indexOf(begin), b = text.indexOf(end);
  text = a >= 0 && b > a ? text.slice(0, a) + section + text.slice(b + end.length) : text + '\n' + section + '\n';
  writeFileSync(file, text);
}

function llamaCppVersion() {
  try {
    return JSON.parse(readFileSync(join(root, 'node_modules', 'node-llama-cpp', 'package.json'), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}
