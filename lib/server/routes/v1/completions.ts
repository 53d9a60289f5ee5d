// POST /v1/completions: OpenAI (legacy) completions on raw prompts: a string, strings, token ids, or lists of
// token ids; `n` samples per prompt (choice index = prompt * n + sample); `echo` prepends the prompt text, and with
// `logprobs` the prompt's tokens and their logprobs (the first null) before the generated ones, as OpenAI's legacy
// API and vLLM answer it (lm-evaluation-harness scores loglikelihoods so); vLLM's `prompt_logprobs` adds a
// choice's `prompt_logprobs` (not streamed).
// Invariant: same streaming contract as chat (text chunks, a finish chunk per choice, optional usage chunk,
// `data: [DONE]`); the prompt is tokenized as LLM.generate does (BOS where the model asks for it, unless the
// text starts with it). `suffix`: fill-in-the-middle with the vocabulary's FIM tokens (lib/fim.ts; a model
// without them is a 400). Runner mode: `model` names a store model; its Modelfile PARAMETERs are the defaults.
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { SamplingParams } from '../../../sampling-params.js';
import type { Tokenizer } from '../../../tokenizer.js';
import { badRequest } from '../../api-error.js';
import { responseFormatSampling } from '../../response-format.js';
import { cacheSaltOf, checkModel, checkPrompt, Job, jobUsage, requestId, samplingFrom, usageOf } from '../../generation.js';
import { beamTokens, serverBeamSearch, wantsBeamSearch } from '../../beam-search.js';
import { completionLogprobs, joinCompletionLogprobs, promptCompletionLogprobs, vllmPromptLogprobs } from '../../logprobs.js';
import { streamChoices, type ChoiceFormat } from '../../openai-stream.js';
import { completionSchema } from '../../schemas.js';
import { fimPrompt, fimTokens } from '../../../fim.js';
import { openAiDefaults, useModel, type ModelUse } from '../../model-use.js';

interface CompletionBody extends Record<string, unknown> {
  model?: string | null;
  prompt: string | string[] | number[] | number[][];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  echo?: boolean | null;
  logprobs?: number | null;
  best_of?: number | null;
  suffix?: string | null;
  logit_bias?: Record<string, unknown> | null;
  response_format?: unknown;
  prompt_logprobs?: number | null;
}

function refuseUnsupported(body: CompletionBody, n: number): void {
  if (body.suffix && body.echo === true) throw badRequest('echo cannot be combined with suffix', 'echo');
  if (body.best_of != null && body.best_of !== n) throw badRequest('best_of other than n is not supported', 'best_of', 'unsupported_parameter');
  if (body.prompt_logprobs != null && body.stream === true) {
    throw badRequest('prompt_logprobs is not available when streaming (echo with logprobs is)', 'prompt_logprobs', 'unsupported_parameter');
  }
}

/** The prompts as token ids, plus their text (for echo). */
function promptsOf(prompt: CompletionBody['prompt'], tokenizer: Tokenizer): { ids: number[][]; texts: string[] } {
  const list: Array<string | number[]> = typeof prompt === 'string' ? [prompt]
    : typeof prompt[0] === 'number' ? [prompt as number[]] : (prompt as Array<string | number[]>);
  const ids = list.map((p) => (typeof p === 'string' ? tokenizer.encodePrompt(p) : p));
  const texts = list.map((p, i) => (typeof p === 'string' ? p : ids[i].every((id) => id < tokenizer.vocabSize) ? tokenizer.decode(p) : ''));
  return { ids, texts };
}

/** suffix (fill-in-the-middle): each text prompt as the prefix of an infill prompt (lib/fim.ts). */
function infillPrompts(prompt: CompletionBody['prompt'], suffix: string, tokenizer: Tokenizer): { ids: number[][]; texts: string[] } {
  const fim = fimTokens(tokenizer);
  if (!fim) throw badRequest('suffix: this model has no fill-in-the-middle tokens (<|fim_prefix|>, <fim_prefix>, <PRE>, ...)', 'suffix', 'unsupported_parameter');
  const list = typeof prompt === 'string' ? [prompt] : prompt;
  if (!list.every((p): p is string => typeof p === 'string')) throw badRequest('suffix needs text prompts (not token ids)', 'prompt');
  return { ids: list.map((p) => fimPrompt(tokenizer, fim, p, suffix)), texts: list };
}

/**
 * Completion chunks: the echoed prompt first (echo; with logprobs it comes with the first token, whose step brings
 * the prompt's logprobs), text pieces with their logprob offsets, an empty finish text.
 */
