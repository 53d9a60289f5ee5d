// `spindle serve [model.gguf] [flags]`: the OpenAI- and Ollama-compatible HTTP server.
// Flags as in docs/api.md (vLLM spelling, SGLang alias); without a model, the built-in demo model (random weights),
// or with --ollama or SPINDLE_HOST set, runner mode: the store's models, loaded on demand (lib/server/runner.ts),
// on 127.0.0.1:11434 (SPINDLE_HOST's address; --host / --port win).
// Environment variables fill in flags that are not given (serve-env.ts: a flag wins, then the variable, then the
// default). Logs are text on stderr, or JSON lines on stdout with --log-format json (log-format.ts).
// Invariant: main() returns an exit code and never throws: 0 after a graceful shutdown, 1 when the server
// could not start (bad model, port in use), 2 for bad flags.
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import type { CommandIo } from '../cli/io.js';
import { joinNegativeValues } from '../cli/negative-values.js';
import { DEMO_MODEL_NAME, demoModel } from '../demo-model.js';
import { normalizeEngineOptions, type EngineOptions, type EngineOptionsInput, type LoraModuleInput } from '../engine-options.js';
import { limitRefusal } from '../native.js';
import { TOOL_CALL_PARSER_NAMES } from '../tools/index.js';
import { REASONING_PARSER_NAMES } from '../reasoning/index.js';
import { shutdownOnSignals, startServer, type ServeOptions } from './serve.js';
import { parseModelRef } from '../models/ref.js';
import { resolveModel } from '../models/resolve.js';
import { progressPrinter } from '../cli/models/progress.js';
import { userStore } from '../models/store.js';
import { OLLAMA_PORT, parseHostEnv } from './host-env.js';
import { DEFAULT_KEEP_ALIVE_MS, parseKeepAliveFlag } from './keep-alive.js';
import { serveLog, type LogFormat, type ServeLog } from './log-format.js';
import { listening, readyLine } from './serve-lines.js';
import { apiKeysFrom, logFormatFrom, modelFrom, rootPathFrom } from './serve-env.js';
import { modelSamplingFields } from './model-use.js';
import { ollamaEnv } from './ollama-env.js';
import { COMPAT_OPTIONS, COMPAT_PAIRS, commaList, compatSettings, expandShortFlags, type LogLevel } from './launch-compat.js';

