// Ollama's server environment variables, read in runner mode (`spindle serve --ollama`, the drop-in for `ollama
// serve`) so that a container or service unit written for Ollama configures Spindle the same way:
//   OLLAMA_HOST               where to listen (when SPINDLE_HOST is not set)
//   OLLAMA_KEEP_ALIVE         --keep-alive
//   OLLAMA_MAX_LOADED_MODELS  --max-loaded-models (0: Ollama's automatic choice, the default here)
//   OLLAMA_NUM_PARALLEL       --max-num-seqs, sequences each loaded model runs at once (0: automatic)
//   OLLAMA_MAX_QUEUE          --max-queued-requests
//   OLLAMA_CONTEXT_LENGTH     --max-model-len, the context of a model whose request and Modelfile set no num_ctx
//   OLLAMA_ORIGINS            --cors-origins: its origins (patterns with * wildcards, as Ollama's) plus Ollama's own
//                             defaults (localhost / 127.0.0.1 / 0.0.0.0 on any port, app://, file://, tauri://,
//                             vscode-webview://)
//   OLLAMA_KV_CACHE_TYPE      --kv-cache-dtype: float16 for f16, q8_0 for q8_0, q4_0 for q4_0 (the two block types
//                             on the CPU; float16 on a GPU, as for head dims that are not multiples of 32)
// Invariant: a variable is used only in runner mode and only where its flag (any spelling) is absent; a bad value is
// an error naming the variable (Ollama would fall back to its default; a deployment's typo is better seen); every
// variable used is listed in a startup line.
import { limitRefusal } from '../native.js';
import { parseKeepAliveFlag } from './keep-alive.js';

type Values = Record<string, string | string[] | boolean | undefined>;

// variable -> the flag it defaults, and that flag's other spellings (a flag given in any of them wins)
const VARIABLES: Array<[string, string, readonly string[]]> = [
  ['OLLAMA_KEEP_ALIVE', 'keep-alive', []],
  ['OLLAMA_MAX_LOADED_MODELS', 'max-loaded-models', []],
  ['OLLAMA_NUM_PARALLEL', 'max-num-seqs', ['max-running-requests']],
  ['OLLAMA_MAX_QUEUE', 'max-queued-requests', []],
  ['OLLAMA_CONTEXT_LENGTH', 'max-model-len', ['context-length']],
  ['OLLAMA_ORIGINS', 'cors-origins', ['allowed-origins']],
  ['OLLAMA_KV_CACHE_TYPE', 'kv-cache-dtype', []],
];

// whole-number variables and their ranges (the flags' own: an engine limit, or [lo, hi])
const COUNTS: Record<string, string | [number, number]> = {
  OLLAMA_MAX_LOADED_MODELS: [1, 64], OLLAMA_NUM_PARALLEL: 'maxNumSeqs', OLLAMA_MAX_QUEUE: [0, 1 << 20], OLLAMA_CONTEXT_LENGTH: 'maxModelLen',
};

// The origins Ollama's server always allows (its envconfig AllowedOrigins), beside OLLAMA_ORIGINS'.
export const OLLAMA_DEFAULT_ORIGINS: readonly string[] = [
  ...['localhost', '127.0.0.1', '0.0.0.0'].flatMap((h) => [`http://${h}`, `https://${h}`, `http://${h}:*`, `https://${h}:*`]),
  'app://*', 'file://*', 'tauri://*', 'vscode-webview://*',
];

export interface OllamaEnv {
  values: Values; // the parsed flags with the variables' values filled in where the flags are absent
  host: string | null; // OLLAMA_HOST, when it gives the address (SPINDLE_HOST unset)
  applied: string[]; // NAME=value of each variable used
  notes: string[]; // warnings (a quantized KV cache type asked for)
}

/** Fills runner mode's absent flags from Ollama's variables; throws Error naming a variable whose value is bad. */
export function ollamaEnv(v: Values, env: NodeJS.ProcessEnv): OllamaEnv {
  const values: Values = { ...v };
  const applied: string[] = [];
  const notes: string[] = [];
  for (const [name, flag, others] of VARIABLES) {
    const value = env[name]?.trim();
    if (!value || [flag, ...others].some((f) => v[f] !== undefined)) continue;
    const range = COUNTS[name];
    if (range !== undefined) {
      if (!/^\d+$/.test(value)) throw new Error(`${name} must be a whole number (got '${value}')`);
      if (value === '0' && name !== 'OLLAMA_MAX_QUEUE') continue; // Ollama's 0: its automatic choice
      const n = Number(value);
      const refusal = typeof range === 'string' ? limitRefusal(range, n) : n < range[0] || n > range[1] ? `in [${range[0]}, ${range[1]}]` : null;
      if (refusal !== null) throw new Error(`${name} must be ${refusal} (got '${value}')`);
    }
    let use = value;
    if (name === 'OLLAMA_KEEP_ALIVE') {
      try {
        parseKeepAliveFlag(value);
      } catch {
        throw new Error(`${name} must be a duration such as 5m, 30s, 1h, or seconds; negative keeps models loaded forever (got '${value}')`);
      }
    }
    if (name === 'OLLAMA_ORIGINS') use = [...value.split(','), ...OLLAMA_DEFAULT_ORIGINS].join(',');
    if (name === 'OLLAMA_KV_CACHE_TYPE') {
      const t = value.toLowerCase();
      if (t !== 'f16' && t !== 'q8_0' && t !== 'q4_0') throw new Error(`${name} must be f16, q8_0 or q4_0 (got '${value}')`);
      use = t === 'f16' ? 'float16' : t;
    }
    values[flag] = use;
    applied.push(`${name}=${value}`);
  }
  const host = (env.SPINDLE_HOST ?? '').trim() === '' ? listenHost(env.OLLAMA_HOST) : null;
  if (host !== null && (v.host === undefined || v.port === undefined)) applied.push(`OLLAMA_HOST=${host}`);
  return { values, host, applied, notes };
}

// OLLAMA_HOST as Ollama's server reads it: surrounding quotes dropped, and an empty host (':11434') meaning every
// interface (Ollama listens on ':port'), where the client-side reading (SPINDLE_HOST) takes it as 127.0.0.1.
function listenHost(value: string | undefined): string | null {
  const v = value?.trim().replace(/^(["'])(.*)\1$/, '$2').trim();
  if (!v) return null;
  return v.replace(/^((?:https?:\/\/)?)(?=:)/i, (scheme: string) => `${scheme}0.0.0.0`);
}
