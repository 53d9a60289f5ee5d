// SGLang's GenerateReqInput (POST /generate) read into what the engine runs: the prompts (text or input_ids, one or a
// batch, with image_data), one SamplingParams per prompt (SGLang's sampling_params names; max_new_tokens 128 by
// default and, as SGLang, cut to the room the context leaves), what logprobs each prompt asked for, the request ids
// (rid) and the LoRA adapter of each prompt (lora_path).
// Invariants: every field SGLang would act on and Spindle cannot is refused by name (a 400), never ignored; a
// per-prompt list (sampling_params, return_logprob, logprob_start_len, top_logprobs_num, lora_path, rid) must hold
// one entry per prompt; n is the same for every prompt (SGLang's rule), and sample j of prompt i is output
// i * n + j; anything wrong with the prompts or their images is a 400 naming the field, never a 500.
import type { CorePrompt, EngineCore } from '../../engine-core.js';
import { limitRefusal } from '../../native.js';
import { normalizeSamplingParams, SamplingParamsError, type SamplingParams } from '../../sampling-params.js';
import { alignImages, PromptInputError, promptInputs, sglangPrompts } from '../../sglang-prompts.js';
import { ImageInputError, type ImageSource } from '../../vision/image-input.js';
import { ApiError, badRequest } from '../api-error.js';
import { checkPrompt, randomHex } from '../generation.js';

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
  extra_key?: string | null; // SGLang's cache namespace (vLLM's cache_salt, also taken)
  cache_salt?: string | null;
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
  ids: string[]; // one per output (i * n + j): the prompt's rid, with _j after it when n > 1
  cacheSalt: string | null;
  zeroTokens: boolean[]; // per prompt: max_new_tokens 0 (SGLang scores the prompt only: no output is reported)
  promptIds: number[][]; // the prompts' token ids (-1 where an image embedding goes)
  params: SamplingParams[]; // one per prompt
  noStopTrim: boolean[]; // per prompt: SGLang's no_stop_trim (the matched stop string stays in the text)
  logprobs: LogprobRequest[]; // per prompt
  rids: string[]; // per prompt (a single rid for a batch becomes <rid>_<i>, as SGLang's)
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

/**
 * One prompt's sampling_params in SGLang's names, normalized (max_new_tokens 128 unless given). No model defaults:
 * SGLang's --sampling-defaults model feeds its chat route only, never the native /generate.
 */
function samplingOf(sp: Record<string, unknown>, field: string): { params: SamplingParams; noStopTrim: boolean; zero: boolean } {
  if (typeof sp !== 'object' || sp === null || Array.isArray(sp)) throw badRequest(`${field} must be an object`, field);
  const input: Record<string, unknown> = {};
  let noStopTrim = false;
  const zero = sp.max_new_tokens === 0; // SGLang's prompt-only request: run for one token, report none
  let untilFull = sp.max_new_tokens === null; // SGLang: None = until the context is full
  for (const [k, v] of Object.entries(sp)) {
    if (v === undefined || v === null) continue;
    if (k === 'max_new_tokens' && v === 0) continue;
    if (k in REFUSED_SAMPLING) throw badRequest(`${field}.${REFUSED_SAMPLING[k]}`, `${field}.${k}`, 'unsupported_parameter');
    if (k === 'no_stop_trim' || k === 'spaces_between_special_tokens') {
      if (typeof v !== 'boolean') throw badRequest(`${field}.${k} must be a boolean`, `${field}.${k}`);
      if (k === 'no_stop_trim') noStopTrim = v;
      continue; // spaces_between_special_tokens: GGUF detokenization joins pieces as they are (SGLang's default, true, for fast tokenizers)
    }
    input[k] = v;
  }
  if (zero) { input.max_new_tokens = 1; untilFull = false; }
  try {
    const params = normalizeSamplingParams(input, { defaultMaxTokens: untilFull ? null : SGLANG_DEFAULT_MAX_NEW_TOKENS });
    return { params, noStopTrim, zero };
  } catch (e) {
    if (e instanceof SamplingParamsError) throw badRequest(`${field}: ${e.message}`, `${field}.${e.param}`);
    throw e;
  }
}