export const HELP = `Usage: spindle serve [model.gguf] [flags]
       spindle serve --ollama [flags]

OpenAI-compatible (/v1/chat/completions, /v1/completions, /v1/models) and Ollama-compatible (/api/*) server.
Without a model it serves a built-in demo model: a small Llama with the real Llama 3 tokenizer and random
weights (fluent-looking nonsense), generated once and cached in $SPINDLE_CACHE_DIR or ~/.cache/spindle.

Runner mode (--ollama, or SPINDLE_HOST set, and no model): a local model runner as Ollama's server. Requests name
models of the store (SPINDLE_HOME), loaded on first use and unloaded after their keep-alive; /api/pull, /api/create,
/api/copy, /api/delete and /api/ps work. Listens on 127.0.0.1:11434, or SPINDLE_HOST ([scheme://]host[:port],
as OLLAMA_HOST), unless --host / --port say otherwise.
  --ollama                            runner mode
  --max-loaded-models N               models loaded at once (default 1); loading another unloads the least
                                      recently used one once its requests have finished
  --keep-alive DURATION               how long a model stays loaded after its last request (default 5m; Go
                                      durations such as 30s, 1h, or seconds; 0 unloads at once; negative: forever);
                                      a request's keep_alive wins

Flags (vLLM spelling first, SGLang alias after):
  --model, --model-path MODEL         the model (or give it as the first argument): a .gguf path, a store
                                      name, or a hub reference hf.co/<org>/<repo>[:<quant>] (pulled first)
  --host HOST                         bind address (default 127.0.0.1)
  --port N                            port (default 8000)
  --api-key KEY                       require \`Authorization: Bearer KEY\` or \`Key KEY\` (repeatable); /health
                                      stays open
  --root-path PATH                    every route also answers under PATH, such as /org_id/app_id (for platforms
                                      that forward {base}/org_id/app_id/v1/... unstripped); the root keeps answering
  --log-format text|json              text lines on stderr (default), or JSON lines on stdout with a request id
                                      (reqId, from X-Request-Id when sent) per request line
  --skip-server-warmup                no warm-up generation at start (by default one short generation runs after
                                      the load and before /health turns 200, so the first request pays no
                                      one-time cost)
  --served-model-name NAME            model name(s) clients use (repeatable; default: the file name)
  --strict-model-name                 answer 404 to a request whose \`model\` is not a served name (as vLLM);
                                      by default any name is accepted (LM Studio clients send 'local-model')
  --max-model-len, --context-length N context length (default: the model's)
  --max-num-seqs, --max-running-requests N   sequences running at once (default 256)
  --max-num-batched-tokens N          tokens per engine step
  --chunked-prefill-size N            prompt chunk per step (-1: never split a prompt; negative numbers may
                                      follow a flag as their own word)
  --enable-prefix-caching             reuse the KV of prompt prefixes seen before (default on; LFM2 models on
                                      CUDA run without it for now)
  --no-enable-prefix-caching, --disable-radix-cache   turn it off
  --speculative-config JSON           speculative decoding for every request, vLLM's spelling:
                                      '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}'
                                      (n-gram prompt lookup; requests' "prediction" drafts in any case)
  --speculative-algorithm NGRAM, --speculative-num-draft-tokens N   the same, SGLang's spelling
  --speculative-model FILE, --speculative-draft-model-path FILE   a draft model (a smaller GGUF with the
                                      same tokenizer) proposes the drafts; --num-speculative-tokens N
  --device auto|cpu|cuda              where the model runs (default auto: CUDA when a usable GPU and driver
                                      are present and this build has CUDA, else the CPU)
  --gpu-memory-utilization, --mem-fraction-static F   on a GPU, the fraction of the GPU's memory Spindle may
                                      use (weights + KV cache, as vLLM; default 0.9); on the CPU, the
                                      fraction of free memory for the KV cache (default 0.25, at most 2 GiB)
  --dtype auto|float16|bfloat16|float32   KV cache type (half = float16): float16 / bfloat16 keep it in
                                      16 bits (twice the tokens per byte, half the bytes attention reads),
                                      on a GPU and on the CPU; auto is float16 (llama.cpp's default;
                                      a line says which at startup);
                                      activations are float32, weights keep their GGUF type
  --kv-cache-dtype auto|float16|bfloat16|float32|q8_0|q4_0|fp8|fp8_e4m3|fp8_e5m2
                                      the KV cache type alone (fp16 / bf16 too; auto: as --dtype says);
                                      q8_0 / q4_0 (llama.cpp's, 34 / 18 bytes per 32 values) on the CPU for
                                      head dims that are multiples of 32, else float16; fp8 (= fp8_e4m3)
                                      and fp8_e5m2: a byte per value (vLLM's / SGLang's, scale 1)
  --pooling mean|cls|last             how /v1/embeddings and /api/embed pool the hidden states (llama.cpp's
                                      --pooling; default: the model file's pooling type, else last)
  --threads N                         engine threads (default ${availableParallelism()})
  --max-queued-requests N             sequences waiting beyond the running ones before 429 (default 256)
  --cors-origins LIST                 comma-separated origins allowed by CORS (default: CORS off)
  --no-ui                             no web UI at / (by default the chat app and server panel are served there)
  --drain-timeout SECONDS             on SIGTERM, time in-flight requests get to finish (default 30)
  --tool-call-parser NAME             how the model writes tool calls: hermes (qwen25, qwen), lfm2, pythonic,
                                      llama3_json (llama3, llama4_json); default: detected from the chat template
  --reasoning-parser NAME             how a reasoning model marks its thinking: qwen3 (qwen3-thinking),
                                      deepseek_r1 (deepseek-r1), none; default: detected from the chat template
  --mmproj FILE                       the vision projector (mmproj GGUF) of a vision-language model; by default
                                      a single matching mmproj*.gguf beside the model is used
  --no-mmproj                         text only, even when an mmproj file is beside the model
  --image-min-tokens N, --image-max-tokens N   image token limits (default: the projector's, 64 and 256)
  --allowed-local-media-path DIR      image URLs may name local files (file:// or a path) inside DIR
                                      (default: none)
  --allowed-media-domains LIST        comma-separated hosts http(s) image URLs may name (default: any host;
                                      link-local and cloud-metadata addresses are always refused)
  --lora-modules NAME=PATH ...        LoRA adapters (llama.cpp's GGUF adapter files, made with its
                                      convert_lora_to_gguf.py) served beside the model: a request whose model
                                      is NAME runs with that adapter (vLLM's flag; also '{"name":..,"path":..}';
                                      SGLang's --lora-paths is the same); adapters mix in one batch
  --enable-lora                       accepted for vLLM compatibility (adapters are on with --lora-modules)
  --max-lora-rank N, --max-loras N    accepted for vLLM compatibility; no effect (any rank, every adapter loaded)
  --enable-torch-compile              accepted for SGLang compatibility; no effect here
  --incremental-streaming-output      SGLang's: streamed /generate frames carry only what they add (text,
                                      output_ids, output logprobs), not the whole answer so far
  --chat-template FILE|TEXT           a Jinja chat template used instead of the GGUF's (a file, or the
                                      template itself), checked at startup
  --seed, --random-seed N             requests without a seed draw theirs from a generator started at N, so
                                      the same requests in the same order sample the same tokens
  --generation-config auto|vllm, --sampling-defaults model|openai   auto / model (default): the model maker's
                                      recommended sampling (the GGUF's general.sampling.*: temperature, top_p,
                                      top_k, min_p, repetition penalty) is the default of what a request leaves
                                      out (the /v1 routes; not SGLang's /generate, as SGLang); vllm / openai:
                                      the API's own defaults
  --enforce-eager, --disable-cuda-graph   no CUDA graphs (each decode step launches its kernels)
  --log-level L                       SGLang's: trace, debug, info (default), warning, error, critical; the
                                      server's own lines below L are not written (errors always are)
  --uvicorn-log-level, --log-level-http L   the per-request lines' level (--log-format json)
  --disable-log-requests, --disable-uvicorn-access-log   no per-request lines (errors are still logged)
  --allowed-origins JSON              vLLM's CORS list ('["*"]'), the same as --cors-origins
  Accepted as in vLLM / SGLang where they can mean only what Spindle does (a note says so when they ask for
  something): --enable-auto-tool-choice, --enable-metrics, --disable-log-stats, --disable-fastapi-docs,
  --enable-log-requests, --scheduling-policy fcfs,
  --trust-remote-code, --tokenizer / --tokenizer-path, --swap-space,
  --stream-interval, --attention-backend, --sampling-backend, --max-cpu-loras, --lora-dtype, --quantization gguf,
  --load-format auto|gguf, --schedule-policy fcfs, and -tp / --tensor-parallel-size / --tp-size / --tp,
  -pp / --pipeline-parallel-size, -dp / --data-parallel-size / --dp-size / --dp at 1 (one device per server)
  -h, --help                          this text

Environment (a flag on the command line wins over its variable; a variable wins over the default):
  SPINDLE_MODEL                       the model when none is given (not with --ollama)
  SPINDLE_API_KEY                     --api-key (one key; vLLM's VLLM_API_KEY when this is not set)
  SPINDLE_ROOT_PATH                   --root-path
  SPINDLE_LOG_FORMAT                  --log-format
  SPINDLE_HOST                        [scheme://]host[:port] to listen on (and runner mode when no model is given)
  SPINDLE_ALLOW_RUNTIME_LORA_UPDATING 'true' (or vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING): POST /v1/load_lora_adapter
                                      and /v1/unload_lora_adapter change the LoRA adapters of the running server
  OLLAMA_MODELS                       Ollama's models directory (e.g. ~/.ollama/models): the models \`ollama pull\`
                                      downloaded are served too, in place and read-only, with their templates
  Runner mode also reads Ollama's server variables where the flags are absent: OLLAMA_HOST (when SPINDLE_HOST is
  not set), OLLAMA_KEEP_ALIVE, OLLAMA_MAX_LOADED_MODELS, OLLAMA_NUM_PARALLEL (--max-num-seqs), OLLAMA_MAX_QUEUE,
  OLLAMA_CONTEXT_LENGTH (--max-model-len, capped at each model's trained context), OLLAMA_ORIGINS (--cors-origins,
  plus Ollama's default origins), OLLAMA_KV_CACHE_TYPE (f16, q8_0, q4_0; q8_0 and q4_0 are float16 on a GPU and
  for head dims that are not multiples of 32)
`;

