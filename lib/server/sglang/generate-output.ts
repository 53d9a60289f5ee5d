// SGLang's /generate answer for one request: `{ text, output_ids, meta_info }`, built up delta by delta. Streamed,
// every frame carries everything so far (SGLang's default: the whole text and output_ids, the logprob lists from the
// start; SGLang's --incremental-streaming-output: only what each frame adds), meta_info.finish_reason null until the
// last frame.
// meta_info: id (the rid), finish_reason (`{ type: 'stop', matched }` with the stop string or token id, `{ type:
// 'length', length }`, `{ type: 'abort', message }`), prompt_tokens, weight_version, completion_tokens,
// cached_tokens, e2e_latency (seconds, on the last); with return_logprob: input_token_logprobs (one entry per prompt
// token from logprob_start_len, the first with a null logprob, as SGLang's), output_token_logprobs, and with
// top_logprobs_num > 0 input_top_logprobs / output_top_logprobs. Entries are `[logprob, token id, text or null]`.
// Invariant: a frame costs the bytes it sends, not a conversion of everything so far: every logprob entry is
// converted and serialized once, when it arrives, and frames are joined from those pieces.
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

export const WEIGHT_VERSION = 'default'; // SGLang's until weights are updated; Spindle's weights never change

function finishOf(reason: FinishReason, stopReason: string | number | null, completion: number): SglangFinishReason {
  if (reason === 'stop') return stopReason === null ? { type: 'stop' } : { type: 'stop', matched: stopReason };
  if (reason === 'length') return { type: 'length', length: completion };
  return { type: 'abort', message: 'the request was aborted' };
}

