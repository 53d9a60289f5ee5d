// Command-line flags of `spindle bench` (llama-bench spellings: -m -p -n -t -r -o, comma lists and ranges).
// Invariant: parseBenchArgs either returns a fully validated config or throws ArgsError with a message naming
// the flag; nothing downstream re-checks ranges.
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { joinNegativeValues } from '../../cli/negative-values.js';

export class ArgsError extends Error {
  override name = 'ArgsError';
}

export const OUTPUT_FORMATS = ['md', 'table', 'json', 'jsonl', 'csv'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export const DEVICES = ['auto', 'cpu', 'cuda'] as const;
export type Device = (typeof DEVICES)[number];

export interface BenchConfig {
  models: string[]; // paths, in the order given
  nPrompt: number[]; // pp test sizes, tokens; 0 entries dropped
  nGen: number[]; // tg test sizes, tokens per sequence; 0 entries dropped
  threads: number[]; // one engine per value
  device: Device; // the engine's device option ('auto': CUDA when usable, else the CPU)
  batch: number[]; // sequences decoding at once in the tg tests (1 = plain tgN)
  repetitions: number;
  output: OutputFormat;
  seed: number; // uint32, picks the prompt token ids
  bandwidthGBps: number | null; // 1e9 bytes/s; null = no bandwidth-bound column
  warmup: boolean;
}

export const HELP = `Usage: spindle bench -m model.gguf [flags]

Offline throughput benchmark of the engine (like llama.cpp's llama-bench). Each test runs once as an
uncounted warm-up, then -r times; the report gives the mean +- standard deviation of tokens/s.

Tests:
  ppN       prompt processing: N prompt tokens (BOS first when the model adds one, then seeded random
            non-special token ids), time from submit to the first output token (max 1 new token)
  tgN       decoding N tokens for one sequence: time from its first to its (N+1)-th streamed token, so
            the prompt (1 token) is excluded
  tgN@bB    B sequences decoding N tokens each at once: B*N tokens over the time from the first
            sequence's first token to the last sequence's last token (total output tokens/s)

Flags (lists: comma separated, a flag given again adds values, ranges as first-last, first-last+step,
first-last*mult):
  -m, --model FILE         GGUF model (required; give -m again for more models)
  -p, --n-prompt LIST      prompt sizes for pp tests (default 512; 0 = no pp test)
  -n, --n-gen LIST         tokens to decode in tg tests (default 128; 0 = no tg test)
  -t, --threads LIST       engine threads (default ${availableParallelism()}, the available cores); one engine per value
      --device DEVICE      auto (default: CUDA when a usable GPU and driver are present and this build has
                           CUDA, else the CPU) | cpu | cuda; the backend column names the one used
  -b, --batch LIST         sequences decoding at once in tg tests (default 1). Unlike llama-bench, where -b is
                           the prompt batch size, this makes the batched-decode tests tgN@bB
  -r, --repetitions N      measured runs per test (default 5)
  -o, --output FORMAT      md (default; alias table) | json | jsonl | csv, to stdout
      --seed N             seed for the prompt token ids (default 0)
      --bandwidth GBPS     memory bandwidth in GB/s (1e9 bytes/s). Adds the decode bound B * GBPS /
                           bytes a token reads (weights, less an untied embedding table and unused
                           experts) tokens/s and the share of it reached by each tg test. Not measured
                           by default: a probe from JavaScript would not be a reliable number
      --no-warmup          skip the warm-up runs
  -h, --help               this text

Progress goes to stderr. Exit codes: 0 done, 1 a run failed, 2 bad flags or an unusable model file.
To benchmark a running server instead: spindle bench serve --help
`;

const OPTIONS = {
  model: { type: 'string', short: 'm', multiple: true },
  'n-prompt': { type: 'string', short: 'p', multiple: true },
  'n-gen': { type: 'string', short: 'n', multiple: true },
  threads: { type: 'string', short: 't', multiple: true },
  device: { type: 'string' },
  batch: { type: 'string', short: 'b', multiple: true },
  repetitions: { type: 'string', short: 'r' },
  output: { type: 'string', short: 'o' },
  seed: { type: 'string' },
  bandwidth: { type: 'string' },
  'no-warmup': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const SHORT: Record<string, string> = { 'n-prompt': '-p', 'n-gen': '-n', threads: '-t', batch: '-b', repetitions: '-r', output: '-o', model: '-m' };
const flagName = (long: string) => (SHORT[long] ? `${SHORT[long]} (--${long})` : `--${long}`);

const MAX_LIST = 1000; // values one list flag may expand to

/** llama-bench's parse_int_range: 'a', 'a-b', 'a-b+s', 'a-b*s', comma separated. */
export function parseIntList(flag: string, texts: string[], min: number, max: number): number[] {
  const out: number[] = [];
  for (const text of texts) {
    for (const part of text.split(',')) {
      const m = /^(\d+)(?:-(\d+)(?:([+*])(\d+))?)?$/.exec(part.trim());
      if (!m) throw new ArgsError(`${flagName(flag)} expects integers, comma lists or ranges (a-b, a-b+step, a-b*mult), got '${text}'`);
      const first = Number(m[1]);
      const last = m[2] === undefined ? first : Number(m[2]);
      const op = m[3] ?? '+';
      const step = m[4] === undefined ? 1 : Number(m[4]);
      for (const v of [first, last]) {
        if (v < min || v > max) throw new ArgsError(`${flagName(flag)} values must be in [${min}, ${max}], got ${v}`);
      }
      if (first > last) throw new ArgsError(`${flagName(flag)}: range '${part}' is empty`);
      for (let v = first; v <= last;) {
        out.push(v);
        if (out.length > MAX_LIST) throw new ArgsError(`${flagName(flag)} expands to more than ${MAX_LIST} values`);
        const next = op === '+' ? v + step : v * step;
        if (next <= v) throw new ArgsError(`${flagName(flag)}: range '${part}' does not increase`);
        v = next;
      }
    }
  }
  return [...new Set(out)];
}

function oneInt(flag: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text.trim())) throw new ArgsError(`${flagName(flag)} must be an integer, got '${text}'`);
  const v = Number(text);
  if (v < min || v > max) throw new ArgsError(`${flagName(flag)} must be in [${min}, ${max}], got ${v}`);
  return v;
}

