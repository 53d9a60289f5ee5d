// vLLM's and SGLang's launch-line flags beyond Spindle's own, so that `vllm serve ...` / `python -m
// sglang.launch_server ...` lines work as typed (docs/api.md, "Launch lines from vLLM and SGLang").
// Invariant: every flag here either does what it does there (--chat-template, --seed, --kv-cache-dtype,
// --generation-config / --sampling-defaults, --enforce-eager, --log-level, --disable-log-requests, --allowed-origins), or is accepted only where it can mean
// nothing but what Spindle does anyway (a startup note says so when the flag asks for something), or is refused
// with the values that are allowed (tensor parallelism over several GPUs, fp8_inc / fp4 caches, another quantization
// method): none is silently dropped while asking for something else.
import { existsSync, readFileSync, statSync } from 'node:fs';
import type { EngineOptionsInput } from '../engine-options.js';

export const COMPAT_OPTIONS = {
  'chat-template': { type: 'string' },
  seed: { type: 'string' }, 'random-seed': { type: 'string' },
  'kv-cache-dtype': { type: 'string' },
  'enforce-eager': { type: 'boolean' }, 'disable-cuda-graph': { type: 'boolean' },
  'log-level': { type: 'string' }, 'uvicorn-log-level': { type: 'string' }, 'log-level-http': { type: 'string' },
  'disable-log-requests': { type: 'boolean' }, 'disable-uvicorn-access-log': { type: 'boolean' },
  'enable-log-requests': { type: 'boolean' }, 'disable-log-stats': { type: 'boolean' },
  'allowed-origins': { type: 'string' },
  'tensor-parallel-size': { type: 'string' }, 'tp-size': { type: 'string' }, tp: { type: 'string' },
  'pipeline-parallel-size': { type: 'string' }, 'pp-size': { type: 'string' },
  'data-parallel-size': { type: 'string' }, 'dp-size': { type: 'string' }, dp: { type: 'string' },
  quantization: { type: 'string' }, 'load-format': { type: 'string' },
  'generation-config': { type: 'string' }, 'sampling-defaults': { type: 'string' },
  'schedule-policy': { type: 'string' }, 'scheduling-policy': { type: 'string' },
  'enable-auto-tool-choice': { type: 'boolean' }, 'enable-metrics': { type: 'boolean' },
  'disable-fastapi-docs': { type: 'boolean' },
  'trust-remote-code': { type: 'boolean' },
  tokenizer: { type: 'string' }, 'tokenizer-path': { type: 'string' },
  'swap-space': { type: 'string' }, 'stream-interval': { type: 'string' },
  'attention-backend': { type: 'string' }, 'sampling-backend': { type: 'string' },
  'max-cpu-loras': { type: 'string' }, 'lora-dtype': { type: 'string' },
} as const;

// Spellings of one flag (vLLM's and SGLang's): giving two of them is refused, as the serve command's own pairs.
const PARALLEL: readonly (readonly string[])[] = [
  ['tensor-parallel-size', 'tp-size', 'tp'], ['pipeline-parallel-size', 'pp-size'], ['data-parallel-size', 'dp-size', 'dp'],
];
export const COMPAT_PAIRS: Array<[string, string]> = [
  ['seed', 'random-seed'], ['tokenizer', 'tokenizer-path'], ['uvicorn-log-level', 'log-level-http'],
  ['schedule-policy', 'scheduling-policy'], ['disable-log-requests', 'disable-uvicorn-access-log'],
  ['enforce-eager', 'disable-cuda-graph'], ['generation-config', 'sampling-defaults'],
  ...PARALLEL.flatMap((names) => names.flatMap((a, i) => names.slice(i + 1).map((b): [string, string] => [a, b]))),
];

// vLLM's short spellings (argparse takes multi-letter single-dash flags; node's parseArgs does not).
const SHORT: Record<string, string> = {
  '-tp': '--tensor-parallel-size', '-pp': '--pipeline-parallel-size', '-dp': '--data-parallel-size', '-q': '--quantization',
};

/** argv with vLLM's short flags (-tp 2, -q gguf) written out long; nothing after a `--` changes. */
export function expandShortFlags(argv: string[]): string[] {
  const end = argv.indexOf('--');
  return argv.map((a, i) => {
    if (end >= 0 && i > end) return a;
    const eq = a.indexOf('=');
    const flag = eq < 0 ? a : a.slice(0, eq);
    return SHORT[flag] === undefined ? a : SHORT[flag] + (eq < 0 ? '' : a.slice(eq));
  });
}

