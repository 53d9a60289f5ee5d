// SGLang's /generate answer for one request: `{ text, output_ids, meta_info }`, built up delta by delta. Streamed,
// every frame carries everything so far (SGLang's default: the whole text and output_ids, the logprob lists from the
// start), meta_info.finish_reason null until the last frame.
// meta_info: id (the rid), finish_reason (`{ type: 'stop', matched }` with the stop string or token id, `{ type:
// 'length', length }`, `{ type: 'abort', message }`), prompt_tokens, weight_version, completion_tokens,
// cached_tokens, e2e_latency (seconds, on the last); with return_logprob: input_token_logprobs (one entry per prompt
// token from logprob_start_len, the first with a null logprob, as SGLang's), output_token_logprobs, and with
// top_logprobs_num > 0 input_top_logprobs / output_top_logprobs. Entries are `[logprob, token id, text or null]`.
import type { RequestDelta, RequestResult } from '../../engine-core.js';
import type { FinishReason, NativeLogprob } from '../../native.js';
import type { Tokenizer } from '../../tokenizer.js';
import { sglangLogprobs, type SglangLogprob } from '../logprobs.js';
import type { LogprobRequest } from './generate-request.js';

export type SglangFinishReason =
  | { type: 'stop'; matched: string | number }
  | { type: 'stop' }
  | { type: 'length'; length: number }
  | { type: 'abort'; message: string };

export interface SglangMetaInfo {
  id: string;
  finish_reason: SglangFinishReason | null;
  prompt_tokens: number;
  weight_version: string;
  input_token_logprobs?: SglangLogprob[];
  output_token_logprobs?: SglangLogprob[];
  input_top_logprobs?: (SglangLogprob[] | null)[];
  output_top_logprobs?: SglangLogprob[][];
  completion_tokens: number;
  cached_tokens: number;
  e2e_latency?: number;
}

export interface SglangOutput {
  text: string;
  output_ids: number[];
  meta_info: SglangMetaInfo;
  index?: number; // streamed batches: which output of the batch the frame is about
}

export const WEIGHT_VERSION = 'default'; // SGLang's until weights are updated; Spindle's weights never change

function finishOf(reason: FinishReason, stopReason: string | number | null, completion: number): SglangFinishReason {
  if (reason === 'stop') return stopReason === null ? { type: 'stop' } : { type: 'stop', matched: stopReason };
  if (reason === 'length') return { type: 'length', length: completion };
  return { type: 'abort', message: 'the request was aborted' };
}

/** One request's answer, fed its deltas (stream) or its result (not streamed). */
export class SglangAnswer {
  #text = '';
  #ids: number[] = [];
  #outLps: NativeLogprob[] = [];
  #promptLps: NativeLogprob[] | undefined;
  #finish: SglangFinishReason | null = null;
  #cached = 0;
  #latency: number | undefined;

  constructor(readonly rid: string, readonly promptIds: readonly number[], readonly logprobs: LogprobRequest,
    readonly noStopTrim: boolean, readonly tokenizer: Tokenizer) {}

  add(d: RequestDelta, cachedTokens: number, seconds: number): void {
    this.#text += d.text;
    this.#ids.push(...d.tokenIds);
    if (d.logprobs) this.#outLps.push(...d.logprobs);
    if (d.promptLogprobs) this.#promptLps = d.promptLogprobs;
    this.#cached = cachedTokens;
    if (d.finishReason !== null) this.#end(d.finishReason, d.stopReason, seconds);
  }

  setResult(r: RequestResult): void {
    this.#text = r.text;
    this.#ids = r.tokenIds;
    this.#outLps = r.logprobs ?? [];
    this.#promptLps = r.promptLogprobs;
    this.#cached = r.cachedTokens;
    this.#end(r.finishReason, r.stopReason, r.latencySeconds);
  }

  #end(reason: FinishReason, stopReason: string | number | null, seconds: number): void {
    this.#finish = finishOf(reason, stopReason, this.#ids.length);
    this.#latency = seconds;
    if (this.noStopTrim && typeof stopReason === 'string') this.#text += stopReason; // SGLang's no_stop_trim
  }

  get finished(): boolean { return this.#finish !== null; }

  /** The answer so far (the whole answer once finished). */
  toJSON(): SglangOutput {
    const meta: SglangMetaInfo = {
      id: this.rid, finish_reason: this.#finish, prompt_tokens: this.promptIds.length, weight_version: WEIGHT_VERSION,
      ...(this.logprobs.want ? this.#logprobFields() : {}),
      completion_tokens: this.#ids.length, cached_tokens: this.#cached,
      ...(this.#latency !== undefined ? { e2e_latency: this.#latency } : {}),
    };
    return { text: this.#text, output_ids: [...this.#ids], meta_info: meta };
  }

  #logprobFields(): Partial<SglangMetaInfo> {
    const { start, top, withText } = this.logprobs;
    const ids = this.promptIds;
    // prompt positions start+1.. are scored by the engine's prompt logprobs (one per token after the first); the
    // first reported one never is (SGLang's: its logits row is the one before the start)
    const scored = this.#promptLps?.slice(start) ?? [];
    const prompt = sglangLogprobs(scored, this.tokenizer, withText);
    const firstId = ids[start] < 0 ? 0 : ids[start]; // an image's place: SGLang reports id 0
    const first: SglangLogprob = [null, firstId, withText ? this.tokenizer.decode([firstId]) : null];
    const out = sglangLogprobs(this.#outLps, this.tokenizer, withText);
    return {
      input_token_logprobs: [first, ...prompt.tokens],
      output_token_logprobs: out.tokens,
      ...(top > 0 ? { input_top_logprobs: [null, ...prompt.tops], output_top_logprobs: out.tops } : {}),
    };
  }
}
