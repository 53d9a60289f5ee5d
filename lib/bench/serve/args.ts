// Command-line flags of `spindle bench serve` (vLLM `vllm bench serve` spellings and defaults).
// Invariant: parseBenchServeArgs either returns a fully validated config or throws ArgsError with a
// message naming the flag; nothing downstream re-checks ranges.
import { parseArgs } from 'node:util';
import { joinNegativeValues } from '../../cli/negative-values.js';
import { BACKEND_ALIASES, BACKEND_NAMES, backendNamed } from './backends.js';
import type { BackendName } from './types.js';

export class ArgsError extends Error {
  override name = 'ArgsError';
}

export interface BenchServeConfig {
  backend: BackendName;
  baseUrl: string; // no trailing '/'
  endpoint: string; // path ('/v1/completions') or a full URL
  model: string | null; // null = first model the server lists
  numPrompts: number;
  maxConcurrency: number | null; // null = unlimited
  requestRate: number; // requests/s; Infinity = all at once
  randomInputLen: number; // tokens
  randomOutputLen: number; // tokens
  randomRangeRatio: number; // [0, 1)
  randomPrefixLen: number; // tokens of one fixed prefix before every prompt's random part (vLLM's flag)
  randomTokenIds: number; // > 0: random prompts as token ids in [0, randomTokenIds) (openai and sglang backends); 0: words
  dataset: 'random' | 'multi-turn' | 'edit';
  editLen: number; // edit dataset: tokens of the text each request rewrites (and predicts back)
  // multi-turn: conversations sharing one system prompt, each sending its turns one after another with the whole
  // history (the chat workload prefix caching is for); answers are --random-output-len tokens
  multiTurn: { conversations: number; turns: number; systemLen: number; userLen: number };
  warmupRequests: number;
  seed: number; // uint32
  apiKey: string | null;
  ignoreEos: boolean;
  temperature: number | null; // null = the server's default (the command line gives 0 unless told)
  metricPercentiles: number[]; // e.g. [99]
  outputJson: string | null;
  saveResult: boolean;
  resultDir: string | null;
  resultFilename: string | null;
  disableProgress: boolean;
}

export const HELP = `Usage: spindle bench serve [flags]

Load-generating benchmark client for an OpenAI- or Ollama-compatible server (like vllm bench serve).
Random prompts are built from a word list (1 word = 1 token on common vocabularies); token counts are
taken from the server's usage fields and the report says which counts were used.

  --base-url URL             server root (default http://HOST:PORT)
  --host HOST, --port PORT   used when --base-url is not given (default 127.0.0.1, 8000)
  --backend NAME             openai (/v1/completions, default) | openai-chat (/v1/chat/completions) |
                             ollama (/api/generate; --endpoint /api/chat for chat) | sglang (SGLang's native
                             /generate); aliases as SGLang and vLLM spell them: sglang-oai, vllm = openai;
                             sglang-oai-chat, vllm-chat = openai-chat
  --endpoint PATH            override the backend's endpoint path (or a full URL)
  --model NAME               default: first id of GET /v1/models (ollama: GET /api/tags)
  --api-key KEY              sends Authorization: Bearer KEY (default: $OPENAI_API_KEY)
  --dataset-name NAME        random (default) | multi-turn: conversations that share a system prompt and
                             send their turns one after another with the whole history (each answer is
                             --random-output-len tokens); --num-prompts is then conversations x turns
  --multi-turn-conversations N, --multi-turn-turns N   (default 8 and 6)
  --multi-turn-system-len N, --multi-turn-user-len N   system prompt and user message tokens (default 1000, 64)
                             edit: rewrite a text of --edit-len N tokens (default 300) with small changes,
                             sending the text as OpenAI's \`prediction\` (Predicted Outputs); --num-prompts of them
  --num-prompts N            requests to send (default 1000)
  --random-input-len N       prompt tokens (default 1024); alias --input-len
  --random-output-len N      max output tokens (default 128); alias --output-len
  --random-range-ratio R     lengths uniform in [floor(len*(1-R)), ceil(len*(1+R))], R in [0,1) (default 0)
  --random-prefix-len N      one fixed prefix of N tokens before every prompt (a shared system prompt: what
                             prefix caching reuses; default 0)
  --random-token-ids V       random prompts as token ids drawn uniformly from [0, V) instead of words: exact
                             prompt lengths whatever the model's vocabulary (openai backend: completions take
                             token ids); V is the number of ordinary tokens (e.g. 128000 for Llama-3)
  --request-rate R           requests/s with Poisson arrivals, or inf = all at once (default inf)
  --max-concurrency N        at most N requests in flight (default unlimited)
  --warmup-requests N        requests sent before the measured run, not counted (default 0)
  --seed N                   seed for prompts, lengths and arrivals (default 0)
  --ignore-eos               ask the server to ignore EOS so output lengths are exact
  --temperature T            sampling temperature (default 0: greedy, as vllm bench serve and SGLang's
                             bench_serving send; the server's own default samples, which adds host work)
  --metric-percentiles LIST  comma-separated percentiles to report (default 99)
  --output-json FILE         write the result JSON to FILE
  --save-result              also write it to a vLLM-style file name (see --result-dir, --result-filename)
  --result-dir DIR, --result-filename NAME
  --disable-progress         no progress bar (alias --disable-tqdm); it is only drawn on a TTY anyway
  -h, --help                 this text
`;