/** A comma-separated list, trimmed, empty entries dropped (--cors-origins, --allowed-media-domains). */
export function commaList(value: string): string[] {
  return value.split(',').map((o) => o.trim()).filter(Boolean);
}

/** What the compat flags set: engine options and log settings. */
export interface CompatSettings {
  engine: Pick<EngineOptionsInput, 'seed' | 'kvCacheDtype' | 'chatTemplate' | 'generationConfig' | 'enforceEager'>; // checked by normalizeEngineOptions
  logLevel: LogLevel | null; // SGLang's --log-level: the server's own lines
  httpLogLevel: LogLevel | null; // vLLM's --uvicorn-log-level, SGLang's --log-level-http: the request lines
  logRequests: boolean; // false: no per-request lines (errors are still logged)
  corsOrigins: string[] | null; // --allowed-origins; null: not given
  notes: string[];
}

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warning', 'error', 'critical'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

type Values = Record<string, string | string[] | boolean | undefined>;

function logLevel(flag: string, value: string | undefined): LogLevel | null {
  if (value === undefined) return null;
  const l = value.trim().toLowerCase() === 'warn' ? 'warning' : value.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(l)) throw new Error(`--${flag} must be one of ${LOG_LEVELS.join(', ')} (got '${value}')`);
  return l as LogLevel;
}

/**
 * Reads the compat flags (their pairs already checked, COMPAT_PAIRS); throws Error (the caller's flag error) naming
 * a flag whose value is refused. textLog: the default text log, which has no per-request lines.
 */
export function compatSettings(v: Values, runner: boolean, textLog: boolean): CompatSettings {
  const s = (k: string) => v[k] as string | undefined;
  const notes: string[] = [];
  const out: CompatSettings = {
    engine: {}, logLevel: logLevel('log-level', s('log-level')),
    httpLogLevel: logLevel(s('uvicorn-log-level') !== undefined ? 'uvicorn-log-level' : 'log-level-http', s('uvicorn-log-level') ?? s('log-level-http')),
    logRequests: v['disable-log-requests'] !== true && v['disable-uvicorn-access-log'] !== true,
    corsOrigins: null, notes,
  };
  const template = s('chat-template');
  if (template !== undefined) {
    if (runner) throw new Error("--chat-template serves one model; runner mode (--ollama) takes each model's template from the store");
    out.engine.chatTemplate = chatTemplateFrom(template);
  }
  const seed = s('seed') ?? s('random-seed');
  if (seed !== undefined) {
    if (!/^\s*\d+\s*$/.test(seed)) throw new Error(`--${s('seed') !== undefined ? 'seed' : 'random-seed'} must be a whole number (got '${seed}')`);
    out.engine.seed = Number(seed);
  }
  const kv = s('kv-cache-dtype');
  if (kv !== undefined) out.engine.kvCacheDtype = kv.trim().toLowerCase() as EngineOptionsInput['kvCacheDtype'];
  if (v['enforce-eager'] === true || v['disable-cuda-graph'] === true) out.engine.enforceEager = true;
  if (v['enable-log-requests'] === true && textLog) notes.push('--enable-log-requests: a line per request is written with --log-format json (the text log has none)');
  const origins = s('allowed-origins');
  if (origins !== undefined) out.corsOrigins = allowedOrigins(origins);

  for (const names of PARALLEL) {
    const given = names.find((f) => s(f) !== undefined);
    if (given !== undefined && s(given)!.trim() !== '1') {
      const what = names[0].replace('-size', '').replace('-', ' ');
      throw new Error(`--${given} must be 1 (got '${s(given)}'): a Spindle server runs its model on one device, without ${what}ism; run one server per GPU behind a load balancer instead`);
    }
  }
  const quant = s('quantization');
  if (quant !== undefined && quant.trim().toLowerCase() !== 'gguf') {
    throw new Error(`--quantization must be gguf (got '${quant}'): Spindle runs GGUF files, each weight in its file's own type`);
  }
  const format = s('load-format');
  if (format !== undefined && !['auto', 'gguf'].includes(format.trim().toLowerCase())) {
    throw new Error(`--load-format must be auto or gguf (got '${format}'): Spindle loads GGUF files`);
  }
  const generation = s('generation-config');
  if (generation !== undefined) {
    const g = generation.trim().toLowerCase();
    if (g !== 'auto' && g !== 'vllm') {
      throw new Error(`--generation-config must be auto or vllm (got '${generation}'): a GGUF file carries the model's generation config itself (general.sampling.*)`);
    }
    out.engine.generationConfig = g;
  }
  const defaults = s('sampling-defaults');
  if (defaults !== undefined) {
    const d = defaults.trim().toLowerCase();
    if (d !== 'model' && d !== 'openai') throw new Error(`--sampling-defaults must be model or openai (got '${defaults}')`);
    out.engine.generationConfig = d === 'model' ? 'auto' : 'vllm';
  }
  const policyFlag = s('schedule-policy') !== undefined ? 'schedule-policy' : 'scheduling-policy';
  const policy = s(policyFlag);
  if (policy !== undefined && policy.trim().toLowerCase() !== 'fcfs') {
    throw new Error(`--${policyFlag} must be fcfs (got '${policy}'): Spindle schedules first come, first served (sharing cached prefixes in any order)`);
  }

  if (v['trust-remote-code'] === true) notes.push('--trust-remote-code has no effect: a GGUF file holds no code to run');
  const tokenizer = s('tokenizer') ?? s('tokenizer-path');
  if (tokenizer !== undefined) notes.push(`--tokenizer ${tokenizer} has no effect: the GGUF file's own tokenizer is used (as llama.cpp does), which is the model's`);
  if (s('swap-space') !== undefined) notes.push('--swap-space has no effect: a preempted sequence is recomputed, never swapped to host memory');
  if (s('stream-interval') !== undefined) notes.push('--stream-interval has no effect: streams send what each engine step made, merged per event-loop turn');
  for (const f of ['attention-backend', 'sampling-backend']) {
    if (s(f) !== undefined) notes.push(`--${f} has no effect: Spindle has one ${f.split('-')[0]} implementation per device`);
  }
  for (const f of ['max-cpu-loras', 'lora-dtype']) {
    if (s(f) !== undefined) notes.push(`--${f} has no effect here (every adapter stays loaded in its file's type); accepted for vLLM compatibility`);
  }
  // --enable-auto-tool-choice (tool_choice 'auto' is always on), --enable-metrics (/metrics is always served),
  // --disable-log-stats (no periodic stats lines are written) and --disable-fastapi-docs (no /docs route) ask for
  // what Spindle does: accepted without a note.
  return out;
}

