// `spindle bench` (offline, llama-bench style) run in-process on the llama2Tiny fixture: the JSON / markdown /
// CSV / JSONL shapes, the token counts each test claims, flag and model errors (exit 2, no stack trace), the
// dispatcher choosing 'bench' vs 'bench serve', and the pure helpers (lists, statistics, prompt ids, GGUF header).
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseBenchArgs, parseIntList } from '../lib/bench/offline/args.js';
import { main, type Io } from '../lib/bench/offline/command.js';
import { decodeBytesPerToken, readModelFileInfo } from '../lib/gguf/file-info.js';
import { candidateIds, createPromptSource } from '../lib/bench/offline/prompt-tokens.js';
import { mean, stddev, type TestRecord } from '../lib/bench/offline/record.js';
import { contextNeeded, planTests } from '../lib/bench/offline/runner.js';
import { findCommand, runCli } from '../lib/cli/dispatch.js';
import { fixtureModel, PRESETS } from './helpers/fixtures.js';

function sink(): Writable & { text: string } {
  const w = new Writable({ write(chunk, _enc, cb) { w.text += String(chunk); cb(); } }) as Writable & { text: string };
  w.text = '';
  return w;
}

async function bench(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const io: Io = { stdout: sink(), stderr: sink() };
  const code = await main(argv, io);
  return { code, out: (io.stdout as Writable & { text: string }).text, err: (io.stderr as Writable & { text: string }).text };
}

const positive = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v > 0;

t.test('-o json: every test, its samples and token counts', async (t) => {
  const model = await fixtureModel(PRESETS.llama2Tiny);
  const r = await bench(['-m', model, '-p', '16', '-n', '8', '-r', '2', '-b', '1,2', '-t', '2', '-o', 'json', '--bandwidth', '20']);
  t.equal(r.code, 0, r.err);
  t.notMatch(r.err, /\n\s+at /, 'no stack trace');
  t.match(r.err, /pp16 threads 2: warm-up/);
  t.match(r.err, /tg8@b2 threads 2: run 2\/2: [\d.]+ t\/s/);
  const records = JSON.parse(r.out) as TestRecord[];
  t.same(records.map((x) => x.test), ['pp16', 'tg8', 'tg8@b2']);
  const expectTokens: Record<string, number> = { pp16: 16, tg8: 8, 'tg8@b2': 16 };
  for (const rec of records) {
    t.equal(rec.samples_ns.length, 2, `${rec.test}: one sample per repetition`);
    t.equal(rec.samples_ts.length, 2);
    t.ok(rec.samples_ns.every(positive) && rec.samples_ts.every(positive), `${rec.test}: positive finite samples`);
    t.same(rec.samples_tokens, [expectTokens[rec.test], expectTokens[rec.test]], `${rec.test}: tokens counted`);
    rec.samples_ts.forEach((ts, i) => t.ok(Math.abs(ts - (rec.samples_tokens[i] * 1e9) / rec.samples_ns[i]) < 1e-6 * ts));
    t.ok(positive(rec.avg_ts) && Number.isFinite(rec.stddev_ts) && rec.stddev_ts >= 0);
    t.ok(Math.abs(rec.avg_ts - mean(rec.samples_ts)) < 1e-9 * rec.avg_ts, 'avg_ts is the mean of samples_ts');
    t.equal(rec.n_threads, 2);
    t.equal(rec.model_file_type, 1, 'general.file_type of an F16 model');
    t.match(rec.model_type, /^llama \S+ F16$/);
    t.ok(rec.model_size > 0 && rec.model_size < rec.model_file_size, 'tensor bytes < file bytes');
    t.ok(positive(rec.model_n_params));
    t.equal(rec.bandwidth_gbps, 20);
  }
  const [pp, tg, tgb] = records;
  t.match(pp, { n_prompt: 16, n_gen: 0, n_seqs: 1, bw_bound_ts: null, bw_pct: null });
  t.match(tg, { n_prompt: 0, n_gen: 8, n_seqs: 1 });
  t.match(tgb, { n_prompt: 0, n_gen: 8, n_seqs: 2 });
  const readBytes = decodeBytesPerToken(readModelFileInfo(model));
  t.ok(readBytes < tg.model_size, 'untied: the embedding table is not read per token');
  t.ok(Math.abs(tg.bw_bound_ts! - 20e9 / readBytes) < 1e-6, 'bound = bandwidth / bytes a token reads');
  t.ok(Math.abs(tgb.bw_bound_ts! - 2 * tg.bw_bound_ts!) < 1e-6, 'B sequences share each weight read');
  t.ok(Math.abs(tg.bw_pct! - (100 * tg.avg_ts) / tg.bw_bound_ts!) < 1e-9);
});

