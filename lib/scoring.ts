// Scores of (query, document) pairs: vLLM's LLM.score and /score, and the rerank APIs (/rerank, /v1/rerank,
// /v2/rerank: Jina's, Cohere's, vLLM's and llama.cpp's). A reranker (a file with a classifier head, as llama.cpp
// converts Qwen3-Reranker: rank pooling, cls.output.weight, tokenizer.chat_template.rerank) scores each pair's
// prompt, its rerank template with {query} and {document} filled in and tokenized as llama.cpp's server does
// (special tokens parsed, none added), from the last token's hidden state after the output norm through the head:
// the first label's softmax probability (Qwen3-Reranker's "yes"; llama.cpp's rank pooling for qwen3), or the sigmoid
// of a single label's logit. Any other model scores a pair by the cosine similarity of the two texts' embeddings
// (vLLM's score for embedding models), with the model's own pooling.
// Invariants: one score per pair, in the pairs' order; a bad input throws EmbeddingInputError naming it (pairs[i])
// before anything is queued; a pair over the context is refused, never cut.
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

/** How this model scores pairs: its classifier head, else the cosine of embeddings. */
export function scorerOf(info: NativeModelInfo): Scorer {
  return info.classifier ? 'cross-encoder' : 'embedding';
}

/** A pair's prompt for a reranker: its rerank template filled in, tokenized with special tokens parsed (llama.cpp's). */
export function rerankPromptIds(tokenizer: Tokenizer, info: NativeModelInfo, query: string, document: string, what: string): number[] {
  if (!info.rerankTemplate) {
    throw new EmbeddingInputError(`${what}: this reranker has no rerank prompt (tokenizer.chat_template.rerank with {query} and {document})`, what);
  }
  const text = info.rerankTemplate.split('{query}').join(query).split('{document}').join(document);
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

/** Scores every pair in one batch of engine requests; `what` names the pairs in errors. */
export async function scorePairs(core: EngineCore, pairs: readonly (readonly [string, string])[], what = 'pairs',
  signal?: AbortSignal): Promise<ScoreResult> {
  const { info, tokenizer } = await core.ready();
  const name = (i: number) => (pairs.length === 1 ? what : `${what}[${i}]`);
  if (info.classifier) {
    const head = info.classifier;
    const prompts = pairs.map(([q, d], i) => rerankPromptIds(tokenizer, info, q, d, name(i)));
    const r = await embed(core, prompts, { pooling: 'last', normalize: false, signal }, what);
    return { scores: r.embeddings.map((h) => headScore(head, h)), promptTokens: sum(r.promptTokenIds), scorer: 'cross-encoder' };
  }
  // embeddings: each distinct text once, normalized; the score is their dot product
  const texts = [...new Set(pairs.flat())];
  const at = new Map(texts.map((x, i) => [x, i]));
  const r = await embed(core, texts, { signal }, what);
  const cos = (a: number[], b: number[]) => a.reduce((s, v, i) => s + v * b[i], 0);
  return {
    scores: pairs.map(([q, d]) => cos(r.embeddings[at.get(q)!], r.embeddings[at.get(d)!])),
    promptTokens: sum(r.promptTokenIds), scorer: 'embedding',
  };
}

const sum = (ids: number[][]) => ids.reduce((a, x) => a + x.length, 0);

/**
 * vLLM's LLM.score / /score pairing: one text against one, one against many (broadcast), or two lists of the same
 * length (pairwise).
 */
export function scoringPairs(a: string | readonly string[], b: string | readonly string[], names = ['text_1', 'text_2']): [string, string][] {
  const la = typeof a === 'string' ? [a] : [...a];
  const lb = typeof b === 'string' ? [b] : [...b];
  if (la.length === 0 || lb.length === 0) throw new EmbeddingInputError(`${la.length === 0 ? names[0] : names[1]} is empty; give a text or a list of texts`, la.length === 0 ? names[0] : names[1]);
  if (la.length === 1) return lb.map((x) => [la[0], x]);
  if (la.length !== lb.length) {
    throw new EmbeddingInputError(`${names[0]} has ${la.length} texts and ${names[1]} ${lb.length}; give one ${names[0]}, or as many as ${names[1]}`, names[0]);
  }
  return la.map((x, i) => [x, lb[i]]);
}