// vLLM's --chat-template: "the file path to the chat template, or the template in single-line form" (whose escapes,
// \n and the like, vLLM decodes). A file must hold a Jinja template: SGLang's JSON conversation templates and named
// built-ins are refused. normalizeEngineOptions checks that the text parses.
function chatTemplateFrom(value: string): string {
  const isFile = existsSync(value) && statSync(value).isFile();
  if (isFile && /\.json$/i.test(value)) {
    throw new Error(`--chat-template: ${value} is a JSON conversation template (SGLang's); give a Jinja template (.jinja) or its text`);
  }
  const text = isFile ? readFileSync(value, 'utf8') : decodeEscapes(value);
  if (!/[{][{%]/.test(text)) {
    throw new Error(isFile ? `--chat-template: ${value} holds no Jinja template ({{ ... }} / {% ... %})`
      : `--chat-template: no file '${value}', and the value is no Jinja template either (give a path or the template text)`);
  }
  return text;
}

// Python's unicode_escape for the escapes a single-line template uses: \n, \t, \r, \\, \' and \".
function decodeEscapes(s: string): string {
  return s.replace(/\\([ntr\\'"])/g, (_, c: string) => ({ n: '\n', t: '\t', r: '\r' } as Record<string, string>)[c] ?? c);
}

// vLLM's --allowed-origins: a JSON list of origins (its default ["*"]); a comma-separated list is taken too.
function allowedOrigins(value: string): string[] {
  const t = value.trim();
  if (!t.startsWith('[')) return commaList(t);
  let list: unknown;
  try {
    list = JSON.parse(t);
  } catch {
    throw new Error(`--allowed-origins must be a JSON list such as '["https://app.example.com"]' (got '${value}')`);
  }
  if (!Array.isArray(list) || !list.every((o) => typeof o === 'string')) {
    throw new Error(`--allowed-origins must be a JSON list of origin strings (got '${value}')`);
  }
  return list.map((o: string) => o.trim()).filter(Boolean);
}