t.test('-o md: a llama-bench style table', async (t) => {
  const model = await fixtureModel(PRESETS.llama2Tiny);
  const r = await bench(['-m', model, '-p', '8', '-n', '4', '-r', '1', '-b', '1,2', '-t', '1', '--no-warmup']);
  t.equal(r.code, 0, r.err);
  t.notMatch(r.err, /warm-up/, '--no-warmup');
  const lines = r.out.split('\n');
  t.match(lines[0], /^\| model {26}\| {7}size \| {5}params \| backend {4}\| threads \| {12}test \| {18}t\/s \|$/);
  t.match(lines[1], /^\| -{30} \| -{9}: \| -{9}: \| -{10} \| -{6}: \| -{14}: \| -{19}: \|$/);
  const rows = lines.slice(2, 5);
  ['pp8', 'tg4', 'tg4@b2'].forEach((name, i) => {
    t.match(rows[i], new RegExp(`^\\| llama .{24} \\| +[\\d.]+ MiB \\| +[\\d.]+ M \\| CPU +\\| +1 \\| +${name} \\| +[\\d.]+ ± 0\\.00 \\|$`));
    t.equal(rows[i].length, lines[0].length, 'aligned');
  });
  t.equal(lines[5], '');
  t.match(lines[6], /^build: spindle /);
});

t.test('-o csv and -o jsonl', async (t) => {
  const model = await fixtureModel(PRESETS.llama2Tiny);
  const csv = await bench(['-m', model, '-p', '4,8', '-n', '0', '-r', '1', '-t', '1', '-o', 'csv']);
  t.equal(csv.code, 0, csv.err);
  const rows = csv.out.trim().split('\n');
  t.equal(rows.length, 3);
  t.match(rows[0], /^spindle_version,.*,test,.*,avg_ts,stddev_ts,/);
  const cols = rows[0].split(',');
  const testCol = cols.indexOf('test');
  t.same(rows.slice(1).map((row) => JSON.parse(row.split(',')[testCol])), ['pp4', 'pp8']);
  const jsonl = await bench(['-m', model, '-p', '0', '-n', '2', '-r', '3', '-t', '1', '-o', 'jsonl']);
  t.equal(jsonl.code, 0, jsonl.err);
  const recs = jsonl.out.trim().split('\n').map((l) => JSON.parse(l) as TestRecord);
  t.same(recs.map((x) => [x.test, x.samples_ns.length, x.samples_tokens]), [['tg2', 3, [2, 2, 2]]]);
});