class FlagError extends Error {}

const PAIRS: Array<[string, string]> = [
  ['model', 'model-path'], ['max-model-len', 'context-length'], ['max-num-seqs', 'max-running-requests'],
  ['gpu-memory-utilization', 'mem-fraction-static'], ['cors-origins', 'allowed-origins'], ...COMPAT_PAIRS,
];

const DEVICES: readonly string[] = ['auto', 'cpu', 'cuda'];

const OPTIONS = {
  model: { type: 'string' }, 'model-path': { type: 'string' }, host: { type: 'string' }, port: { type: 'string' },
  'api-key': { type: 'string', multiple: true }, 'served-model-name': { type: 'string', multiple: true },
  'max-model-len': { type: 'string' }, 'context-length': { type: 'string' }, 'max-num-seqs': { type: 'string' },
  'max-running-requests': { type: 'string' }, 'max-num-batched-tokens': { type: 'string' },
  'chunked-prefill-size': { type: 'string' }, 'gpu-memory-utilization': { type: 'string' },
  'mem-fraction-static': { type: 'string' }, dtype: { type: 'string' }, device: { type: 'string' },
  pooling: { type: 'string' },
  threads: { type: 'string' }, 'max-queued-requests': { type: 'string' }, 'cors-origins': { type: 'string' }, 'drain-timeout': { type: 'string' },
  'tool-call-parser': { type: 'string' }, 'reasoning-parser': { type: 'string' }, 'enable-torch-compile': { type: 'boolean' }, 'strict-model-name': { type: 'boolean' },
  mmproj: { type: 'string' }, 'no-mmproj': { type: 'boolean' }, 'image-min-tokens': { type: 'string' },
  ollama: { type: 'boolean' }, 'max-loaded-models': { type: 'string' }, 'keep-alive': { type: 'string' },
  'image-max-tokens': { type: 'string' }, 'allowed-local-media-path': { type: 'string' }, 'allowed-media-domains': { type: 'string' },
  'enable-prefix-caching': { type: 'boolean' }, 'no-enable-prefix-caching': { type: 'boolean' },
  'disable-radix-cache': { type: 'boolean' },
  'speculative-config': { type: 'string' }, 'speculative-algorithm': { type: 'string' },
  'speculative-num-draft-tokens': { type: 'string' }, 'speculative-model': { type: 'string' },
  'speculative-draft-model-path': { type: 'string' }, 'num-speculative-tokens': { type: 'string' },
  'no-ui': { type: 'boolean' }, 'root-path': { type: 'string' }, 'log-format': { type: 'string' },
  'skip-server-warmup': { type: 'boolean' }, 'incremental-streaming-output': { type: 'boolean' },
  'lora-modules': { type: 'string', multiple: true }, 'lora-paths': { type: 'string', multiple: true },
  'enable-lora': { type: 'boolean' }, 'max-lora-rank': { type: 'string' }, 'max-loras': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  ...COMPAT_OPTIONS, // vLLM's and SGLang's other launch-line flags (launch-compat.ts)
} as const;

