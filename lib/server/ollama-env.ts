// Ollama's server environment variables, read in runner mode (`spindle serve --ollama`, the drop-in for `ollama
// serve`) so that a container or service unit written for Ollama configures Spindle the same way:
//   OLLAMA_HOST               where to listen (when SPINDLE_HOST is not set)
//   OLLAMA_KEEP_ALIVE         --keep-alive
//   OLLAMA_MAX_LOADED_MODELS  --max-loaded-models (0: Ollama's automatic choice, the default here)
//   OLLAMA_NUM_PARALLEL       --max-num-seqs, sequences each loaded model runs at once (0: automatic)
//   OLLAMA_MAX_QUEUE          --max-queued-requests
//   OLLAMA_CONTEXT_LENGTH     --max-model-len, the context of a model whose request and Modelfile set no num_ctx
//   OLLAMA_ORIGINS            --cors-origins (comma-separated; '*' allows any)
//   OLLAMA_KV_CACHE_TYPE      --kv-cache-dtype for f16; q8_0 / q4_0 (quantized caches) are not supported: a
//                             warning says the cache stays 16-bit
// Invariant: a variable is used only in runner mode and only where its flag (any spelling) is absent; a bad value is
// an error naming the variable; every variable used is listed in a startup line.

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

const COUNTS = new Set(['OLLAMA_MAX_LOADED_MODELS', 'OLLAMA_NUM_PARALLEL', 'OLLAMA_MAX_QUEUE', 'OLLAMA_CONTEXT_LENGTH']);

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
    if (COUNTS.has(name)) {
      if (!/^\d+$/.test(value)) throw new Error(`${name} must be a whole number (got '${value}')`);
      if (value === '0' && name !== 'OLLAMA_MAX_QUEUE') continue; // Ollama's 0: its automatic choice
    }
    let use = value;
    if (name === 'OLLAMA_KV_CACHE_TYPE') {
      const t = value.toLowerCase();
      if (t === 'q8_0' || t === 'q4_0') {
        notes.push(`${name}=${value}: quantized K / V caches are not supported; the KV cache stays float16 (half of float32's memory)`);
        continue;
      }
      if (t !== 'f16') throw new Error(`${name} must be f16, q8_0 or q4_0 (got '${value}')`);
      use = 'float16';
    }
    values[flag] = use;
    applied.push(`${name}=${value}`);
  }
  const host = (env.SPINDLE_HOST ?? '').trim() === '' ? env.OLLAMA_HOST?.trim() || null : null;
  if (host !== null && (v.host === undefined || v.port === undefined)) applied.push(`OLLAMA_HOST=${host}`);
  return { values, host, applied, notes };
}