function completionFormat(params: SamplingParams, tokenizer: Tokenizer, echo: string[] | null, ids: number[][]): ChoiceFormat {
  const wantLogprobs = params.logprobs !== null;
  const offsets = new Map<number, number>(); // choice index -> characters of text sent so far
  return {
    object: 'text_completion',
    opening: (r) => {
      if (!echo || wantLogprobs) return null;
      offsets.set(r.index, echo[r.prompt].length);
      return { text: echo[r.prompt], logprobs: null };
    },
    content: (r, d) => {
      const first = echo !== null && wantLogprobs && !offsets.has(r.index);
      const prefix = first ? echo[r.prompt] : '';
      const offset = offsets.get(r.index) ?? prefix.length;
      offsets.set(r.index, offset + d.text.length);
      if (!wantLogprobs) return { text: d.text, logprobs: null };
      const generated = completionLogprobs(d.logprobs, tokenizer, offset);
      return {
        text: prefix + d.text,
        logprobs: first ? joinCompletionLogprobs(promptCompletionLogprobs(ids[r.prompt], d.promptLogprobs, tokenizer), generated) : generated,
      };
    },
    // a choice that ended before its first token (e.g. a grammar complete at once) still echoes its prompt
    closing: (r) => (echo !== null && wantLogprobs && !offsets.has(r.index) ? { text: echo[r.prompt], logprobs: null } : { text: '', logprobs: null }),
  };
}

/** vLLM's use_beam_search: each prompt's n best beams as its choices (lib/server/beam-search.ts). */
async function beamCompletion(body: CompletionBody, use: ModelUse, reply: FastifyReply, tokenizer: Tokenizer): Promise<unknown> {
  const { ids } = promptsOf(body.prompt, tokenizer);
  const outs = await serverBeamSearch(use.engine, reply, ids, (i) => (ids.length > 1 ? `prompt[${i}]` : 'prompt'), body, 'max_tokens', 16,
    { lora: use.lora, cacheSalt: cacheSaltOf(body) }, openAiDefaults(use));
  const n = (body.n ?? 1) as number;
  const completion = outs.reduce((a, o) => a + o.sequences.reduce((b, s) => b + beamTokens(s, body), 0), 0);
  return {
    id: requestId('cmpl'), object: 'text_completion', created: Math.floor(Date.now() / 1000), model: use.name,
    choices: outs.flatMap((o, i) => o.sequences.map((s, j) => ({
      index: i * n + j, text: s.outputText, logprobs: null, finish_reason: s.finishReason, stop_reason: s.stopReason,
    }))),
    usage: usageOf(ids.reduce((a, p) => a + p.length, 0), completion),
  };
}

export default async function completionsRoute(app: FastifyInstance): Promise<void> {
  app.post('/v1/completions', { schema: { body: completionSchema } }, async (request, reply) => {
    const body = request.body as CompletionBody;
    const use = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model), adapters: true });
    const { engine, name: model } = use;
    const { tokenizer, info } = await engine.ready();
    if (wantsBeamSearch(body)) return beamCompletion(body, use, reply, tokenizer);
    const params = samplingFrom(body, {
      ...(body.logprobs != null ? { logprobs: body.logprobs } : {}),
      ...responseFormatSampling(body.response_format),
    }, openAiDefaults(use));
    // echo with logprobs: the prompt's logprobs too, with as many alternatives as the generated tokens get
    const echoScores = body.echo === true && params.logprobs !== null;
    if (echoScores) params.promptLogprobs = Math.max(params.promptLogprobs ?? 0, params.logprobs!);
    refuseUnsupported(body, params.n);
    const { ids, texts } = body.suffix ? infillPrompts(body.prompt, body.suffix, tokenizer) : promptsOf(body.prompt, tokenizer);
    ids.forEach((p, i) => checkPrompt(p, params, info.maxModelLen, tokenizer.vocabSize, ids.length > 1 ? `prompt[${i}]` : 'prompt'));
    const stream = body.stream === true;
    const job = new Job(engine, ids, params, app.metrics, { lora: use.lora, cacheSalt: cacheSaltOf(body) });
    job.bindToReply(reply);
    const head = { id: requestId('cmpl'), created: Math.floor(Date.now() / 1000), model };
    const echo = body.echo === true ? texts : null;
    if (stream) {
      return streamChoices(reply, job, head, completionFormat(params, tokenizer, echo, ids),
        { includeUsage: body.stream_options?.include_usage === true, wantLogprobs: params.logprobs !== null });
    }
    const results = await job.results();
    return {
      id: head.id,
      object: 'text_completion',
      created: head.created,
      model,
      choices: results.map((r, k) => {
        const prompt = job.requests[k].prompt;
        const prefix = echo ? echo[prompt] : '';
        const generated = params.logprobs !== null ? completionLogprobs(r.logprobs, tokenizer, prefix.length) : null;
        return {
          index: job.requests[k].index,
          text: prefix + r.text,
          logprobs: generated && echoScores ? joinCompletionLogprobs(promptCompletionLogprobs(ids[prompt], r.promptLogprobs, tokenizer), generated) : generated,
          finish_reason: r.finishReason,
          ...(body.prompt_logprobs != null ? { prompt_logprobs: vllmPromptLogprobs(r.promptLogprobs, tokenizer) } : {}),
        };
      }),
      usage: jobUsage(job, results.reduce((a, r) => a + r.tokenIds.length, 0)),
    };
  });
}