// The first bytes of the image formats the decoder reads (PNG, JPEG, GIF, WebP's RIFF, BMP).
const IMAGE_MAGIC = [[0x89, 0x50, 0x4e, 0x47], [0xff, 0xd8, 0xff], [0x47, 0x49, 0x46], [0x52, 0x49, 0x46, 0x46], [0x42, 0x4d]];

/**
 * SGLang's image_data strings: a URL, data URL or file path, or plain base64 bytes (which SGLang takes too): a
 * string that is strict base64 of an image (its first bytes say which format) is its bytes; anything else is left
 * to the image loader (a path only under --allowed-local-media-path).
 */
function imageOf(x: ImageSource): ImageSource {
  if (typeof x !== 'string' || /^(https?|data|file):/i.test(x)) return x;
  const compact = x.replace(/\s+/g, '');
  if (compact.length < 16 || compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) return x;
  const bytes = Buffer.from(compact, 'base64');
  return IMAGE_MAGIC.some((m) => m.every((b, i) => bytes[i] === b)) ? bytes : x;
}

/** The prompts' texts or ids (SGLang's text / input_ids, also /encode's), and whether the input was a batch; a 400
 * naming the field otherwise (an empty list too). */
export function inputsOf(body: { text?: unknown; input_ids?: unknown }): { input: { text: string[] } | { ids: number[][] }; batch: boolean } {
  if (Array.isArray(body.text) && body.text.length === 0) throw badRequest('text is an empty list', 'text');
  if (Array.isArray(body.input_ids) && body.input_ids.length === 0) throw badRequest('input_ids cannot be empty', 'input_ids');
  try {
    return promptInputs(body.text, body.input_ids, { text: 'text', ids: 'input_ids' });
  } catch (e) {
    if (e instanceof PromptInputError) throw badRequest(e.message, e.param);
    throw e;
  }
}

/** The prompts with their images; a problem with either is a 400 naming image_data (or the prompt). */
async function promptsOf(core: EngineCore, input: { text: string[] } | { ids: number[][] }, images: ImageSource[][]): Promise<CorePrompt[]> {
  if (images.some((list) => list.length > 0) && !core.acceptsImages) {
    throw badRequest('image_data: this model takes text only (it has no vision projector; start the server with --mmproj)', 'image_data', 'unsupported_parameter');
  }
  try {
    return await sglangPrompts(core, input, images, {}, 'image_data');
  } catch (e) {
    if (e instanceof ImageInputError) throw badRequest(e.message, 'image_data', e.code);
    if (e instanceof ApiError) throw e;
    throw badRequest((e as Error).message, 'image_data'); // a layout the prompt does not fit (placeholders, markers)
  }
}

/** One string for the whole request (SGLang's extra_key, vLLM's cache_salt), or null. */
function cacheSaltOf(body: GenerateBody): string | null {
  const v = body.extra_key ?? body.cache_salt ?? null;
  if (v === null) return null;
  if (typeof v !== 'string' || v === '') throw badRequest('extra_key (cache_salt) must be a non-empty string, one for the whole request', 'extra_key');
  return v;
}

