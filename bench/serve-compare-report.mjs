#!/usr/bin/env node
// Summary tables of one bench/serve-compare.sh run, read from its folder: the --output-json files of
// `spindle bench serve` (a-ENGINE.json, b-ENGINE.json, c-ENGINE.json), the servers' /metrics snapshots taken
// before and after each workload (metrics-before-W-ENGINE.txt / metrics-after-W-ENGINE.txt) and meta.txt.
// "prompt tokens computed" is the growth of the server's own counter over the workload: spindle:prompt_tokens_total
// (tokens prefilled, cache hits excluded) and llamacpp:prompt_tokens_total ("excluding cached tokens"); "reused"
// is spindle:prefix_cache_hits_total / llamacpp:prompt_tokens_cached_total.
//   node bench/serve-compare-report.mjs OUT_DIR [--markdown]
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: serve-compare-report.mjs OUT_DIR [--markdown]');
  process.exit(2);
}
const markdown = process.argv.includes('--markdown');
const NAMES = { spindle: 'Spindle', 'spindle-nocache': 'Spindle, prefix cache off', llama: 'llama-server' };

const readJson = (f) => (existsSync(join(dir, f)) ? JSON.parse(readFileSync(join(dir, f), 'utf8')) : null);

function metric(text, name) {
  let sum = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = line.match(/^([^\s{]+)(\{[^}]*\})?\s+(\S+)/);
    if (m && m[1] === name) sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}

const foreign = [];
/** The server's own prompt-token counters must add up to the prompt tokens of the client's requests (usage);
 * more means requests from another client reached the server during the workload (or prompts were recomputed
 * after a preemption): the run's figures are then suspect, and the report says so. */
function checkCounters(w, e, r, computed, reused) {
  if (computed === null || reused === null || !r) return;
  const server = computed + reused;
  if (server !== r.total_input_tokens) foreign.push(`(${w}) ${NAMES[e]}: the server counted ${server} prompt tokens, the benchmark's requests had ${r.total_input_tokens}`);
}

/** How much each of the named counters grew during workload w on engine e (/metrics snapshots; null: unknown). */
function counterDeltas(w, e, names) {
  const before = join(dir, `metrics-before-${w}-${e}.txt`);
  const after = join(dir, `metrics-after-${w}-${e}.txt`);
  if (!existsSync(before) || !existsSync(after)) return names.map(() => null);
  const [b, a] = [readFileSync(before, 'utf8'), readFileSync(after, 'utf8')];
  return names.map((n) => {
    const x = metric(a, n);
    const y = metric(b, n);
    return x === null || y === null ? null : x - y;
  });
}

/** [computed, reused] prompt tokens of workload w on engine e. */
function promptCounters(w, e) {
  return counterDeltas(w, e, e === 'llama'
    ? ['llamacpp:prompt_tokens_total', 'llamacpp:prompt_tokens_cached_total']
    : ['spindle:prompt_tokens_total', 'spindle:prefix_cache_hits_total']);
}

/** Where Spindle's engine spent workload w (its step counters): printed after the tables. */
const engineLines = [];
function noteEngineTime(w, e, r) {
  if (!e.startsWith('spindle')) return;
  const [steps, stepS, fwdS] = counterDeltas(w, e, ['spindle:engine_steps_total', 'spindle:engine_step_seconds_total',
    'spindle:engine_forward_seconds_total']);
  if (steps === null || stepS === null || fwdS === null || !(stepS > 0)) return;
  engineLines.push(`(${w}) ${NAMES[e]}: ${steps} engine steps, ${stepS.toFixed(2)} s of steps in a ${r.duration.toFixed(2)} s run; ` +
    `forward passes ${fwdS.toFixed(2)} s (${(100 * fwdS / stepS).toFixed(0)}% of the steps), ${(1e3 * stepS / steps).toFixed(2)} ms a step`);
  // the engine's request phases (vLLM's request_*_time_seconds): the mean of each over the workload's requests, set
  // against the client's mean TTFT, whose rest is outside the engine (HTTP, tokenization, streaming)
  const phases = ['queue', 'prefill', 'decode'];
  const d = counterDeltas(w, e, phases.flatMap((p) => [`spindle:request_${p}_time_seconds_sum`, `spindle:request_${p}_time_seconds_count`]));
  const means = phases.map((_, i) => (d[2 * i] !== null && d[2 * i + 1] > 0 ? (1e3 * d[2 * i]) / d[2 * i + 1] : null));
  if (means.every((m) => m !== null)) {
    engineLines.push(`(${w}) ${NAMES[e]}: per request, mean queue ${means[0].toFixed(2)} ms, prefill ${means[1].toFixed(2)} ms ` +
      `(the client's mean TTFT: ${f(r.mean_ttft_ms, 2)} ms), decode ${means[2].toFixed(1)} ms`);
  }
}

