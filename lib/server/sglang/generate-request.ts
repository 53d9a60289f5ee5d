// SGLang's GenerateReqInput (POST /generate) read into what the engine runs: the prompts (text or input_ids, one or a
// batch, with image_data), one SamplingParams per prompt (SGLang's sampling_params names; max_new_tokens 128 by
// default and, as SGLang, cut to the room the context leaves), what logprobs each prompt asked for, the request ids
// (rid) and the LoRA adapter of each prompt (lora_path).
// Invariants: every field SGLang would act on and Spindle cannot is refused by name (a 400), never ignored; a
// per-prompt list (sampling_params, return_logprob, logprob_start_len, top_logprobs_num, lora_path, rid) must hold
// one entry per prompt; n is the same for every prompt (SGLang's rule), and sample j of prompt i is output
// i * n + j.
import type { CorePrompt, EngineCore } from '../../engine-core.js';
import { normalizeSamplingParams, SamplingParamsError, type SamplingParams } from '../../sampling-params.js';
import { alignImages, sglangPrompts } from '../../sglang-prompts.js';
import type { ImageSource } from '../../vision/image-input.js';
import { ApiError, badRequest } from '../api-error.js';
import { randomHex } from '../generation.js';

export interface GenerateBody {
  text?: string | string[];
  input_ids?: number[] | number[][];
  sampling_params?: Record<string, unknown> | Record<string, unknown>[] | null;
  return_logprob?: boolean | boolean[] | null;
  logprob_start_len?: number | number[] | null;
  top_logprobs_num?: number | number[] | null;
  return_text_in_logprobs?: boolean | null;
  stream?: boolean | null;
  image_data?: unknown;
  lora_path?: string | (string | null)[] | null;
  rid?: string | string[] | null;
  model?: string | null;
  [key: string]: unknown;
}

/** What a prompt asked for: logprobs or not, from which prompt position (-1: none of the prompt's), how many alternatives. */
export interface LogprobRequest {
  want: boolean;
  start: number; // the first prompt position reported (its logprob is null, as SGLang's); promptTokens - 1 by default
  top: number; // top_logprobs_num
  withText: boolean; // return_text_in_logprobs
}

export interface GenerateRequest {
  prompts: CorePrompt[];
  promptIds: number[][]; // the prompts' token ids (-1 where an image embedding goes)
  params: SamplingParams[]; // one per prompt
  noStopTrim: boolean[]; // per prompt: SGLang's no_stop_trim (the matched stop string stays in the text)
  logprobs: LogprobRequest[]; // per prompt
  rids: string[]; // per prompt
  loras: (string | null)[] | null; // per prompt (null: lora_path not given)
  n: number;
  batch: boolean; // the answer is a list (a batch, or n > 1)
  stream: boolean;
}

/** Fields of GenerateReqInput Spindle does not do, refused when they ask for anything. */
const REFUSED: Record<string, string> = {
  input_embeds: 'input_embeds (prompt embeddings) is not supported: give text or input_ids',
  token_ids_logprob: 'token_ids_logprob is not supported: use top_logprobs_num',
  return_hidden_states: 'return_hidden_states is not supported: use /encode or /v1/embeddings for hidden states',
  custom_logit_processor: 'custom_logit_processor is not supported (Python logit processors cannot run here)',
  session_params: 'session_params is not supported: the prefix cache reuses earlier turns by itself',
  video_data: 'video_data is not supported: give images in image_data',
  audio_data: 'audio_data is not supported',
  return_routed_experts: 'return_routed_experts is not supported',
  input_embeds_b64: 'input_embeds is not supported',
};

/** SGLang sampling parameters with no Spindle counterpart, refused when set. */
const REFUSED_SAMPLING: Record<string, string> = {
  structural_tag: 'structural_tag is not supported: use json_schema, regex or ebnf',
  stop_regex: 'stop_regex is not supported: use stop strings',
  custom_params: 'custom_params is not supported (no custom logit processors)',
};

export const SGLANG_DEFAULT_MAX_NEW_TOKENS = 128;

const isSet = (v: unknown): boolean => v !== undefined && v !== null && v !== false && !(Array.isArray(v) && v.every((x) => x === null || x === false));