function bandwidth(text: string | undefined): number | null {
  if (text === undefined) return null;
  const v = Number(text);
  if (text.trim() === '' || !Number.isFinite(v) || v <= 0) throw new ArgsError(`--bandwidth must be a positive number of GB/s, got '${text}'`);
  return v;
}

function output(text: string | undefined): OutputFormat {
  const v = text ?? 'md';
  if (!(OUTPUT_FORMATS as readonly string[]).includes(v)) throw new ArgsError(`-o (--output) must be one of ${OUTPUT_FORMATS.join(', ')}, got '${v}'`);
  return v as OutputFormat;
}

function device(text: string | undefined): Device {
  const v = text ?? 'auto';
  if (!(DEVICES as readonly string[]).includes(v)) throw new ArgsError(`--device must be one of ${DEVICES.join(', ')}, got '${v}'`);
  return v as Device;
}

/** Returns null when --help was asked for. */
export function parseBenchArgs(argv: string[]): BenchConfig | null {
  let values: Record<string, string | string[] | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: joinNegativeValues(argv, OPTIONS), options: OPTIONS, strict: true, allowPositionals: true }));
  } catch (e) {
    throw new ArgsError((e as Error).message);
  }
  if (values.help) return null;
  if (positionals.length > 0) throw new ArgsError(`unexpected argument '${positionals[0]}' (the model is given with -m FILE)`);
  const list = (k: string) => values[k] as string[] | undefined;
  const models = list('model') ?? [];
  if (models.length === 0) throw new ArgsError('-m (--model) is required: the GGUF model file to benchmark');
  for (const m of models) if (m.trim() === '') throw new ArgsError('-m (--model) must name a file, got an empty string');
  const cfg: BenchConfig = {
    models,
    nPrompt: parseIntList('n-prompt', list('n-prompt') ?? ['512'], 0, 1 << 20).filter((v) => v > 0),
    nGen: parseIntList('n-gen', list('n-gen') ?? ['128'], 0, 1 << 20).filter((v) => v > 0),
    threads: parseIntList('threads', list('threads') ?? [String(availableParallelism())], 1, 1024),
    device: device(values.device as string | undefined),
    batch: parseIntList('batch', list('batch') ?? ['1'], 1, 4096),
    repetitions: oneInt('repetitions', values.repetitions as string | undefined, 5, 1, 1000),
    output: output(values.output as string | undefined),
    seed: oneInt('seed', values.seed as string | undefined, 0, 0, 0xffffffff),
    bandwidthGBps: bandwidth(values.bandwidth as string | undefined),
    warmup: values['no-warmup'] !== true,
  };
  if (cfg.nPrompt.length === 0 && cfg.nGen.length === 0) throw new ArgsError('nothing to run: every -p and -n value is 0');
  return cfg;
}