/** A JSON array built up one serialized element at a time; the whole of it, or the part after a given element. */
class JsonList {
  readonly #items: string[] = [];
  #joined = ''; // the items before #joinedCount, joined
  #joinedCount = 0;
  push(json: string): void { this.#items.push(json); }
  get length(): number { return this.#items.length; }
  toString(): string {
    if (this.#joinedCount < this.#items.length) {
      const rest = this.#items.slice(this.#joinedCount).join(',');
      this.#joined = this.#joinedCount === 0 ? rest : `${this.#joined},${rest}`;
      this.#joinedCount = this.#items.length;
    }
    return `[${this.#joined}]`;
  }
  from(start: number): string { return `[${this.#items.slice(start).join(',')}]`; }
}

export interface AnswerOptions {
  rid: string;
  promptIds: readonly number[];
  logprobs: LogprobRequest;
  noStopTrim: boolean;
  zeroTokens: boolean; // max_new_tokens 0: the one token the engine ran is not reported
  tokenizer: Tokenizer;
}

/** One request's answer, fed its deltas (stream) or its result (not streamed); serialized with json(). */
export class SglangAnswer {
  readonly rid: string;
  readonly #o: AnswerOptions;
  #text = '';
  readonly #ids = new JsonList();
  readonly #outTokens = new JsonList();
  readonly #outTops = new JsonList();
  #inputFields: string | undefined; // the serialized input logprob fields, made once
  #finish: SglangFinishReason | null = null;
  #completion = 0;
  #cached = 0;
  #latency: number | undefined;
  #sent = { text: 0, ids: 0, logprobs: 0 }; // what incremental frames have carried so far

  constructor(o: AnswerOptions) {
    this.rid = o.rid;
    this.#o = o;
  }

  get finished(): boolean { return this.#finish !== null; }

  add(d: RequestDelta, cachedTokens: number, seconds: number): void {
    this.#cached = cachedTokens;
    if (d.promptLogprobs && this.#o.logprobs.want) this.#inputFields = this.#inputLogprobs(d.promptLogprobs);
    if (!this.#o.zeroTokens) {
      this.#text += d.text;
      for (const id of d.tokenIds) this.#ids.push(String(id));
      this.#completion += d.tokenIds.length;
      if (this.#o.logprobs.want && d.logprobs) this.#addOutputLogprobs(d.logprobs);
    }
    if (d.finishReason !== null) this.#end(d.finishReason, d.stopReason, seconds);
  }

  setResult(r: RequestResult): void {
    this.add({ tokenIds: r.tokenIds, text: r.text, logprobs: r.logprobs, promptLogprobs: r.promptLogprobs, finishReason: r.finishReason,
      stopReason: r.stopReason }, r.cachedTokens, r.latencySeconds);
  }

  #end(reason: FinishReason, stopReason: string | number | null, seconds: number): void {
    // max_new_tokens 0 ends where SGLang's prompt-only request ends: length, nothing generated
    this.#finish = this.#o.zeroTokens && reason !== 'abort' ? { type: 'length', length: 0 } : finishOf(reason, stopReason, this.#completion);
    this.#latency = seconds;
    if (this.#o.noStopTrim && typeof stopReason === 'string') this.#text += stopReason; // SGLang's no_stop_trim
  }

  #addOutputLogprobs(list: readonly NativeLogprob[]): void {
    const { top, withText } = this.#o.logprobs;
    const out = sglangLogprobs(list, this.#o.tokenizer, withText);
    for (const e of out.tokens) this.#outTokens.push(JSON.stringify(e));
    if (top > 0) for (const l of out.tops) this.#outTops.push(JSON.stringify(l));
  }

  // prompt positions start+1.. are scored by the engine's prompt logprobs (one per token after the first); the first
  // reported one never is (SGLang's: its logits row is the one before the start)
  #inputLogprobs(promptLps: readonly NativeLogprob[] | undefined): string {
    const { start, top, withText } = this.#o.logprobs;
    const ids = this.#o.promptIds;
    const prompt = sglangLogprobs(promptLps?.slice(start) ?? [], this.#o.tokenizer, withText);
    const firstId = ids[start] < 0 ? 0 : ids[start]; // an image's place: SGLang reports id 0
    const first: SglangLogprob = [null, firstId, withText ? this.#o.tokenizer.decode([firstId]) : null];
    const fields = `"input_token_logprobs":${JSON.stringify([first, ...prompt.tokens])}`;
    return top > 0 ? `${fields},"input_top_logprobs":${JSON.stringify([null, ...prompt.tops])}` : fields;
  }

  /**
   * The answer so far (the whole answer once finished) as JSON text; `index`: a streamed batch's output number.
   * incremental (SGLang's --incremental-streaming-output): the text, output_ids and output logprobs added since the
   * previous frame instead (the prompt's logprobs whole in every frame, as SGLang's).
   */
  json(index?: number, incremental = false): string {
    const lp = this.#o.logprobs;
    const sent = this.#sent;
    let logprobs = '';
    if (lp.want) {
      this.#inputFields ??= this.#inputLogprobs(undefined); // no prompt logprobs asked: the last prompt token only
      const list = (l: JsonList): string => (incremental ? l.from(sent.logprobs) : l.toString());
      logprobs = `,${this.#inputFields},"output_token_logprobs":${list(this.#outTokens)}${lp.top > 0 ? `,"output_top_logprobs":${list(this.#outTops)}` : ''}`;
    }
    const text = incremental ? this.#text.slice(sent.text) : this.#text;
    const ids = incremental ? this.#ids.from(sent.ids) : this.#ids.toString();
    if (incremental) this.#sent = { text: this.#text.length, ids: this.#ids.length, logprobs: this.#outTokens.length };
    const meta = `{"id":${JSON.stringify(this.rid)},"finish_reason":${JSON.stringify(this.#finish)},` +
      `"prompt_tokens":${this.#o.promptIds.length},"weight_version":"${WEIGHT_VERSION}"${logprobs},` +
      `"completion_tokens":${this.#completion},"cached_tokens":${this.#cached}` +
      `${this.#latency !== undefined ? `,"e2e_latency":${this.#latency}` : ''}}`;
    return `{"text":${JSON.stringify(text)},"output_ids":${ids},"meta_info":${meta}${index !== undefined ? `,"index":${index}` : ''}}`;
  }
}
