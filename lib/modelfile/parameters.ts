// The PARAMETER names a Modelfile may set and the type of each, as Ollama's api.Options / api.Runner declare them
// (ollama/ollama api/types.go; values typed by api.FormatParams).
// Invariant: a value is accepted exactly when Go would parse it for that type: int -> strconv.ParseInt (base 10,
// optional sign), float -> strconv.ParseFloat to float32 (finite, in float32 range; kept as the decimal written,
// not rounded to float32), bool -> strconv.ParseBool (1 t T TRUE true True 0 f F FALSE false False), stop -> any
// string, repeatable. Names Ollama has retired are accepted and ignored with a warning, as `ollama create` does.

export type ParameterType = 'int' | 'float' | 'bool' | 'string[]';

export const PARAMETER_TYPES: Readonly<Record<string, ParameterType>> = {
  // api.Options (per request)
  num_keep: 'int',
  seed: 'int',
  num_predict: 'int',
  top_k: 'int',
  top_p: 'float',
  min_p: 'float',
  typical_p: 'float',
  repeat_last_n: 'int',
  temperature: 'float',
  repeat_penalty: 'float',
  presence_penalty: 'float',
  frequency_penalty: 'float',
  stop: 'string[]',
  // api.Runner (at load time)
  num_ctx: 'int',
  num_batch: 'int',
  num_gpu: 'int',
  main_gpu: 'int',
  use_mmap: 'bool',
  num_thread: 'int',
  draft_num_predict: 'int',
};

/** Ollama's deprecatedParameters: `ollama create` prints a warning and drops them. */
export const DEPRECATED_PARAMETERS: ReadonlySet<string> = new Set([
  'penalize_newline', 'low_vram', 'f16_kv', 'logits_all', 'vocab_only', 'use_mlock', 'mirostat', 'mirostat_tau', 'mirostat_eta',
]);

const FLOAT32_MAX = 3.4028234663852886e38;
const BOOLS: Record<string, boolean> = { 1: true, t: true, T: true, TRUE: true, true: true, True: true, 0: false, f: false, F: false, FALSE: false, false: false, False: false };

/** The typed value, or a sentence saying why `text` is not a valid `type`. */
export function parseParameterValue(type: Exclude<ParameterType, 'string[]'>, text: string): { value: number | boolean } | { problem: string } {
  switch (type) {
    case 'int': {
      if (!/^[+-]?[0-9]+$/.test(text)) return { problem: 'must be a whole number' };
      const value = Number(text);
      if (!Number.isSafeInteger(value)) return { problem: 'is out of range (beyond ±2^53)' };
      return { value };
    }
    case 'float': {
      if (!/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(text)) return { problem: 'must be a number' };
      const value = Number(text);
      if (!Number.isFinite(value) || Math.abs(value) > FLOAT32_MAX) return { problem: 'is out of range for a float32' };
      return { value };
    }
    case 'bool': {
      const value = BOOLS[text];
      return value === undefined ? { problem: 'must be true or false' } : { value };
    }
  }
}