const OPTIONS = {
  'base-url': { type: 'string' }, host: { type: 'string' }, port: { type: 'string' },
  backend: { type: 'string' }, endpoint: { type: 'string' }, model: { type: 'string' },
  'api-key': { type: 'string' }, 'dataset-name': { type: 'string' },
  'num-prompts': { type: 'string' }, 'random-input-len': { type: 'string' }, 'random-prefix-len': { type: 'string' }, 'random-token-ids': { type: 'string' },
  'multi-turn-conversations': { type: 'string' }, 'multi-turn-turns': { type: 'string' },
  'multi-turn-system-len': { type: 'string' }, 'multi-turn-user-len': { type: 'string' }, 'input-len': { type: 'string' },
  'edit-len': { type: 'string' },
  'random-output-len': { type: 'string' }, 'output-len': { type: 'string' }, 'random-range-ratio': { type: 'string' },
  'request-rate': { type: 'string' }, 'max-concurrency': { type: 'string' }, 'warmup-requests': { type: 'string' },
  seed: { type: 'string' }, 'ignore-eos': { type: 'boolean' }, temperature: { type: 'string' },
  'metric-percentiles': { type: 'string' }, 'output-json': { type: 'string' }, 'save-result': { type: 'boolean' },
  'result-dir': { type: 'string' }, 'result-filename': { type: 'string' },
  'disable-progress': { type: 'boolean' }, 'disable-tqdm': { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
} as const;

function int(flag: string, text: string | undefined, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text.trim())) throw new ArgsError(`--${flag} must be an integer, got '${text}'`);
  const v = Number(text);
  if (v < min || v > max) throw new ArgsError(`--${flag} must be in [${min}, ${max}], got ${v}`);
  return v;
}

function num(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const v = Number(text);
  if (text.trim() === '' || !Number.isFinite(v)) throw new ArgsError(`--${flag} must be a number, got '${text}'`);
  return v;
}

function requestRate(text: string | undefined): number {
  if (text === undefined || /^\+?inf(inity)?$/i.test(text.trim())) return Infinity;
  const v = num('request-rate', text)!;
  if (!(v > 0)) throw new ArgsError(`--request-rate must be > 0 or inf, got ${text}`);
  return v;
}

function percentiles(text: string | undefined): number[] {
  if (text === undefined) return [99];
  const list = text.split(',').map((p) => num('metric-percentiles', p)!);
  for (const p of list) if (!(p > 0 && p < 100)) throw new ArgsError(`--metric-percentiles values must be in (0, 100), got ${p}`);
  return list;
}