// An engine option's flag: an integer the engine's limits table allows (the same check and range text as every
// other surface, lib/engine-options.ts).
function engineInt(flag: string, limit: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = /^-?\d+$/.test(v.trim()) ? Number(v) : NaN;
  const refusal = limitRefusal(limit, n);
  if (refusal !== null) throw new FlagError(`--${flag} must be ${refusal} (got '${v}')`);
  return n;
}

function int(flag: string, v: string | undefined, lo: number, hi: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^-?\d+$/.test(v.trim()) || n < lo || n > hi) throw new FlagError(`--${flag} must be an integer in [${lo}, ${hi}] (got '${v}')`);
  return n;
}

export interface ServeConfig {
  model: string | null; // null: the demo model (or runner mode)
  /** Runner mode (--ollama or SPINDLE_HOST, no model): the store's models on demand. */
  runner: { maxLoaded: number; keepAliveMs: number } | null;
  serve: Omit<ServeOptions, 'engine' | 'servedModelNames'>;
  engine: EngineOptionsInput;
  servedModelNames: string[] | null;
  notes: string[]; // accepted flags without effect
  logFormat: LogFormat;
  logLevel: LogLevel | null; // SGLang's --log-level: the server's own lines; null: info
  httpLogLevel: LogLevel | null; // vLLM's --uvicorn-log-level, SGLang's --log-level-http: the request lines (json)
}

/** Runner mode: no model (from the command line or SPINDLE_MODEL), with --ollama or SPINDLE_HOST set. */
function isRunnerMode(v: Record<string, string | string[] | boolean | undefined>, model: string | undefined,
  env: NodeJS.ProcessEnv): boolean {
  return model === undefined && (v.ollama === true || (env.SPINDLE_HOST ?? '') !== '');
}

