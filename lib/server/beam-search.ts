// vLLM's `use_beam_search` on /v1/completions and /v1/chat/completions: `n` beams (the beam width), `max_tokens`
// (completions: 16 when absent, as vLLM's; chat: the rest of the context), `ignore_eos`, `temperature` (1 when absent,
// as vLLM's server; a Modelfile's in runner mode), `seed`, `length_penalty`, `include_stop_str_in_output`, searched as
// LLM.beamSearch does (lib/beam-search.ts); each prompt's choices are its n best beams, best first.
// Invariants: the search holds admission for n sequences per prompt until it ends and is aborted when the client goes
// away (or has already gone); a field beam search cannot honour (stream, logprobs, echo, suffix, stop strings or ids,
// an output constraint, tools, prediction, a sampling knob away from its default) is a 400 naming it, never ignored.
import type { FastifyReply } from 'fastify';
import { beamSearch, normalizeBeamSearchParams, type BeamSearchOutput, type BeamSearchSequence } from '../beam-search.js';
import type { SubmitTarget } from '../engine-core.js';
import { normalizeSamplingParams } from '../sampling-params.js';
import { badRequest } from './api-error.js';
import { checkPrompt } from './generation.js';
import type { ServerEngine } from './plugins/engine.js';

const absent = (x: unknown): boolean => x === undefined || x === null;
const empty = (x: unknown): boolean => absent(x) || (Array.isArray(x) && x.length === 0) || (typeof x === 'object' && x !== null && Object.keys(x).length === 0);

/** Per refused field: whether its value is the default (which beam search takes as given). */
const AT_DEFAULT: Record<string, (x: unknown, body: Record<string, unknown>) => boolean> = {
  stream: (x) => absent(x) || x === false,
  logprobs: (x) => absent(x) || x === false,
  top_logprobs: absent,
  echo: (x) => absent(x) || x === false,
  suffix: (x) => absent(x) || x === '',
  prompt_logprobs: absent,
  response_format: (x) => absent(x) || (x as { type?: unknown }).type === 'text',
  tools: empty, prediction: absent, stop: empty, stop_token_ids: empty, logit_bias: empty,
  structured_outputs: absent, guided_json: absent, guided_regex: absent, guided_choice: absent, guided_grammar: absent,
  regex: absent, ebnf: absent, json_schema: absent,
  top_p: (x) => absent(x) || x === 1,
  top_k: (x) => absent(x) || x === -1 || x === 0,
  min_p: (x) => absent(x) || x === 0,
  presence_penalty: (x) => absent(x) || x === 0,
  frequency_penalty: (x) => absent(x) || x === 0,
  repetition_penalty: (x) => absent(x) || x === 1,
  repeat_penalty: (x) => absent(x) || x === 1,
  min_tokens: (x) => absent(x) || x === 0,
  skip_special_tokens: (x) => absent(x) || x === true,
  best_of: (x, body) => absent(x) || x === (body.n ?? 1),
};

/** Whether the body asks for beam search; a bad use_beam_search, or a field beam search cannot honour, is a 400. */
export function wantsBeamSearch(body: Record<string, unknown>): boolean {
  const v = body.use_beam_search;
  if (v === undefined || v === null || v === false) return false;
  if (v !== true) throw badRequest('use_beam_search must be a boolean', 'use_beam_search');
  for (const [k, atDefault] of Object.entries(AT_DEFAULT)) {
    if (!atDefault(body[k], body)) throw badRequest(`${k} cannot be combined with use_beam_search`, k, 'unsupported_parameter');
  }
  return true;
}

/** Completion tokens of a beam as vLLM's server counts them: an ending end-of-generation token only when shown. */
export function beamTokens(s: BeamSearchSequence, body: Record<string, unknown>): number {
  return s.outputTokenIds.length - (s.stopReason !== null && body.include_stop_str_in_output !== true ? 1 : 0);
}

/**
 * Beam search over `prompts` (token ids) for one request: one output per prompt (each checked as every route checks
 * a prompt, promptParam naming it). maxTokensField: the body's name of
 * max_tokens (chat: max_completion_tokens first); defaultMaxTokens: null for the rest of the context; defaults: a
 * store model's Modelfile values (temperature, max_tokens) under the request's.
 */
export async function serverBeamSearch(engine: ServerEngine, reply: FastifyReply, prompts: number[][], promptParam: (i: number) => string,
  body: Record<string, unknown>, maxTokensField: string, defaultMaxTokens: number | null, target: SubmitTarget,
  defaults: Record<string, unknown> = {}): Promise<BeamSearchOutput[]> {
  const { tokenizer, info } = await engine.ready();
  const oneToken = normalizeSamplingParams({ maxTokens: 1 }); // every prompt needs room for a token after it
  prompts.forEach((p, i) => checkPrompt(p, oneToken, info.maxModelLen, tokenizer.vocabSize, promptParam(i)));
  const longest = Math.max(...prompts.map((p) => p.length));
  const maxTokens = body[maxTokensField] ?? body.max_tokens ?? defaults.max_tokens ?? defaultMaxTokens ?? Math.max(info.maxModelLen - longest, 1);
  const params = normalizeBeamSearchParams({
    beam_width: (body.n ?? 1) as number, max_tokens: maxTokens as number, ignore_eos: body.ignore_eos as boolean | undefined,
    temperature: (body.temperature ?? defaults.temperature ?? 1) as number, seed: body.seed as number | undefined,
    length_penalty: body.length_penalty as number | undefined, include_stop_str_in_output: body.include_stop_str_in_output as boolean | undefined,
  });
  const res = reply.raw;
  if (res.destroyed) throw badRequest('the client closed the connection before the beam search started');
  const release = engine.begin(prompts.length * params.beamWidth);
  const controller = new AbortController();
  const onClose = (): void => { if (!res.writableFinished) controller.abort(); };
  res.once('close', onClose);
  try {
    return await beamSearch({ core: engine.core, tokenizer, eogIds: info.eogIds, maxModelLen: info.maxModelLen, signal: controller.signal, target },
      prompts, params);
  } finally {
    res.off('close', onClose);
    release();
  }
}