const f = (v, d = 1) => (v === null || v === undefined || Number.isNaN(v) ? '-' : Number(v).toFixed(d));
const ratio = (x, y) => (x && y ? `${(x / y).toFixed(2)}x` : '-');

function table(title, header, rows) {
  const out = [];
  if (markdown) {
    out.push(`**${title}**`, '', `| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`);
    for (const r of rows) out.push(`| ${r.join(' | ')} |`);
  } else {
    const width = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
    const line = (r) => r.map((c, i) => (i === 0 ? String(c).padEnd(width[i]) : String(c).padStart(width[i]))).join('  ');
    out.push(title, line(header), line(width.map((n) => '-'.repeat(n))), ...rows.map(line));
  }
  console.log(out.join('\n') + '\n');
}

if (existsSync(join(dir, 'meta.txt'))) {
  const meta = readFileSync(join(dir, 'meta.txt'), 'utf8').trim();
  console.log(markdown ? meta.split('\n').map((l) => `    ${l}`).join('\n') + '\n' : meta + '\n');
}

const reqs = (r) => `${r.completed}/${r.completed + r.failed}`;

// the machine's load while each engine ran each workload (load.txt: one line every 15 s, "== ENGINE W" markers)
if (existsSync(join(dir, 'load.txt'))) {
  const parts = [];
  let key = null;
  const loads = new Map();
  for (const line of readFileSync(join(dir, 'load.txt'), 'utf8').split('\n')) {
    const mark = line.match(/^== (\S+) (\S+)$/);
    if (mark) key = mark[2] === 'starts' ? null : `${mark[2]} ${NAMES[mark[1]] ?? mark[1]}`;
    const m = line.match(/ load ([\d.]+) /);
    if (m && key) loads.set(key, [...(loads.get(key) ?? []), Number(m[1])]);
  }
  for (const [k, v] of loads) parts.push(`${k} ${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(1)}`);
  if (parts.length) console.log(`mean 1-minute load average while running (the benchmark itself keeps it near 2 on 2 cores; more is other work): ${parts.join(', ')}\n`);
}

// (a) 16 concurrent streams
{
  const rows = [];
  const got = {};
  for (const e of ['spindle', 'llama']) {
    const r = readJson(`a-${e}.json`);
    if (!r) continue;
    got[e] = r;
    checkCounters('a', e, r, ...promptCounters('a', e));
    noteEngineTime('a', e, r);
    rows.push([NAMES[e], reqs(r), r.total_input_tokens, r.total_output_tokens, f(r.duration), f(r.output_throughput),
      f(r.median_tpot_ms), f(r.p99_tpot_ms), f(r.median_ttft_ms, 0), f(r.p99_ttft_ms, 0)]);
  }
  if (got.spindle && got.llama) {
    rows.push(['Spindle / llama-server', '', '', '', '', ratio(got.spindle.output_throughput, got.llama.output_throughput),
      ratio(got.spindle.median_tpot_ms, got.llama.median_tpot_ms), '', ratio(got.spindle.median_ttft_ms, got.llama.median_ttft_ms), '']);
  }
  if (rows.length) {
    const r0 = got.spindle ?? got.llama;
    table(`(a) concurrent streams: ${r0.num_prompts} requests at concurrency ${r0.max_concurrency}, ${r0.random_input_len}-word prompts, ${r0.random_output_len} output tokens`,
      ['engine', 'ok', 'input tok', 'output tok', 'duration s', 'output tok/s', 'TPOT p50 ms', 'TPOT p99 ms', 'TTFT p50 ms', 'TTFT p99 ms'], rows);
  }
}

