// Scores of (query, document) pairs: vLLM's LLM.score and /score, and the rerank APIs (/rerank, /v1/rerank,
// /v2/rerank: Jina's, Cohere's, vLLM's and llama.cpp's). A reranker (a qwen3 file with a classifier head, as
// llama.cpp converts Qwen3-Reranker: rank pooling, cls.output.weight, tokenizer.chat_template.rerank) scores each
// pair's prompt, its rerank template with {query} and {document} filled in and tokenized as llama.cpp's server does
// (special tokens parsed, none added), from the last token's hidden state after the output norm through the head:
// the first label's softmax probability (Qwen3-Reranker's "yes"; llama.cpp's rank pooling for qwen3), or the
// sigmoid of a single label's logit (vLLM's). An embedding model (a file with a mean / cls / last pooling type)
// scores a pair by the cosine similarity of the two texts' embeddings (vLLM's score for embedding models). Other
// models do not score.
// Invariants: one score per pair, in the pairs' order; a bad input throws EmbeddingInputError naming it (the
// caller's names for the two sides) before anything is queued; every prompt is checked against the context as it
// is built, so an oversized request stops at its first oversized pair.
import { embed, EmbeddingInputError } from './embeddings.js';
import type { EngineCore } from './engine-core.js';
import type { NativeModelInfo } from './native.js';
import type { Tokenizer } from './tokenizer.js';

export type Scorer = 'cross-encoder' | 'embedding';

export interface ScoreResult {
  scores: number[];
  promptTokens: number; // tokens computed over every pair
  scorer: Scorer;
}

/** Names of the two sides of pair i in errors (e.g. query / documents[i], text_1 / text_2[i]). */
export interface PairNames {
  first(i: number): string;
  second(i: number): string;
}

/** How this model scores pairs, or why it cannot. */
export function scorerOf(info: NativeModelInfo): Scorer {
  if (info.classifier) {
    if (info.arch !== 'qwen3') {
      throw new EmbeddingInputError(`this ${info.arch} file has a classifier head; scoring with one is supported for qwen3 rerankers ` +
        '(Qwen3-Reranker as llama.cpp converts it)', 'model');
    }
    return 'cross-encoder';
  }
  if (info.pooling === 'mean' || info.pooling === 'cls' || info.pooling === 'last') return 'embedding';
  throw new EmbeddingInputError('this model does not score pairs: it is neither a reranker (a classifier head, rank pooling) nor an ' +
    'embedding model (a pooling type); use a reranker or embedding GGUF', 'model');
}

/** A pair's prompt for a reranker: its rerank template filled in (one pass), tokenized with special tokens parsed. */
export function rerankPromptIds(tokenizer: Tokenizer, template: string, query: string, document: string): number[] {
  const text = template.replace(/\{query\}|\{document\}/g, (m) => (m === '{query}' ? query : document));
  return tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: true });
}

/** The head's score of one pooled hidden state: softmax over the labels, the first one's probability; one label: sigmoid. */
export function headScore(head: NonNullable<NativeModelInfo['classifier']>, hidden: readonly number[]): number {
  const n = hidden.length;
  const z: number[] = [];
  for (let k = 0; k < head.nOut; k++) {
    let s = head.bias ? head.bias[k] : 0;
    for (let i = 0; i < n; i++) s += head.weights[k * n + i] * hidden[i];
    z.push(s);
  }
  if (z.length === 1) return 1 / (1 + Math.exp(-z[0]));
  const max = Math.max(...z);
  const sum = z.reduce((a, v) => a + Math.exp(v - max), 0);
  return Math.exp(z[0] - max) / sum;
}

/** Scores every pair in one batch of engine requests. */
export async function scorePairs(core: EngineCore, pairs: readonly (readonly [string, string])[], names: PairNames,
  signal?: AbortSignal): Promise<ScoreResult> {
  const { info, tokenizer } = await core.ready();
  const scorer = scorerOf(info);
  const max = info.maxModelLen;
  if (scorer === 'cross-encoder') {
    const head = info.classifier!;
    const template = info.rerankTemplate;
    if (!template) {
      throw new EmbeddingInputError('this reranker has no rerank prompt (tokenizer.chat_template.rerank with {query} and {document})', 'model');
    }
    const firstTokens = new Map<string, number>(); // each distinct first text's tokens, counted once
    const prompts = pairs.map(([q, d], i) => {
      let n = firstTokens.get(q);
      if (n === undefined) firstTokens.set(q, n = tokenizer.encode(q, { addSpecialTokens: false }).length);
      if (n > max) throw new EmbeddingInputError(`${names.first(i)} has ${n} tokens; this model's context (maxModelLen) is ${max}`, names.first(i));
      const ids = rerankPromptIds(tokenizer, template, q, d);
      if (ids.length > max) {
        throw new EmbeddingInputError(`${names.second(i)}: its prompt with ${names.first(i)} has ${ids.length} tokens; this model's context ` +
          `(maxModelLen) is ${max}`, names.second(i));
      }
      return ids;
    });
    const r = await embed(core, prompts, { pooling: 'last', normalize: false, signal }, 'pairs');
    return { scores: r.embeddings.map((h) => headScore(head, h)), promptTokens: total(r.promptTokenIds), scorer };
  }
  // embeddings: each distinct text once, normalized; the score is their dot product
  pairs.forEach(([q, d], i) => {
    if (q.length === 0) throw new EmbeddingInputError(`${names.first(i)} is empty`, names.first(i));
    if (d.length === 0) throw new EmbeddingInputError(`${names.second(i)} is empty`, names.second(i));
  });
  const texts = [...new Set(pairs.flat())];
  const at = new Map(texts.map((x, i) => [x, i]));
  const r = await embed(core, texts, { signal }, 'texts');
  const cos = (a: number[], b: number[]) => a.reduce((s, v, i) => s + v * b[i], 0);
  return {
    scores: pairs.map(([q, d]) => cos(r.embeddings[at.get(q)!], r.embeddings[at.get(d)!])),
    promptTokens: total(r.promptTokenIds), scorer,
  };
}

const total = (ids: number[][]) => ids.reduce((a, x) => a + x.length, 0);

/**
 * vLLM's LLM.score / /score pairing: one text against one, one against many (broadcast), or two lists of the same
 * length (pairwise).
 */
export function scoringPairs(a: string | readonly string[], b: string | readonly string[], names = ['text_1', 'text_2']): [string, string][] {
  const la = typeof a === 'string' ? [a] : [...a];
  const lb = typeof b === 'string' ? [b] : [...b];
  if (la.length === 0 || lb.length === 0) {
    const which = la.length === 0 ? names[0] : names[1];
    throw new EmbeddingInputError(`${which} is empty; give a text or a list of texts`, which);
  }
  if (la.length === 1) return lb.map((x) => [la[0], x]);
  if (la.length !== lb.length) {
    throw new EmbeddingInputError(`${names[0]} has ${la.length} texts and ${names[1]} ${lb.length}; give one ${names[0]}, or as many as ${names[1]}`, names[0]);
  }
  return la.map((x, i) => [x, lb[i]]);
}

/** The side names of scoringPairs' pairs: a single first text is named without an index. */
export function scoringPairNames(a: string | readonly string[], names = ['text_1', 'text_2']): PairNames {
  const one = typeof a === 'string' || a.length === 1;
  return { first: (i) => (one ? names[0] : `${names[0]}[${i}]`), second: (i) => `${names[1]}[${i}]` };
}
