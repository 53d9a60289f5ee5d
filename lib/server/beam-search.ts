// vLLM's `use_beam_search` on /v1/completions and /v1/chat/completions: `n` beams (the beam width), `max_tokens`,
// `ignore_eos`, `temperature`, `length_penalty`, `include_stop_str_in_output`, searched as LLM.beamSearch does
// (lib/beam-search.ts); each prompt's choices are its n best beams, best first.
// Invariants: the search holds admission for n sequences per prompt until it ends and is aborted when the client goes
// away; a field beam search cannot honour (stream, logprobs, echo, suffix, an output constraint, tools, prediction,
// stop strings, a non-default sampling knob) is a 400 naming it, never ignored.
import type { FastifyReply } from 'fastify';
import { beamSearch, normalizeBeamSearchParams, type BeamSearchOutput } from '../beam-search.js';
import type { SubmitTarget } from '../engine-core.js';
import { badRequest } from './api-error.js';
import type { ServerEngine } from './plugins/engine.js';

/** Fields a beam-search request may not set (beyond their defaults). */
const REFUSED = ['stream', 'logprobs', 'top_logprobs', 'echo', 'suffix', 'response_format', 'tools', 'prediction', 'stop',
  'stop_token_ids', 'structured_outputs', 'guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'regex', 'ebnf', 'json_schema',
  'top_p', 'top_k', 'min_p', 'presence_penalty', 'frequency_penalty', 'repetition_penalty', 'logit_bias', 'seed', 'prompt_logprobs', 'min_tokens'];

/** Whether the body asks for beam search; a bad use_beam_search is a 400. */
export function wantsBeamSearch(body: Record<string, unknown>): boolean {
  const v = body.use_beam_search;
  if (v === undefined || v === null || v === false) return false;
  if (v !== true) throw badRequest('use_beam_search must be a boolean', 'use_beam_search');
  for (const k of REFUSED) {
    const x = body[k];
    if (x !== undefined && x !== null && x !== false && !(Array.isArray(x) && x.length === 0)) {
      throw badRequest(`${k} cannot be combined with use_beam_search`, k, 'unsupported_parameter');
    }
  }
  return true;
}

/** Beam search over `prompts` (token ids) for one request: one output per prompt. */
export async function serverBeamSearch(engine: ServerEngine, reply: FastifyReply, prompts: number[][], body: Record<string, unknown>,
  maxTokensField: string, target: SubmitTarget): Promise<BeamSearchOutput[]> {
  const { tokenizer, info } = await engine.ready();
  const longest = Math.max(...prompts.map((p) => p.length));
  const maxTokens = (body[maxTokensField] ?? body.max_tokens ?? Math.max(info.maxModelLen - longest, 1)) as number;
  const params = normalizeBeamSearchParams({
    beam_width: (body.n ?? 1) as number, max_tokens: maxTokens, ignore_eos: body.ignore_eos as boolean | undefined,
    temperature: body.temperature as number | undefined, length_penalty: body.length_penalty as number | undefined,
    include_stop_str_in_output: body.include_stop_str_in_output as boolean | undefined,
  });
  const release = engine.begin(prompts.length * params.beamWidth);
  const controller = new AbortController();
  const res = reply.raw;
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