/** A per-prompt field: one value for all prompts, or a list with one per prompt. */
function perPrompt<T>(v: T | T[] | null | undefined, count: number, field: string, fallback: T): T[] {
  if (v === undefined || v === null) return new Array<T>(count).fill(fallback);
  if (!Array.isArray(v)) return new Array<T>(count).fill(v);
  if (v.length !== count) throw badRequest(`${field} has ${v.length} entries for ${count} prompts (give one per prompt)`, field);
  return v.map((x) => (x === null || x === undefined ? fallback : x));
}

/** One prompt's sampling_params in SGLang's names, normalized (max_new_tokens 128 unless given). */
function samplingOf(sp: Record<string, unknown>, field: string): { params: SamplingParams; noStopTrim: boolean } {
  if (typeof sp !== 'object' || sp === null || Array.isArray(sp)) throw badRequest(`${field} must be an object`, field);
  const input: Record<string, unknown> = {};
  let noStopTrim = false;
  for (const [k, v] of Object.entries(sp)) {
    if (v === undefined || v === null) continue;
    if (k in REFUSED_SAMPLING) throw badRequest(`${field}.${REFUSED_SAMPLING[k]}`, `${field}.${k}`, 'unsupported_parameter');
    if (k === 'no_stop_trim' || k === 'spaces_between_special_tokens') {
      if (typeof v !== 'boolean') throw badRequest(`${field}.${k} must be a boolean`, `${field}.${k}`);
      if (k === 'no_stop_trim') noStopTrim = v;
      continue; // spaces_between_special_tokens: GGUF detokenization joins pieces as they are (SGLang's default, true, for fast tokenizers)
    }
    input[k === 'sampling_seed' ? 'seed' : k] = v;
  }
  try {
    return { params: normalizeSamplingParams(input, { defaultMaxTokens: SGLANG_DEFAULT_MAX_NEW_TOKENS }), noStopTrim };
  } catch (e) {
    if (e instanceof SamplingParamsError) throw badRequest(`${field}: ${e.message}`, `${field}.${e.param}`);
    throw e;
  }
}

/** SGLang's image_data strings: a URL, data URL, file path, or plain base64 bytes (which SGLang takes too). */
function imageOf(x: ImageSource): ImageSource {
  if (typeof x !== 'string' || /^(https?|data|file):/i.test(x) || /\.(png|jpe?g|webp|gif|bmp)$/i.test(x)) return x;
  const compact = x.replace(/\s+/g, '');
  return compact.length >= 16 && compact.length % 4 === 0 && /^[A-Za-z0-9+/]+=*$/.test(compact) ? Buffer.from(compact, 'base64') : x;
}

/** The prompts' texts or ids, and whether the input was a batch. */
function inputsOf(body: GenerateBody): { input: { text: string[] } | { ids: number[][] }; batch: boolean } {
  const hasText = body.text !== undefined && body.text !== null;
  const hasIds = body.input_ids !== undefined && body.input_ids !== null;
  if (hasText === hasIds) throw badRequest('give exactly one of text or input_ids', hasText ? 'input_ids' : 'text');
  if (hasText) {
    const list = Array.isArray(body.text) ? body.text : [body.text as string];
    if (list.length === 0) throw badRequest('text is an empty list', 'text');
    return { input: { text: list }, batch: Array.isArray(body.text) };
  }
  const ids = body.input_ids as number[] | number[][];
  if (ids.length === 0) throw badRequest('input_ids cannot be empty', 'input_ids');
  const batch = Array.isArray(ids[0]);
  const rows = (batch ? ids : [ids]) as unknown[];
  rows.forEach((row, i) => {
    if (!Array.isArray(row) || !row.every((x) => Number.isInteger(x))) {
      throw badRequest(`input_ids${batch ? `[${i}]` : ''} must be a list of integer token ids`, 'input_ids');
    }
  });
  return { input: { ids: rows as number[][] }, batch };
}

/**
 * Reads a /generate body. `room`: the context length; `vocab`: the tokenizer's size; `inUse`: whether a request id
 * is taken by a request still running.
 */
