// Embeddings (vLLM's LLM.embed and pooling runner, SGLang's Engine.encode, OpenAI's /v1/embeddings, Ollama's
// /api/embed): inputs (text or token ids) -> the hidden states after the model's output norm (what llama.cpp
// pools), pooled over the input (mean, cls: the first token, last: the last token), L2-normalized unless asked
// otherwise, optionally cut to their first `dimensions` values (normalized again), as Ollama and OpenAI's
// `dimensions` do.
// Invariants: the pooling is the call's, else the engine's (--pooling), else the model file's {arch}.pooling_type
// where it names mean / cls / last, else 'last' (vLLM's default for decoder-only models); text is tokenized as
// the model's tokenizer asks (BOS / EOS by add_bos_token / add_eos_token); a bad input throws EmbeddingInputError
// naming it (inputs[i] / inputs[i][j]) before anything is queued.
import type { EngineCore } from './engine-core.js';
import type { NativeModelInfo } from './native.js';

export type Pooling = 'mean' | 'cls' | 'last';
export const POOLINGS: readonly Pooling[] = ['mean', 'cls', 'last'];

export interface EmbedOptions {
  pooling?: Pooling | null;
  normalize?: boolean; // default true: unit L2 norm
  dimensions?: number | null; // keep the first N values (1..nEmbd)
  // An input longer than the context: false (default) is an error; true keeps its first maxModelLen tokens
  // (Ollama's truncate).
  truncate?: boolean;
  // Empty text is embedded (as its special tokens: Ollama's list items) rather than refused (OpenAI); an input
  // with no token at all is refused either way.
  allowEmptyText?: boolean;
  signal?: AbortSignal;
}

export interface EmbedResult {
  embeddings: number[][];
  promptTokenIds: number[][]; // the tokens of each input (after truncation)
  pooling: Pooling;
}

/** A bad embedding input or option; `param` names it (OpenAI's error.param). */
export class EmbeddingInputError extends Error {
  constructor(message: string, readonly param: string) {
    super(message);
    this.name = 'EmbeddingInputError';
  }
}

export function resolvePooling(info: NativeModelInfo, asked: Pooling | null | undefined, engineDefault: Pooling | null): Pooling {
  if (asked != null) {
    if (!POOLINGS.includes(asked)) {
      throw new EmbeddingInputError(`pooling must be one of ${POOLINGS.join(', ')} (got ${JSON.stringify(asked)})`, 'pooling');
    }
    return asked;
  }
  if (engineDefault != null) return engineDefault;
  const fromFile = info.pooling;
  return fromFile === 'mean' || fromFile === 'cls' || fromFile === 'last' ? fromFile : 'last';
}

/** v / |v| (a zero vector stays zero), as numbers. */
export function l2Normalized(v: ArrayLike<number>): number[] {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i] * v[i];
  const scale = sum > 0 ? 1 / Math.sqrt(sum) : 1;
  return Array.from(v, (x) => x * scale);
}

/**
 * Embeds every input (a string, or token ids) in one batch of engine requests. `what` names the inputs in errors
 * ('input', 'prompt', ...).
 */
export async function embed(core: EngineCore, inputs: readonly (string | readonly number[])[], options: EmbedOptions = {},
  what = 'input'): Promise<EmbedResult> {
  const { info, tokenizer } = await core.ready();
  if (core.modelfileAdapter) {
    throw new EmbeddingInputError("this model runs with a LoRA adapter (its Modelfile's ADAPTER), which applies to generation only; embed with its base model", 'model');
  }
  const pooling = resolvePooling(info, options.pooling, core.options.pooling);
  const dims = options.dimensions ?? null;
  if (dims !== null && (!Number.isInteger(dims) || dims < 1 || dims > info.nEmbd)) {
    throw new EmbeddingInputError(`dimensions must be an integer in [1, ${info.nEmbd}] (this model's embedding size; got ${String(dims)})`, 'dimensions');
  }
  const name = (i: number): string => (inputs.length === 1 ? what : `${what}[${i}]`);
  const prompts = inputs.map((input, i) => {
    let ids: readonly number[];
    if (typeof input === 'string') {
      if (input.length === 0 && !options.allowEmptyText) throw new EmbeddingInputError(`${name(i)} is empty; give text or token ids`, name(i));
      ids = tokenizer.encode(input, { addSpecialTokens: true, parseSpecial: false });
      if (ids.length === 0) throw new EmbeddingInputError(`${name(i)} has no tokens (empty text, and the model adds no BOS)`, name(i));
    } else {
      if (input.length === 0) throw new EmbeddingInputError(`${name(i)} holds no token ids`, name(i));
      const bad = input.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= tokenizer.vocabSize);
      if (bad >= 0) {
        throw new EmbeddingInputError(`${name(i)}[${bad}]: ${String(input[bad])} is not a token id in [0, ${tokenizer.vocabSize})`, `${name(i)}[${bad}]`);
      }
      ids = input;
    }
    if (ids.length > info.maxModelLen) {
      if (!options.truncate) {
        throw new EmbeddingInputError(`${name(i)} has ${ids.length} tokens; this model's context (maxModelLen) is ${info.maxModelLen} tokens`, name(i));
      }
      ids = ids.slice(0, info.maxModelLen);
    }
    return ids;
  });
  const pooled = await core.embedMany(prompts, pooling, options.signal);
  const normalize = options.normalize ?? true;
  const embeddings = pooled.map(({ embedding }) => {
    const cut = dims === null ? embedding : embedding.subarray(0, dims);
    return normalize ? l2Normalized(cut) : Array.from(cut);
  });
  return { embeddings, promptTokenIds: prompts.map((p) => [...p]), pooling };
}