function baseUrl(v: Record<string, string | boolean | undefined>): string {
  const raw = (v['base-url'] as string | undefined) ?? `http://${(v.host as string | undefined) ?? '127.0.0.1'}:${int('port', v.port as string | undefined, 8000, 1, 65535)}`;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ArgsError(`--base-url is not a URL: '${raw}'`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ArgsError(`--base-url must be http:// or https://, got '${raw}'`);
  return raw.replace(/\/+$/, '');
}

/** Returns null when --help was asked for. */
export function parseBenchServeArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): BenchServeConfig | null {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: joinNegativeValues(argv, OPTIONS), options: OPTIONS, strict: true, allowPositionals: false }).values;
  } catch (e) {
    throw new ArgsError((e as Error).message);
  }
  if (values.help) return null;
  const s = (k: string) => values[k] as string | undefined;
  const asked = s('backend') ?? 'openai';
  const backend = backendNamed(asked);
  if (backend === undefined) {
    throw new ArgsError(`--backend must be one of ${[...BACKEND_NAMES, ...Object.keys(BACKEND_ALIASES)].join(', ')}, got '${asked}'`);
  }
  const dataset = s('dataset-name') ?? 'random';
  if (dataset !== 'random' && dataset !== 'multi-turn' && dataset !== 'edit') {
    throw new ArgsError(`--dataset-name must be random, multi-turn or edit, got '${dataset}'`);
  }
  const multiTurn = {
    conversations: int('multi-turn-conversations', s('multi-turn-conversations'), 8, 1),
    turns: int('multi-turn-turns', s('multi-turn-turns'), 6, 1),
    systemLen: int('multi-turn-system-len', s('multi-turn-system-len'), 1000, 0),
    userLen: int('multi-turn-user-len', s('multi-turn-user-len'), 64, 1),
  };
  const ratio = num('random-range-ratio', s('random-range-ratio')) ?? 0;
  if (!(ratio >= 0 && ratio < 1)) throw new ArgsError(`--random-range-ratio must be in [0, 1), got ${ratio}`);
  const temperature = num('temperature', s('temperature')) ?? 0;
  if (temperature !== null && temperature < 0) throw new ArgsError(`--temperature must be >= 0, got ${temperature}`);
  const maxConc = s('max-concurrency');
  const tokenIds = int('random-token-ids', s('random-token-ids'), 0, 2);
  if (s('random-token-ids') !== undefined && (dataset !== 'random' || (backend !== 'openai' && backend !== 'sglang'))) {
    throw new ArgsError('--random-token-ids needs --dataset-name random and --backend openai or sglang (/v1/completions and /generate take token ids)');
  }
  return {
    backend,
    baseUrl: baseUrl(values),
    endpoint: s('endpoint') ?? '',
    model: s('model') ?? null,
    numPrompts: dataset === 'multi-turn' ? multiTurn.conversations * multiTurn.turns : int('num-prompts', s('num-prompts'), 1000, 1),
    dataset,
    multiTurn,
    editLen: int('edit-len', s('edit-len'), 300, 1),
    maxConcurrency: maxConc === undefined ? null : int('max-concurrency', maxConc, 0, 1),
    requestRate: requestRate(s('request-rate')),
    randomInputLen: int('random-input-len', s('random-input-len') ?? s('input-len'), 1024, 1),
    randomOutputLen: int('random-output-len', s('random-output-len') ?? s('output-len'), 128, 1),
    randomRangeRatio: ratio,
    randomPrefixLen: int('random-prefix-len', s('random-prefix-len'), 0, 0),
    randomTokenIds: tokenIds,
    warmupRequests: int('warmup-requests', s('warmup-requests'), 0, 0),
    seed: int('seed', s('seed'), 0, 0, 0xffffffff),
    apiKey: s('api-key') ?? env.OPENAI_API_KEY ?? null,
    ignoreEos: values['ignore-eos'] === true,
    temperature,
    metricPercentiles: percentiles(s('metric-percentiles')),
    outputJson: s('output-json') ?? null,
    saveResult: values['save-result'] === true,
    resultDir: s('result-dir') ?? null,
    resultFilename: s('result-filename') ?? null,
    disableProgress: values['disable-progress'] === true || values['disable-tqdm'] === true,
  };
}

/** The endpoint's full URL. */
export function endpointUrl(cfg: BenchServeConfig, defaultEndpoint: string): string {
  const ep = cfg.endpoint || defaultEndpoint;
  if (/^https?:\/\//.test(ep)) return ep;
  return cfg.baseUrl + (ep.startsWith('/') ? ep : `/${ep}`);
}
