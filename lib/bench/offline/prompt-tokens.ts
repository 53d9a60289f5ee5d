// Deterministic prompt token ids for the benchmark: BOS first when the model adds one (as llama-bench), then
// ids drawn from a seeded generator among the tokens that are not special.
// Invariant: the same (seed, model) gives the same sequence of prompts; every prompt drawn is new (the
// generator moves on), so an engine with a prefix cache never gets a repeated prompt; ids are always in
// [0, vocabSize) and never BOS, EOS, an end-of-generation id, or a control / unused / byte token.
import { createRng, type Rng } from '../serve/random.js';

const TOKEN_TYPE_NORMAL = 1; // tokenizer.ggml.token_type
const TOKEN_TYPE_USER_DEFINED = 4;

export interface VocabFacts {
  vocabSize: number;
  bosTokenId: number | null;
  eosTokenId: number | null;
  eogTokenIds: number[];
  addBos: boolean;
}

export interface PromptSource {
  /** A fresh prompt of exactly n tokens (n >= 1). */
  next(n: number): number[];
  /** How many ids prompts are drawn from. */
  readonly candidates: number;
}

/** Ids that may appear in a prompt: normal (or user-defined) tokens when types are known, else all but BOS/EOS/EOG. */
export function candidateIds(vocab: VocabFacts, tokenTypes: Int32Array | null): Int32Array {
  const banned = new Set<number>(vocab.eogTokenIds);
  if (vocab.bosTokenId !== null) banned.add(vocab.bosTokenId);
  if (vocab.eosTokenId !== null) banned.add(vocab.eosTokenId);
  const useTypes = tokenTypes !== null && tokenTypes.length >= vocab.vocabSize;
  const out: number[] = [];
  for (let id = 0; id < vocab.vocabSize; id++) {
    if (banned.has(id)) continue;
    if (useTypes && tokenTypes[id] !== TOKEN_TYPE_NORMAL && tokenTypes[id] !== TOKEN_TYPE_USER_DEFINED) continue;
    out.push(id);
  }
  return Int32Array.from(out);
}

export function createPromptSource(vocab: VocabFacts, tokenTypes: Int32Array | null, seed: number): PromptSource {
  const ids = candidateIds(vocab, tokenTypes);
  if (ids.length === 0) throw new Error('the vocabulary has no ordinary (non-special) token to build prompts from');
  const rng: Rng = createRng(seed, 'bench-prompt');
  const bos = vocab.addBos ? vocab.bosTokenId : null;
  return {
    candidates: ids.length,
    next(n) {
      const out: number[] = [];
      if (bos !== null) out.push(bos);
      while (out.length < n) out.push(ids[rng.int(0, ids.length - 1)]);
      return out;
    },
  };
}