/** Runner mode's settings, or null (single-model mode); refuses the flags that belong to the other mode. */
function runnerConfig(v: Record<string, string | string[] | boolean | undefined>, model: string | undefined,
  env: NodeJS.ProcessEnv): ServeConfig['runner'] {
  const s = (k: string) => v[k] as string | undefined;
  if (v.ollama && model !== undefined) {
    throw new FlagError(`--ollama serves the store's models on demand; give no model (got ${model}), or drop --ollama to serve one model`);
  }
  if (!isRunnerMode(v, model, env)) {
    for (const f of ['max-loaded-models', 'keep-alive']) if (v[f] !== undefined) throw new FlagError(`--${f} needs runner mode (--ollama, and no model)`);
    return null;
  }
  for (const f of ['served-model-name', 'strict-model-name', 'mmproj', 'lora-modules', 'lora-paths']) {
    if (v[f] !== undefined) throw new FlagError(`--${f} serves one model; runner mode (--ollama) serves the store's models by name`);
  }
  let keepAliveMs = DEFAULT_KEEP_ALIVE_MS;
  const keep = s('keep-alive');
  if (keep !== undefined) {
    try {
      keepAliveMs = parseKeepAliveFlag(keep);
    } catch (e) {
      throw new FlagError((e as Error).message);
    }
  }
  return { maxLoaded: int('max-loaded-models', s('max-loaded-models'), 1, 64) ?? 1, keepAliveMs };
}

/**
 * Where to listen: --host / --port, else SPINDLE_HOST's address (runner mode: else OLLAMA_HOST's, ollamaHost), else
 * 127.0.0.1 and 8000 (runner mode: 11434).
 */
function address(host: string | undefined, port: number | undefined, runner: boolean, env: NodeJS.ProcessEnv,
  ollamaHost: string | null = null): { host: string; port: number } {
  let fromEnv: { host: string; port: number } | null = null;
  const [name, value] = (env.SPINDLE_HOST ?? '') !== '' ? ['SPINDLE_HOST', env.SPINDLE_HOST!] : ['OLLAMA_HOST', ollamaHost ?? ''];
  if (value !== '') {
    try {
      fromEnv = parseHostEnv(value);
    } catch (e) {
      throw new FlagError((e as Error).message.replace(/^SPINDLE_HOST/, name));
    }
  }
  return { host: host ?? fromEnv?.host ?? '127.0.0.1', port: port ?? fromEnv?.port ?? (runner ? OLLAMA_PORT : 8000) };
}

// vLLM's --lora-modules takes several words (nargs '+'): every following word that is an adapter (name=path or a
// JSON object) becomes its own --lora-modules, so parseArgs sees one value per flag.
function spreadLoraModules(argv: string[]): string[] {
  const out: string[] = [];
  let listFlag: string | null = null; // the list flag whose words are being read
  let taken = 0; // words it has taken
  for (const a of argv) {
    const flag = /^--lora-(modules|paths)(=|$)/.exec(a);
    if (flag) {
      listFlag = `--lora-${flag[1]}`;
      taken = flag[2] === '=' ? 1 : 0; // --lora-modules=a=x carries its first word
    } else if (listFlag !== null && (taken === 0 || (!a.startsWith('-') && (a.includes('=') || a.trim().startsWith('{'))))) {
      if (taken++ > 0) out.push(listFlag);
    } else {
      listFlag = null;
    }
    out.push(a);
  }
  return out;
}

/** --lora-modules / --lora-paths entries: 'name=path' or vLLM's JSON form. */
function loraModulesFrom(entries: string[] | undefined): LoraModuleInput[] | undefined {
  if (entries === undefined) return undefined;
  return entries.map((e): LoraModuleInput => {
    if (!e.trim().startsWith('{')) return e; // name=path, checked by normalizeEngineOptions
    let o: unknown;
    try {
      o = JSON.parse(e);
    } catch {
      throw new FlagError(`--lora-modules / --lora-paths: '${e}' is neither name=path nor a JSON object such as '{"name":"sql","path":"sql.gguf"}'`);
    }
    return o as LoraModuleInput;
  });
}

