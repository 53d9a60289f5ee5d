// Native logprobs (sampled token + top alternatives per generated token) in the two OpenAI shapes:
// chat (`logprobs.content[]` with token, logprob, bytes, top_logprobs) and completions (parallel arrays); and a
// prompt's logprobs: completions' echo (the prompt's tokens first, the first with null logprobs, as OpenAI's and
// vLLM's) and vLLM's prompt_logprobs (`[null, { "<id>": { logprob, rank, decoded_token } }, ...]`).
// Invariant: one entry per token, in order; tokens are the decoded piece of that single id.
import type { NativeLogprob } from '../native.js';
import type { Tokenizer } from '../tokenizer.js';

export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/** A logprob as JSON can carry it: -Infinity (a token the logits rule out) as -9999, as OpenAI and vLLM send it. */
const finite = (v: number): number => (Number.isFinite(v) ? v : -9999);

/** Top alternatives keyed by their text; two ids with the same text keep the higher (first, as ranked) value. */
function topByText(lp: NativeLogprob, tokenizer: Tokenizer): Record<string, number> {
  const top: Record<string, number> = {};
  lp.topTokenIds.forEach((id, k) => {
    const key = tokenizer.decode([id]);
    if (!(key in top)) top[key] = finite(lp.topLogprobs[k]);
  });
  return top;
}

function piece(tokenizer: Tokenizer, id: number): { token: string; bytes: number[] } {
  const token = tokenizer.decode([id]);
  return { token, bytes: [...Buffer.from(token, 'utf8')] };
}

export function chatLogprobs(list: readonly NativeLogprob[] | undefined, tokenizer: Tokenizer): { content: ChatTokenLogprob[] } {
  return {
    content: (list ?? []).map((lp) => ({
      ...piece(tokenizer, lp.tokenId),
      logprob: finite(lp.logprob),
      top_logprobs: lp.topTokenIds.map((id, k) => ({ ...piece(tokenizer, id), logprob: finite(lp.topLogprobs[k]) })),
    })),
  };
}

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: Array<number | null>; // null: a prompt's first token (nothing before it to score it)
  top_logprobs: Array<Record<string, number> | null>;
  text_offset: number[];
}

/**
 * An echoed prompt's entries (completions with echo and logprobs): its tokens, the first with null logprobs, the
 * others scored by `lps` (the engine's prompt logprobs, one per token after the first; missing for a one-token
 * prompt). Offsets are into the echoed text: each token's text as it reads after the one before it (special
 * tokens such as a BOS, absent from the echoed text, take none; a SentencePiece word keeps its leading space).
 */
export function promptCompletionLogprobs(ids: readonly number[], lps: readonly NativeLogprob[] | undefined,
  tokenizer: Tokenizer): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = 0;
  ids.forEach((id, i) => {
    out.tokens.push(tokenizer.decode([id]));
    out.text_offset.push(at);
    const lp = i > 0 ? lps?.[i - 1] : undefined;
    out.token_logprobs.push(lp ? finite(lp.logprob) : null);
    out.top_logprobs.push(lp ? topByText(lp, tokenizer) : null);
    // this token's share of the text: what it adds after the token before it (specials skipped); the first token
    // with text reads as the text's start (SentencePiece drops its leading space there)
    const own = tokenizer.decode([id], { skipSpecialTokens: true });
    if (at === 0 || i === 0) at += own.length;
    else at += tokenizer.decode([ids[i - 1], id], { skipSpecialTokens: true }).length - tokenizer.decode([ids[i - 1]], { skipSpecialTokens: true }).length;
  });
  return out;
}

/** Two runs of entries as one (an echoed prompt's, then the generated tokens'). */
export function joinCompletionLogprobs(a: CompletionLogprobs, b: CompletionLogprobs): CompletionLogprobs {
  return {
    tokens: [...a.tokens, ...b.tokens], token_logprobs: [...a.token_logprobs, ...b.token_logprobs],
    top_logprobs: [...a.top_logprobs, ...b.top_logprobs], text_offset: [...a.text_offset, ...b.text_offset],
  };
}

export type VllmPromptLogprobs = Array<Record<string, { logprob: number; rank: number; decoded_token: string }> | null>;

/** vLLM's prompt_logprobs: null for the first prompt token, then per token the top alternatives and the token itself. */
export function vllmPromptLogprobs(lps: readonly NativeLogprob[] | undefined, tokenizer: Tokenizer): VllmPromptLogprobs {
  return [null, ...(lps ?? []).map((lp) => {
    const entry: Record<string, { logprob: number; rank: number; decoded_token: string }> = {};
    lp.topTokenIds.forEach((id, k) => { entry[id] = { logprob: finite(lp.topLogprobs[k]), rank: k + 1, decoded_token: tokenizer.decode([id]) }; });
    entry[lp.tokenId] = { logprob: finite(lp.logprob), rank: lp.rank, decoded_token: tokenizer.decode([lp.tokenId]) };
    return entry;
  })];
}

/** `offset`: characters of text before the first of these tokens (echo prompt, earlier chunks). */
export function completionLogprobs(list: readonly NativeLogprob[] | undefined, tokenizer: Tokenizer, offset = 0): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const lp of list ?? []) {
    const token = tokenizer.decode([lp.tokenId]);
    out.tokens.push(token);
    out.token_logprobs.push(finite(lp.logprob));
    out.top_logprobs.push(topByText(lp, tokenizer));
    out.text_offset.push(at);
    at += token.length;
  }
  return out;
}

/** SGLang's logprob entry: `[logprob, token id, text]` (text null unless return_text_in_logprobs; logprob null for
 * a prompt's first scored token). */
export type SglangLogprob = [number | null, number, string | null];

/** One SGLang entry per token of `list` (the sampled or prompt token), and its top alternatives (best first). */
export function sglangLogprobs(list: readonly NativeLogprob[], tokenizer: Tokenizer, withText: boolean):
  { tokens: SglangLogprob[]; tops: SglangLogprob[][] } {
  const entry = (lp: number, id: number): SglangLogprob => [finite(lp), id, withText ? tokenizer.decode([id]) : null];
  return {
    tokens: list.map((lp) => entry(lp.logprob, lp.tokenId)),
    tops: list.map((lp) => lp.topTokenIds.map((id, k) => entry(lp.topLogprobs[k], id))),
  };
}