// (b) multi-turn chat
{
  const rows = [];
  const got = {};
  let turns = 0;
  let mt = null;
  for (const e of ['spindle', 'spindle-nocache', 'llama']) {
    const r = readJson(`b-${e}.json`);
    if (!r) continue;
    got[e] = r;
    mt = r.multi_turn;
    turns = Math.max(turns, r.mean_ttft_ms_by_turn.length);
  }
  for (const [e, r] of Object.entries(got)) {
    const [computed, reused] = promptCounters('b', e);
    checkCounters('b', e, r, computed, reused);
    noteEngineTime('b', e, r);
    const byTurn = Array.from({ length: turns }, (_, t) => f(r.mean_ttft_ms_by_turn[t], 0));
    rows.push([NAMES[e], reqs(r), ...byTurn, `**${f(r.mean_ttft_ms_later_turns, 0)}**`, f(r.duration), r.total_input_tokens,
      computed ?? '-', reused ?? '-']);
  }
  if (rows.length) {
    if (!markdown) for (const row of rows) row[2 + turns] = row[2 + turns].replace(/\*/g, '');
    const header = ['engine', 'ok', ...Array.from({ length: turns }, (_, t) => `turn ${t + 1} ms`), `turns 2-${turns} ms`,
      'duration s', 'prompt tok (usage)', 'prompt tok computed', 'reused'];
    table(`(b) multi-turn chat: ${mt.conversations} conversations x ${mt.turns} turns, ${mt.systemLen}-word shared system prompt, ${mt.userLen}-word user messages, ${mt.output_len}-token answers; mean TTFT per turn`, header, rows);
    const later = (e) => got[e]?.mean_ttft_ms_later_turns;
    const lines = [];
    if (got.spindle && got['spindle-nocache']) lines.push(`Spindle turns 2-${turns}: cache off / cache on = ${ratio(later('spindle-nocache'), later('spindle'))}`);
    if (got.spindle && got.llama) lines.push(`turns 2-${turns}: llama-server / Spindle (cache on) = ${ratio(later('llama'), later('spindle'))}`);
    if (got['spindle-nocache'] && got.llama) lines.push(`turns 2-${turns}: llama-server / Spindle (cache off) = ${ratio(later('llama'), later('spindle-nocache'))}`);
    console.log(lines.map((l) => (markdown ? `- ${l}` : l)).join('\n') + '\n');
  }
}

// (c) prefill-heavy
{
  const rows = [];
  const got = {};
  for (const e of ['spindle', 'llama']) {
    const r = readJson(`c-${e}.json`);
    if (!r) continue;
    got[e] = r;
    const [computed, reused] = promptCounters('c', e);
    checkCounters('c', e, r, computed, reused);
    noteEngineTime('c', e, r);
    rows.push([NAMES[e], reqs(r), r.total_input_tokens, f(r.median_ttft_ms, 0), f(r.mean_ttft_ms, 0), f(r.p90_ttft_ms, 0),
      f(r.p99_ttft_ms, 0), f(r.duration), f(r.total_input_tokens / r.duration), computed ?? '-', reused ?? '-']);
  }
  if (got.spindle && got.llama) {
    rows.push(['llama-server / Spindle', '', '', ratio(got.llama.median_ttft_ms, got.spindle.median_ttft_ms),
      ratio(got.llama.mean_ttft_ms, got.spindle.mean_ttft_ms), '', '', ratio(got.llama.duration, got.spindle.duration), '', '', '']);
  }
  if (rows.length) {
    const r0 = got.spindle ?? got.llama;
    table(`(c) prefill-heavy: ${r0.num_prompts} requests at concurrency ${r0.max_concurrency}, ${r0.random_input_len}-word prompts, ${r0.random_output_len} output tokens`,
      ['engine', 'ok', 'input tok', 'TTFT p50 ms', 'TTFT mean ms', 'TTFT p90 ms', 'TTFT p99 ms', 'duration s', 'input tok/s', 'prompt tok computed', 'reused'], rows);
  }
}

if (engineLines.length) console.log(`${engineLines.join('\n')}\n`);
if (foreign.length) {
  console.log(`WARNING: server counters do not match the benchmark's requests (another client on the port, or recomputation):\n${foreign.map((l) => `  ${l}`).join('\n')}`);
}
