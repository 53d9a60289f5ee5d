// The random dataset: prompts of a target token length built from a fixed word list (optionally after one
// fixed prefix shared by every prompt, vLLM's --random-prefix-len), and output lengths.
// Invariant: the client has no tokenizer, so a prompt of N tokens is N words, each of which is one token
// (with its leading space) in the Llama-2, Llama-3 and Qwen vocabularies (test/bench-serve-units.test.ts
// checks this); the true counts come back from the server (usage.prompt_tokens / prompt_eval_count) and
// the report says which was used. The server may add a BOS token or a chat template on top.
import { createRng } from './random.js';
import type { SampleRequest } from './types.js';

// 255 common lowercase English words; order matters only for reproducibility of a seed.
export const WORDS: readonly string[] = (
  'the of and to in is was for that on with as by at from his her he she it they we you are be this have had ' +
  'not but or an which one their all were there when who more been would has will can if no out so what up ' +
  'about into than them some could other time only new then these two may first any like now my such over our ' +
  'even most made after also did many before must through back years where much your way well down should ' +
  'because each just those people how too little state good very make world still own see men work long here ' +
  'get both between life being under never day same another know while last might us great old year off come ' +
  'since against go came right used take three states himself few house use during without again place around ' +
  'however home small found thought went say part once general high upon school every does got united left ' +
  'number course war until always away something fact though water less public put think almost hand enough ' +
  'far took head yet government system better set told nothing night end why called find going look asked ' +
  'later knew point next program city business give group toward young days let room president side social ' +
  'given present several order national possible rather second face per among form important often things ' +
  'looked early white case become large big need four within felt children along saw best church ever least power'
).split(' ');

export interface RandomDatasetOptions {
  numPrompts: number;
  inputLen: number; // tokens, >= 1
  outputLen: number; // tokens, >= 1
  rangeRatio: number; // [0, 1)
  seed: number; // uint32
  prefixLen?: number; // tokens of one fixed prefix before every prompt (default 0)
  tokenIds?: number; // > 0: prompts of token ids drawn uniformly from [0, tokenIds) instead of words (exact lengths
                     // whatever the vocabulary; vLLM's random dataset samples ids too)
}

/**
 * Length interval of vLLM's random dataset (vllm/benchmarks/datasets.py, get_sampling_params): a length
 * is drawn uniformly from the integers [floor(len * (1 - r)), ceil(len * (1 + r))], r in [0, 1), and an
 * output length is at least 1. Prompts here are at least 1 token too (an empty prompt is not a request).
 */
export function lengthInterval(len: number, rangeRatio: number): [number, number] {
  if (!(rangeRatio >= 0 && rangeRatio < 1)) throw new RangeError(`random range ratio must be in [0, 1), got ${rangeRatio}`);
  const lo = Math.max(1, Math.floor(len * (1 - rangeRatio)));
  const hi = Math.max(1, Math.ceil(len * (1 + rangeRatio)));
  return [lo, hi];
}

/** A prompt of `tokens` words drawn from WORDS. */
export function randomPrompt(tokens: number, next: () => number): string {
  const words: string[] = new Array(tokens);
  for (let i = 0; i < tokens; i++) words[i] = WORDS[Math.floor(next() * WORDS.length)];
  return words.join(' ');
}

/** A prompt of `tokens` token ids drawn uniformly from [0, vocab). */
export function randomTokenIds(tokens: number, vocab: number, next: () => number): number[] {
  const ids: number[] = new Array(tokens);
  for (let i = 0; i < tokens; i++) ids[i] = Math.floor(next() * vocab);
  return ids;
}

/** numPrompts requests; the same options give the same prompts and lengths. */
export function randomDataset(opts: RandomDatasetOptions): SampleRequest[] {
  const [inLo, inHi] = lengthInterval(opts.inputLen, opts.rangeRatio);
  const [outLo, outHi] = lengthInterval(opts.outputLen, opts.rangeRatio);
  const lengths = createRng(opts.seed, 'lengths');
  const words = createRng(opts.seed, 'words');
  const prefixLen = opts.prefixLen ?? 0;
  const vocab = opts.tokenIds ?? 0;
  const prefixRng = createRng(opts.seed, 'prefix');
  const prefixIds = vocab > 0 ? randomTokenIds(prefixLen, vocab, prefixRng.next) : [];
  const prefix = vocab === 0 && prefixLen > 0 ? randomPrompt(prefixLen, prefixRng.next) + ' ' : '';
  const out: SampleRequest[] = [];
  for (let i = 0; i < opts.numPrompts; i++) {
    const promptLen = lengths.int(inLo, inHi);
    const outputLen = lengths.int(outLo, outHi);
    if (vocab > 0) {
      const promptIds = prefixIds.concat(randomTokenIds(promptLen, vocab, words.next));
      out.push({ prompt: promptIds.join(' '), promptIds, promptLenEstimate: prefixLen + promptLen, outputLen });
    } else {
      out.push({ prompt: prefix + randomPrompt(promptLen, words.next), promptLenEstimate: prefixLen + promptLen, outputLen });
    }
  }
  return out;
}

export interface MultiTurnOptions {
  conversations: number;
  turns: number;
  systemLen: number; // tokens of the system prompt every conversation shares
  userLen: number; // tokens of each user message
  outputLen: number; // max tokens of each answer
  seed: number;
}

/** The multi-turn workload: one shared system prompt, and per conversation one user message per turn. */
export interface MultiTurnDataset {
  system: string;
  users: string[][]; // [conversation][turn]
  opts: MultiTurnOptions;
}

export function multiTurnDataset(opts: MultiTurnOptions): MultiTurnDataset {
  const sys = createRng(opts.seed, 'system');
  const words = createRng(opts.seed, 'users');
  const users = Array.from({ length: opts.conversations }, () =>
    Array.from({ length: opts.turns }, () => randomPrompt(opts.userLen, words.next)));
  return { system: randomPrompt(opts.systemLen, sys.next), users, opts };
}

/** Turn `turn` of a conversation, given the answers of its earlier turns: the whole history as messages. */
export function multiTurnRequest(d: MultiTurnDataset, conversation: number, turn: number, answers: string[]): SampleRequest {
  const messages: NonNullable<SampleRequest['messages']> = [{ role: 'system', content: d.system }];
  for (let k = 0; k <= turn; k++) {
    messages.push({ role: 'user', content: d.users[conversation][k] });
    if (k < turn) messages.push({ role: 'assistant', content: answers[k] });
  }
  return {
    prompt: messages.map((m) => m.content).join('\n'),
    promptLenEstimate: d.opts.systemLen + (turn + 1) * d.opts.userLen + turn * d.opts.outputLen,
    outputLen: d.opts.outputLen,
    messages,
  };
}

export interface EditDatasetOptions {
  numPrompts: number;
  textLen: number; // tokens of the text to rewrite
  seed: number;
}

/**
 * The edit workload (issue 17 (d), OpenAI's Predicted Outputs use case): rewrite a text of textLen tokens with
 * small changes; the request predicts the text itself back, and asks for as many tokens as the text has plus a
 * few. Servers without Predicted Outputs ignore `prediction` and decode plainly.
 */
export function editDataset(opts: EditDatasetOptions): SampleRequest[] {
  const words = createRng(opts.seed, 'edit');
  return Array.from({ length: opts.numPrompts }, () => {
    const text = randomPrompt(opts.textLen, words.next);
    return {
      prompt: `Rewrite the following text, changing only a few words:\n\n${text}`,
      promptLenEstimate: opts.textLen + 12,
      outputLen: opts.textLen + 8,
      prediction: text,
    };
  });
}
