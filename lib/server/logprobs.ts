// Native logprobs (sampled token + top alternatives per generated token) in the two OpenAI shapes:
// chat (`logprobs.content[]` with token, logprob, bytes, top_logprobs) and completions (parallel arrays).
// Invariant: one entry per generated token, in order; tokens are the decoded piece of that single id.
import type { NativeLogprob } from '../native.js';
import type { Tokenizer } from '../tokenizer.js';

export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

function piece(tokenizer: Tokenizer, id: number): { token: string; bytes: number[] } {
  const token = tokenizer.decode([id]);
  return { token, bytes: [...Buffer.from(token, 'utf8')] };
}

export function chatLogprobs(list: readonly NativeLogprob[] | undefined, tokenizer: Tokenizer): { content: ChatTokenLogprob[] } {
  return {
    content: (list ?? []).map((lp) => ({
      ...piece(tokenizer, lp.tokenId),
      logprob: lp.logprob,
      top_logprobs: lp.topTokenIds.map((id, k) => ({ ...piece(tokenizer, id), logprob: lp.topLogprobs[k] })),
    })),
  };
}

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>>;
  text_offset: number[];
}

/** `offset`: characters of text before the first of these tokens (echo prompt, earlier chunks). */
export function completionLogprobs(list: readonly NativeLogprob[] | undefined, tokenizer: Tokenizer, offset = 0): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const lp of list ?? []) {
    const token = tokenizer.decode([lp.tokenId]);
    out.tokens.push(token);
    out.token_logprobs.push(lp.logprob);
    const top: Record<string, number> = {};
    lp.topTokenIds.forEach((id, k) => { top[tokenizer.decode([id])] = lp.topLogprobs[k]; });
    out.top_logprobs.push(top);
    out.text_offset.push(at);
    at += token.length;
  }
  return out;
}