/** Reads a /generate body. maxModelLen: the context length; vocab: the tokenizer's size. */
export async function readGenerateRequest(body: GenerateBody, core: EngineCore, maxModelLen: number, vocab: number): Promise<GenerateRequest> {
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
  const prompts = await promptsOf(core, input, images);
  const promptIds = prompts.map((p) => [...('tokenIds' in p ? p.tokenIds : p as readonly number[])]);
  const want = perPrompt<boolean>(body.return_logprob, count, 'return_logprob', false);
  const starts = perPrompt<number>(body.logprob_start_len, count, 'logprob_start_len', -1);
  const tops = perPrompt<number>(body.top_logprobs_num, count, 'top_logprobs_num', 0);
  const at = (f: string, i: number): string => (count > 1 ? `${f}[${i}]` : f);
  const logprobs: LogprobRequest[] = [];
  const params = sampling.map(({ params: p }, i) => {
    const ids = promptIds[i];
    const what = count > 1 ? `${body.text != null ? 'text' : 'input_ids'}[${i}]` : body.text != null ? 'text' : 'input_ids';
    if (ids.length >= maxModelLen) {
      throw new ApiError(400, `The input (${ids.length} tokens) is longer than the model's context length (${maxModelLen} tokens).`,
        { param: what, code: 'context_length_exceeded' });
    }
    // SGLang cuts max_new_tokens to the room the context leaves (min_new_tokens with it); the rest of the checks are
    // every route's (empty prompt, ids outside the vocabulary, stop ids)
    const room = maxModelLen - ids.length;
    const out: SamplingParams = { ...p, maxTokens: Math.min(p.maxTokens ?? room, room), minTokens: Math.min(p.minTokens, room) };
    checkPrompt(ids, out, maxModelLen, vocab, what, 'max_new_tokens', images[i].length > 0);
    const lp: LogprobRequest = { want: want[i] === true, start: ids.length - 1, top: tops[i], withText: body.return_text_in_logprobs === true };
    if (lp.want) {
      const start = starts[i] === -1 ? ids.length - 1 : starts[i];
      if (!Number.isInteger(starts[i]) || start < 0 || start >= ids.length) {
        throw badRequest(`${at('logprob_start_len', i)} must be -1 or a prompt position in [0, ${ids.length - 1}] (got ${starts[i]})`, 'logprob_start_len');
      }
      const refusal = limitRefusal('logprobs', lp.top);
      if (refusal !== null) throw badRequest(`${at('top_logprobs_num', i)} must be ${refusal} (got ${lp.top})`, 'top_logprobs_num');
      lp.start = start;
      out.logprobs = lp.top;
      if (start < ids.length - 1) {
        if (images[i].length > 0) throw badRequest('logprob_start_len: prompt logprobs cannot be combined with images', 'logprob_start_len');
        out.promptLogprobs = lp.top;
      }
    }
    logprobs.push(lp);
    return out;
  });
  const ridIn = body.rid ?? null;
  if (Array.isArray(ridIn) && ridIn.length !== count) throw badRequest(`rid has ${ridIn.length} entries for ${count} prompts (give one per prompt)`, 'rid');
  const rids = Array.isArray(ridIn) ? ridIn : ridIn === null ? prompts.map(() => randomHex(16))
    : listInput ? prompts.map((_, i) => `${ridIn}_${i}`) : [ridIn]; // one rid for a batch: <rid>_<i>, as SGLang's
  if (!rids.every((r) => typeof r === 'string' && r !== '')) throw badRequest('rid must be a non-empty string or a list of them', 'rid');
  const ids = rids.flatMap((r) => (n > 1 ? Array.from({ length: n }, (_, j) => `${r}_${j}`) : [r]));
  if (new Set([...rids, ...ids]).size !== (n > 1 ? rids.length + ids.length : rids.length)) {
    throw badRequest('rid: request ids (and the <rid>_<j> of n samples) must be unique within a request', 'rid');
  }
  const loras = body.lora_path === undefined || body.lora_path === null ? null
    : perPrompt<string | null>(body.lora_path, count, 'lora_path', null);
  return {
    prompts, ids, cacheSalt: cacheSaltOf(body), zeroTokens: sampling.map((s) => s.zero), promptIds, params,
    noStopTrim: sampling.map((s) => s.noStopTrim), logprobs, rids, loras, n, batch, stream: body.stream === true,
  };
}