export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ServeConfig | 'help' {
  let parsed;
  try {
    parsed = parseArgs({ args: joinNegativeValues(spreadLoraModules(expandShortFlags(argv)), OPTIONS), options: OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    throw new FlagError((e as Error).message);
  }
  let v = parsed.values as Record<string, string | string[] | boolean | undefined>;
  if (v.help) return 'help';
  for (const [a, b] of PAIRS) if (v[a] !== undefined && v[b] !== undefined) throw new FlagError(`--${a} and --${b} are the same flag; give one`);
  if (parsed.positionals.length > 1) throw new FlagError(`one model please (got ${parsed.positionals.join(', ')})`);
  const flagModel = (v.model ?? v['model-path']) as string | undefined;
  if (flagModel !== undefined && parsed.positionals.length > 0) throw new FlagError('give the model as an argument or with --model, not both');
  const model = modelFrom(flagModel ?? parsed.positionals[0], v.ollama === true, env);
  const notes: string[] = [];
  let ollamaHost: string | null = null;
  if (isRunnerMode(v, model, env)) {
    // runner mode, the drop-in for `ollama serve`: Ollama's variables fill in the flags a command line leaves out
    let oe;
    try {
      oe = ollamaEnv(v, env);
    } catch (e) {
      throw new FlagError((e as Error).message);
    }
    v = oe.values;
    ollamaHost = oe.host;
    notes.push(...oe.notes);
    if (oe.applied.length > 0) notes.push(`Ollama's environment applies: ${oe.applied.join(', ')}`);
  }
  const s = (k: string) => v[k] as string | undefined;
  const fraction = s('gpu-memory-utilization') ?? s('mem-fraction-static');
  const kv = fraction === undefined ? undefined : Number(fraction);
  if (kv !== undefined && !(kv > 0 && kv <= 1)) throw new FlagError(`--gpu-memory-utilization must be a fraction in (0, 1] (got '${fraction}')`);
  const device = s('device');
  if (device !== undefined && !DEVICES.includes(device)) throw new FlagError(`--device must be one of ${DEVICES.join(', ')} (got '${device}')`);
  for (const f of ['max-lora-rank', 'max-loras']) {
    if (v[f] !== undefined) notes.push(`--${f} has no effect here (adapters of any rank load, all of them at start); accepted for vLLM compatibility`);
  }
  const loraModules = [...(v['lora-modules'] as string[] | undefined ?? []), ...(v['lora-paths'] as string[] | undefined ?? [])];
  if (v['enable-torch-compile']) notes.push('--enable-torch-compile has no effect here (no torch); accepted for SGLang compatibility');
  const toolParser = s('tool-call-parser');
  if (toolParser !== undefined && !TOOL_CALL_PARSER_NAMES.includes(toolParser.trim().toLowerCase())) {
    throw new FlagError(`--tool-call-parser must be one of ${TOOL_CALL_PARSER_NAMES.join(', ')} (got '${toolParser}')`);
  }
  const reasoningParser = s('reasoning-parser');
  if (reasoningParser !== undefined && !REASONING_PARSER_NAMES.includes(reasoningParser.trim().toLowerCase())) {
    throw new FlagError(`--reasoning-parser must be one of ${REASONING_PARSER_NAMES.join(', ')} (got '${reasoningParser}')`);
  }
  const drain = int('drain-timeout', s('drain-timeout'), 0, 3600);
  if (v['no-mmproj'] && s('mmproj') !== undefined) throw new FlagError('--mmproj and --no-mmproj contradict each other; give one');
  const cacheOff = v['no-enable-prefix-caching'] === true || v['disable-radix-cache'] === true;
  if (cacheOff && v['enable-prefix-caching'] === true) {
    throw new FlagError('--enable-prefix-caching and --no-enable-prefix-caching / --disable-radix-cache contradict each other; give one');
  }
  const draftModel = s('speculative-model') ?? s('speculative-draft-model-path');
  const speculative = speculativeFlags(s('speculative-config'), s('speculative-algorithm'),
    s('speculative-num-draft-tokens') ?? s('num-speculative-tokens'), draftModel);
  const domains = s('allowed-media-domains');
  const cors = s('cors-origins');
  const runner = runnerConfig(v, model, env);
  const logFormat = logFormatFrom(s('log-format'), env);
  let compat;
  try {
    compat = compatSettings(v, runner !== null, logFormat === 'text');
  } catch (e) {
    throw new FlagError((e as Error).message);
  }
  notes.push(...compat.notes);
  const listen = address(s('host'), int('port', s('port'), 0, 65535), runner !== null, env, ollamaHost);
  return {
    model: model ?? null,
    runner,
    serve: {
      host: listen.host,
      port: listen.port,
      apiKeys: apiKeysFrom(v['api-key'] as string[] | undefined, env),
      rootPath: rootPathFrom(s('root-path'), env),
      warmup: v['skip-server-warmup'] !== true,
      maxQueuedRequests: int('max-queued-requests', s('max-queued-requests'), 0, 1 << 20) ?? 256,
      corsOrigins: compat.corsOrigins ?? (cors === undefined ? [] : commaList(cors)),
      logRequests: compat.logRequests,
      drainTimeoutMs: drain === undefined ? undefined : drain * 1000,
      strictModelName: v['strict-model-name'] === true,
      // vLLM's switch for /v1/load_lora_adapter and /v1/unload_lora_adapter ('1' or 'true', as vLLM reads it)
      allowRuntimeLoraUpdating: ['1', 'true'].includes((env.SPINDLE_ALLOW_RUNTIME_LORA_UPDATING || env.VLLM_ALLOW_RUNTIME_LORA_UPDATING || '').trim().toLowerCase()),
      toolCallParser: toolParser,
      reasoningParser,
      ui: v['no-ui'] !== true,
      incrementalStreamingOutput: v['incremental-streaming-output'] === true,
    },
    engine: {
      maxModelLen: engineInt('max-model-len', 'maxModelLen', s('max-model-len') ?? s('context-length')),
      maxNumSeqs: engineInt('max-num-seqs', 'maxNumSeqs', s('max-num-seqs') ?? s('max-running-requests')),
      maxNumBatchedTokens: engineInt('max-num-batched-tokens', 'maxNumBatchedTokens', s('max-num-batched-tokens')),
      chunkedPrefillSize: engineInt('chunked-prefill-size', 'chunkedPrefillSize', s('chunked-prefill-size')),
      kvCacheMemory: kv,
      threads: engineInt('threads', 'threads', s('threads')),
      dtype: s('dtype') as EngineOptionsInput['dtype'], // checked by normalizeEngineOptions
      pooling: s('pooling') as EngineOptionsInput['pooling'], // checked by normalizeEngineOptions
      device: device as EngineOptionsInput['device'],
      mmproj: v['no-mmproj'] ? false : s('mmproj'),
      imageMinTokens: int('image-min-tokens', s('image-min-tokens'), 1, 65536),
      imageMaxTokens: int('image-max-tokens', s('image-max-tokens'), 1, 65536),
      allowedLocalMediaPath: s('allowed-local-media-path'),
      allowedMediaDomains: domains === undefined ? undefined : commaList(domains),
      enablePrefixCaching: cacheOff ? false : undefined,
      speculativeConfig: speculative, // checked by normalizeEngineOptions
      loraModules: loraModulesFrom(loraModules.length > 0 ? loraModules : undefined), // checked by normalizeEngineOptions
      ...compat.engine,
    },
    servedModelNames: (v['served-model-name'] as string[] | undefined) ?? null,
    notes,
    logFormat,
    logLevel: compat.logLevel,
    httpLogLevel: compat.httpLogLevel,
  };
}

// vLLM's --speculative-config JSON, or SGLang's --speculative-algorithm / --speculative-num-draft-tokens.
function speculativeFlags(json: string | undefined, algorithm: string | undefined, draftTokens: string | undefined,
  draftModel: string | undefined): EngineOptionsInput['speculativeConfig'] {
  if (json !== undefined) {
    if (algorithm !== undefined || draftTokens !== undefined || draftModel !== undefined) {
      throw new FlagError('--speculative-config and --speculative-algorithm / --speculative-num-draft-tokens / --speculative-model say the same; give one');
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      throw new FlagError(`--speculative-config must be a JSON object such as '{"method":"ngram","num_speculative_tokens":4}' (got '${json}')`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new FlagError(`--speculative-config must be a JSON object (got '${json}')`);
    }
    return parsed as EngineOptionsInput['speculativeConfig'];
  }
  if (algorithm === undefined && draftTokens === undefined && draftModel === undefined) return undefined;
  return {
    method: algorithm ?? (draftModel !== undefined ? 'draft_model' : 'ngram'),
    model: draftModel,
    numSpeculativeTokens: draftTokens === undefined ? undefined : int('speculative-num-draft-tokens', draftTokens, 1, 64),
  };
}

function defaultName(path: string): string {
  return (path.split(/[\\/]/).pop() ?? path).replace(/\.gguf$/i, '');
}

function seconds(ms: number): string {
  return ms === Infinity ? 'forever' : ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`;
}

/** Runner mode: the store's models, loaded on first use. */
async function serveRunner(cfg: ServeConfig, runner: NonNullable<ServeConfig['runner']>, engine: EngineOptions, io: CommandIo,
  slog: ServeLog): Promise<number> {
  try {
    const store = userStore();
    // as Ollama's server: unused blobs and stale temporary files go at start, unless SPINDLE_NOPRUNE / OLLAMA_NOPRUNE
    if (!process.env.SPINDLE_NOPRUNE && !process.env.OLLAMA_NOPRUNE) {
      const pruned = store.prune();
      if (pruned.blobs + pruned.tmp > 0) {
        slog.info(`pruned ${pruned.blobs} unused blob(s) (${(pruned.bytes / 1e6).toFixed(1)} MB) and ${pruned.tmp} stale temporary file(s) from ${store.blobs}`);
      }
    }
    const server = await startServer({ ...cfg.serve, engine, servedModelNames: [], runner: { store, ...runner }, loggerInstance: slog.requestLogger ?? undefined });
    const ollamaStore = store.ollamaModels === null ? '' : ` and Ollama's store ${store.ollamaModels} (OLLAMA_MODELS, read-only)`;
    slog.info(`runner mode: ${store.list().length} model(s) in the store ${store.home}${ollamaStore}; each loads on first use, ` +
      `at most ${runner.maxLoaded} at once, unloaded ${seconds(runner.keepAliveMs)} after its last request`);
    const base = `${server.url}${cfg.serve.rootPath ?? ''}`;
    const ui = cfg.serve.ui === false ? '' : `; web UI: ${base}/`;
    listening(slog, io, cfg.logFormat, server.url, `Ollama API: ${base}/api; OpenAI-compatible API: ${base}/v1${ui}`);
    return await shutdownOnSignals(server, slog.info);
  } catch (e) {
    slog.error(`could not start: ${(e as Error).message}`);
    return 1;
  }
}

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  let cfg: ServeConfig | 'help';
  let engine;
  try {
    cfg = parseServeArgs(argv);
    if (cfg === 'help') {
      io.stdout.write(HELP);
      return 0;
    }
    engine = normalizeEngineOptions({ ...cfg.engine, model: cfg.model ?? 'demo' }, 'spindle serve');
  } catch (e) {
    io.stderr.write(`spindle serve: ${(e as Error).message}\n\n${HELP}\n`);
    return 2;
  }
  const slog = serveLog(cfg.logFormat, io.stdout, io.stderr, { level: cfg.logLevel ?? 'info', httpLevel: cfg.httpLogLevel ?? undefined });
  const log = slog.info;
  for (const note of cfg.notes) slog.warn(note);
  if (cfg.runner) return serveRunner(cfg, cfg.runner, engine, io, slog);
  const demo = cfg.model === null;
  try {
    let ref = engine.model;
    if (demo) engine.model = await demoModel(log);
    else if (parseModelRef(ref).kind !== 'path') {
      // A store name or hub reference: pulled (with progress) before the server starts, served under its name.
      const r = await resolveModel(ref, { onProgress: progressPrinter(io) });
      engine.model = r.model;
      if (engine.mmproj === null && r.mmproj) engine.mmproj = r.mmproj;
      ref = r.name;
    }
    const names = cfg.servedModelNames ?? [demo ? DEMO_MODEL_NAME : parseModelRef(ref).kind === 'path' ? defaultName(engine.model) : ref];
    const server = await startServer({ ...cfg.serve, engine, servedModelNames: names, randomWeights: demo,
      loggerInstance: slog.requestLogger ?? undefined });
    await server.app.engine.settled();
    if (server.app.engine.state === 'failed') {
      slog.error(`the model failed to load: ${server.app.engine.loadError?.message ?? 'unknown error'}`);
      await server.shutdown();
      return 1;
    }
    if (demo) slog.warn(`serving the built-in demo model '${names[0]}': RANDOM WEIGHTS, its answers are nonsense; pass a .gguf file for a real model`);
    const device = server.app.engine.core.readyValue?.info.device ?? 'an unknown device';
    log(`model '${names[0]}' from ${engine.model} on ${device}`);
    const mmproj = server.app.engine.core.readyValue?.info.mmproj;
    if (mmproj) log(`vision projector ${mmproj}: the model takes images`);
    const recommended = Object.entries(modelSamplingFields(server.app.engine.core.modelSampling()));
    for (const refused of server.app.engine.core.modelSamplingRefused) slog.warn(`the model's general.sampling.* value ${refused}: not applied`);
    if (recommended.length > 0) {
      // vLLM's startup warning when a generation config overrides its defaults
      slog.warn(`the model's recommended sampling (general.sampling.*) is the default of requests that leave it out: ` +
        `${recommended.map(([k, v]) => `${k} ${v}`).join(', ')} (--generation-config vllm: the API's own defaults)`);
    }
    const kv = server.app.engine.core.readyValue?.info.kvCacheDtype ?? 'float32';
    log(`the KV cache is ${kv} on ${device}; activations are float32 (weights keep their GGUF types)`);
    readyLine(slog, server.app.engine.readyTimings);
    const base = `${server.url}${cfg.serve.rootPath ?? ''}`;
    const ui = cfg.serve.ui === false ? '' : `; web UI: ${base}/`;
    listening(slog, io, cfg.logFormat, server.url, `OpenAI-compatible API: ${base}/v1${ui}`);
    return await shutdownOnSignals(server, log);
  } catch (e) {
    slog.error(`could not start: ${(e as Error).message}`);
    return 1;
  }
}