t.test('flag and model errors: exit 2, the flag named, no stack trace', async (t) => {
  const model = await fixtureModel(PRESETS.llama2Tiny);
  const dir = mkdtempSync(join(tmpdir(), 'spindle-bench-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const notGguf = join(dir, 'x.gguf');
  writeFileSync(notGguf, 'not a model at all, just text');
  const truncated = join(dir, 'cut.gguf');
  writeFileSync(truncated, readFileSync(model).subarray(0, 50_000));
  const cases: [string[], RegExp][] = [
    [['-m', model, '--frob'], /--frob/],
    [['-m', model, '-p', 'abc'], /-p \(--n-prompt\) expects integers.*'abc'/],
    [['-p', '16'], /-m \(--model\) is required/],
    [['-m', model, '-n', '1.5'], /-n \(--n-gen\)/],
    [['-m', model, '-r', '0'], /-r \(--repetitions\) must be in \[1, 1000\]/],
    [['-m', model, '-o', 'xml'], /-o \(--output\) must be one of/],
    [['-m', model, '--bandwidth', 'fast'], /--bandwidth must be a positive number/],
    [['-m', model, '-p', '0', '-n', '0'], /nothing to run/],
    [['-m', model, 'extra'], /unexpected argument 'extra'/],
    [['-m', join(dir, 'missing.gguf')], /-m .*missing\.gguf: no such file/],
    [['-m', notGguf], /-m .*x\.gguf: not a GGUF file/],
    [['-m', truncated], /-m .*cut\.gguf: truncated GGUF header/],
    [['-m', model, '-p', '5000'], /-p\/-n: the longest test needs 5001 tokens of context, but .* was trained for 4096/],
  ];
  for (const [argv, message] of cases) {
    const r = await bench(argv);
    t.equal(r.code, 2, argv.join(' '));
    t.match(r.err, message);
    t.notMatch(r.err, /\n\s+at /, 'no stack trace');
    t.equal(r.out, '', 'nothing on stdout');
  }
});

t.test('the dispatcher: bench vs bench serve', async (t) => {
  t.equal(findCommand(['bench', '-m', 'x.gguf'])?.entry.name, 'bench');
  t.same(findCommand(['bench', '-m', 'x.gguf'])?.rest, ['-m', 'x.gguf']);
  t.equal(findCommand(['bench', 'serve', '--port', '1'])?.entry.name, 'bench serve', 'the longer name wins');
  const out = sink();
  const err = sink();
  t.equal(await runCli(['bench', '--help'], { stdout: out, stderr: err }), 0);
  t.match(out.text, /^Usage: spindle bench -m model\.gguf/);
  const out2 = sink();
  t.equal(await runCli(['bench', 'serve', '--help'], { stdout: out2, stderr: err }), 0);
  t.match(out2.text, /^Usage: spindle bench serve/);
  const err3 = sink();
  t.equal(await runCli(['bench'], { stdout: sink(), stderr: err3 }), 2);
  t.match(err3.text, /-m \(--model\) is required/);
});

t.test('helpers: lists, plan, statistics', async (t) => {
  t.same(parseIntList('n-prompt', ['16,32'], 0, 100), [16, 32]);
  t.same(parseIntList('n-prompt', ['1-4', '8'], 0, 100), [1, 2, 3, 4, 8], 'ranges; a repeated flag adds values');
  t.same(parseIntList('n-prompt', ['1-16*2'], 0, 100), [1, 2, 4, 8, 16]);
  t.same(parseIntList('n-prompt', ['0-20+10'], 0, 100), [0, 10, 20]);
  t.throws(() => parseIntList('n-prompt', ['4-2'], 0, 100), /range '4-2' is empty/);
  t.throws(() => parseIntList('n-prompt', ['0-8*2'], 0, 100), /does not increase/);
  t.throws(() => parseIntList('threads', ['1-5000'], 1, 1024), /-t \(--threads\) values must be in \[1, 1024\]/);
  t.throws(() => parseIntList('n-gen', ['1,,2'], 0, 100), /-n \(--n-gen\) expects integers/);
  const cfg = parseBenchArgs(['-m', 'a.gguf', '-p', '0,64', '-n', '16', '-b', '1,4'])!;
  t.same(cfg.nPrompt, [64], '0 drops the pp test');
  t.same(planTests(cfg).map((x) => [x.kind, x.nPrompt, x.nGen, x.nSeqs]), [['pp', 64, 0, 1], ['tg', 0, 16, 1], ['tg', 0, 16, 4]]);
  t.equal(contextNeeded(cfg), 65);
  t.match(parseBenchArgs(['-m', 'a.gguf'])!, { nPrompt: [512], nGen: [128], batch: [1], repetitions: 5, output: 'md', seed: 0, bandwidthGBps: null, warmup: true });
  t.equal(parseBenchArgs(['-h']), null);
  t.equal(mean([1, 2, 3]), 2);
  t.equal(stddev([5]), 0, 'one sample: 0, as llama-bench');
  t.ok(Math.abs(stddev([2, 4, 4, 4, 5, 5, 7, 9]) - Math.sqrt(32 / 7)) < 1e-12, 'sample standard deviation (n - 1)');
});

t.test('decode bytes per token: untied embedding rows and unused experts are not read', async (t) => {
  const dense = readModelFileInfo(await fixtureModel(PRESETS.llama3Tiny)); // tied: every tensor is read
  t.equal(decodeBytesPerToken(dense), dense.weightBytes);
  t.equal(dense.tensors.reduce((s, x) => s + x.bytes, 0), dense.weightBytes, 'extents cover the data section');
  const nEmbd = 64, nLayer = 2, nExpert = 16, nFfExp = 64;
  const moe = readModelFileInfo(await fixtureModel({ arch: 'qwen3moe', tokenizer: 'qwen3', weights: 'F32', nEmbd, nLayer,
    nHead: 4, nHeadKv: 2, nFf: 128, nExpert, nExpertUsed: 4, nFfExp, seed: 1 }));
  t.match(moe, { expertCount: 16, expertUsedCount: 4 });
  const embdBytes = moe.tokenTypes!.length * nEmbd * 4; // F32 token_embd, untied (output.weight present)
  const expertBytes = nLayer * 3 * nEmbd * nFfExp * nExpert * 4; // gate, up, down stacks
  t.equal(moe.tensors.find((x) => x.name === 'token_embd.weight')?.bytes, embdBytes);
  t.equal(decodeBytesPerToken(moe), moe.weightBytes - embdBytes - expertBytes * (1 - 4 / 16));
});

t.test('GGUF header facts and prompt ids', async (t) => {
  const model = await fixtureModel(PRESETS.llama2Tiny);
  const info = readModelFileInfo(model);
  t.match(info, { arch: 'llama', fileType: 1, fileTypeName: 'F16', ctxTrain: 4096 });
  t.equal(info.tokenTypes?.length, 32000);
  const q4km = readModelFileInfo(await fixtureModel(PRESETS.llama2Q4_K_M));
  t.equal(q4km.fileTypeName, 'Q4_K - Medium');
  t.ok(q4km.weightBytes < info.weightBytes, 'a quantized model has fewer weight bytes');
  const vocab = { vocabSize: 32000, bosTokenId: 1, eosTokenId: 2, eogTokenIds: [2], addBos: true };
  const ids = candidateIds(vocab, info.tokenTypes);
  t.ok(ids.length > 30000 && ids.length < 32000);
  const allowed = new Set(ids);
  for (const special of [0, 1, 2, 3, 258]) t.notOk(allowed.has(special), `id ${special} (unknown / control / byte) is never drawn`);
  const a = createPromptSource(vocab, info.tokenTypes, 7);
  const b = createPromptSource(vocab, info.tokenTypes, 7);
  const p1 = a.next(64);
  t.same(p1, b.next(64), 'same seed, same prompts');
  t.equal(p1.length, 64);
  t.equal(p1[0], 1, 'BOS first when the model adds it');
  t.ok(p1.slice(1).every((id) => allowed.has(id)));
  t.notSame(a.next(64), p1, 'every prompt is new');
  t.same(createPromptSource({ ...vocab, addBos: false }, null, 0).next(3).length, 3);
  t.throws(() => createPromptSource({ ...vocab, vocabSize: 3, eogTokenIds: [0, 2] }, null, 0), /no ordinary \(non-special\) token/);
});