export async function readGenerateRequest(body: GenerateBody, core: EngineCore, maxModelLen: number, vocab: number,
  inUse: (rid: string) => boolean): Promise<GenerateRequest> {
  for (const [k, why] of Object.entries(REFUSED)) if (isSet(body[k])) throw badRequest(why, k, 'unsupported_parameter');
  const { input, batch: listInput } = inputsOf(body);
  const count = 'text' in input ? input.text.length : input.ids.length;
  const sps = perPrompt<Record<string, unknown>>(body.sampling_params, count, 'sampling_params', {});
  const sampling = sps.map((sp, i) => samplingOf(sp, Array.isArray(body.sampling_params) ? `sampling_params[${i}]` : 'sampling_params'));
  const n = sampling[0].params.n;
  if (sampling.some((s) => s.params.n !== n)) throw badRequest('sampling_params: n must be the same for every prompt', 'sampling_params');
  const batch = listInput || n > 1;
  let images: ImageSource[][];
  try {
    images = alignImages(body.image_data, count, listInput, 'image_data').map((list) => list.map(imageOf));
  } catch (e) {
    throw badRequest((e as Error).message, 'image_data');
  }
  const prompts = await sglangPrompts(core, input, images, {}, 'image_data');
  const promptIds = prompts.map((p) => [...('tokenIds' in p ? p.tokenIds : p as readonly number[])]);
  const want = perPrompt<boolean>(body.return_logprob, count, 'return_logprob', false);
  const starts = perPrompt<number>(body.logprob_start_len, count, 'logprob_start_len', -1);
  const tops = perPrompt<number>(body.top_logprobs_num, count, 'top_logprobs_num', 0);
  const logprobs = promptIds.map((ids, i): LogprobRequest => {
    const at = (f: string): string => (count > 1 ? `${f}[${i}]` : f);
    const start = starts[i] === -1 ? ids.length - 1 : starts[i];
    if (!Number.isInteger(starts[i]) || start < 0 || start >= ids.length) {
      throw badRequest(`${at('logprob_start_len')} must be -1 or a prompt position in [0, ${ids.length - 1}] (got ${starts[i]})`, 'logprob_start_len');
    }
    return { want: want[i] === true, start, top: tops[i], withText: body.return_text_in_logprobs === true };
  });
  const params = sampling.map(({ params: p }, i) => {
    const ids = promptIds[i];
    const what = count > 1 ? `text[${i}]` : body.text != null ? 'text' : 'input_ids';
    if (ids.length === 0) throw badRequest(`${what} is empty (0 tokens)`, what);
    for (let k = 0; k < ids.length; k++) {
      if (ids[k] === -1 && images[i].length > 0) continue; // an image embedding's place
      if (ids[k] < 0 || ids[k] >= vocab) throw badRequest(`${what}: token id ${ids[k]} at position ${k} is outside the vocabulary [0, ${vocab})`, what, 'invalid_token_id');
    }
    if (ids.length >= maxModelLen) {
      throw new ApiError(400, `The input (${ids.length} tokens) is longer than the model's context length (${maxModelLen} tokens).`,
        { param: what, code: 'context_length_exceeded' });
    }
    const lp = logprobs[i];
    const out: SamplingParams = { ...p, maxTokens: Math.min(p.maxTokens ?? Infinity, maxModelLen - ids.length) }; // SGLang cuts it to the room left
    if (lp.want) {
      out.logprobs = checkedTop(lp.top, count > 1 ? `top_logprobs_num[${i}]` : 'top_logprobs_num');
      if (lp.start < ids.length - 1) {
        if (images[i].length > 0) throw badRequest('logprob_start_len: prompt logprobs cannot be combined with images', 'logprob_start_len');
        out.promptLogprobs = out.logprobs;
      }
    }
    return out;
  });
  const rids = perPrompt<string>(body.rid, count, 'rid', '').map((r) => {
    if (typeof r !== 'string') throw badRequest('rid must be a string or a list of strings', 'rid');
    return r === '' ? randomHex(16) : r;
  });
  if (new Set(rids).size !== rids.length) throw badRequest('rid: request ids must be unique within a batch', 'rid');
  const taken = rids.find(inUse);
  if (taken !== undefined) throw badRequest(`rid: '${taken}' is the id of a request still running`, 'rid');
  const loras = body.lora_path === undefined || body.lora_path === null ? null
    : perPrompt<string | null>(body.lora_path, count, 'lora_path', null);
  return {
    prompts, promptIds, params, noStopTrim: sampling.map((s) => s.noStopTrim), logprobs, rids, loras, n, batch, stream: body.stream === true,
  };
}

function checkedTop(top: number, field: string): number {
  try {
    return normalizeSamplingParams({ logprobs: top }).logprobs!;
  } catch (e) {
    if (e instanceof SamplingParamsError) throw badRequest(e.message.replace(/^logprobs/, field), field);
    throw e;
  }
}
