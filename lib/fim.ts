// Fill-in-the-middle prompts for code models (Ollama's /api/generate `suffix`, OpenAI's completions `suffix`):
// the vocabulary's FIM tokens, found by their text as llama.cpp's vocabulary loader finds them (Qwen2.5-Coder's
// <|fim_prefix|>, StarCoder's <fim_prefix>, CodeLlama's <PRE>, DeepSeek-Coder's <｜fim▁begin｜>, ...), joined in
// llama.cpp's infill order: [BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID, the model then writing the middle.
// Invariant: a spelling counts only when the text is one token of the vocabulary (a model without FIM tokens
// has none: fimTokens is null, and the routes refuse `suffix` for it by name).
import type { Tokenizer } from './tokenizer.js';

const SPELLINGS = {
  pre: ['<|fim_prefix|>', '<fim-prefix>', '<fim_prefix>', '<PRE>', '▁<PRE>', '<｜fim▁begin｜>', '<|fim▁begin|>'],
  suf: ['<|fim_suffix|>', '<fim-suffix>', '<fim_suffix>', '<SUF>', '▁<SUF>', '<｜fim▁hole｜>', '<|fim▁hole|>'],
  mid: ['<|fim_middle|>', '<fim-middle>', '<fim_middle>', '<MID>', '▁<MID>', '<｜fim▁end｜>', '<|fim▁end|>'],
} as const;

export interface FimTokens { pre: number; suf: number; mid: number }

function single(tokenizer: Tokenizer, spellings: readonly string[]): number | null {
  for (const s of spellings) {
    const ids = tokenizer.encode(s, { addSpecialTokens: false, parseSpecial: true });
    if (ids.length === 1) return ids[0];
  }
  return null;
}

/** The model's FIM prefix / suffix / middle tokens, or null when its vocabulary lacks any of them. */
export function fimTokens(tokenizer: Tokenizer): FimTokens | null {
  const pre = single(tokenizer, SPELLINGS.pre), suf = single(tokenizer, SPELLINGS.suf), mid = single(tokenizer, SPELLINGS.mid);
  return pre === null || suf === null || mid === null ? null : { pre, suf, mid };
}

/** The infill prompt's token ids; the texts are tokenized without special tokens (a user's text never makes one). */
export function fimPrompt(tokenizer: Tokenizer, fim: FimTokens, prefix: string, suffix: string): number[] {
  const text = (s: string): number[] => tokenizer.encode(s, { addSpecialTokens: false, parseSpecial: false });
  const bos = tokenizer.encode('', { addSpecialTokens: true, parseSpecial: false }).filter((id) => id === tokenizer.bosTokenId);
  return [...bos, fim.pre, ...text(prefix), fim.suf, ...text(suffix), fim.mid];
}
