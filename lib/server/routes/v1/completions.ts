// POST /v1/completions: OpenAI (legacy) completions on raw prompts: a string, strings, token ids, or lists of
// token ids; `n` samples per prompt (choice index = prompt * n + sample); `echo` prepends the prompt text.
// Invariant: same streaming contract as chat (text chunks, a finish chunk per choice, optional usage chunk,
// `data: [DONE]`); the prompt is tokenized as LLM.generate does (BOS where the model asks for it, unless the
// text starts with it). `suffix`: fill-in-the-middle with the vocabulary's FIM tokens (lib/fim.ts; a model
// without them is a 400). Runner mode: `model` names a store model; its Modelfile PARAMETERs are the defaults.
import type { FastifyInstance } from 'fastify';
import type { SamplingParams } from '../../../sampling-params.js';
import type { Tokenizer } from '../../../tokenizer.js';
import { badRequest } from '../../api-error.js';
import { responseFormatSampling } from '../../response-format.js';
import { checkModel, checkPrompt, Job, jobUsage, requestId, samplingFrom } from '../../generation.js';
import { completionLogprobs } from '../../logprobs.js';
import { streamChoices, type ChoiceFormat } from '../../openai-stream.js';
import { completionSchema } from '../../schemas.js';
import { fimPrompt, fimTokens } from '../../../fim.js';
import { openAiDefaults, useModel } from '../../model-use.js';

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
}

function refuseUnsupported(body: CompletionBody, n: number): void {
  if (body.suffix && body.echo === true) throw badRequest('echo cannot be combined with suffix', 'echo');
  if (body.best_of != null && body.best_of !== n) throw badRequest('best_of other than n is not supported', 'best_of', 'unsupported_parameter');
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

/** Completion chunks: the echoed prompt first (echo), text pieces with their logprob offsets, an empty finish text. */
function completionFormat(params: SamplingParams, tokenizer: Tokenizer, echo: string[] | null): ChoiceFormat {
  const wantLogprobs = params.logprobs !== null;
  const offsets = new Map<number, number>(); // choice index -> characters of text sent so far
  return {
    object: 'text_completion',
    opening: (r) => {
      if (!echo) return null;
      offsets.set(r.index, echo[r.prompt].length);
      return { text: echo[r.prompt], logprobs: null };
    },
    content: (r, d) => {
      const offset = offsets.get(r.index) ?? 0;
      offsets.set(r.index, offset + d.text.length);
      return { text: d.text, logprobs: wantLogprobs ? completionLogprobs(d.logprobs, tokenizer, offset) : null };
    },
    closing: () => ({ text: '', logprobs: null }),
  };
}

export default async function completionsRoute(app: FastifyInstance): Promise<void> {
  app.post('/v1/completions', { schema: { body: completionSchema } }, async (request, reply) => {
    const body = request.body as CompletionBody;
    const use = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model) });
    const { engine, name: model } = use;
    const { tokenizer, info } = await engine.ready();
    const params = samplingFrom(body, {
      ...(body.logprobs != null ? { logprobs: body.logprobs } : {}),
      ...responseFormatSampling(body.response_format),
    }, openAiDefaults(use.model));
    refuseUnsupported(body, params.n);
    const { ids, texts } = body.suffix ? infillPrompts(body.prompt, body.suffix, tokenizer) : promptsOf(body.prompt, tokenizer);
    ids.forEach((p, i) => checkPrompt(p, params, info.maxModelLen, tokenizer.vocabSize, ids.length > 1 ? `prompt[${i}]` : 'prompt'));
    const stream = body.stream === true;
    const job = new Job(engine, ids, params, app.metrics);
    job.bindToReply(reply);
    const head = { id: requestId('cmpl'), created: Math.floor(Date.now() / 1000), model };
    const echo = body.echo === true ? texts : null;
    if (stream) {
      return streamChoices(reply, job, head, completionFormat(params, tokenizer, echo),
        { includeUsage: body.stream_options?.include_usage === true, wantLogprobs: params.logprobs !== null });
    }
    const results = await job.results();
    return {
      id: head.id,
      object: 'text_completion',
      created: head.created,
      model,
      choices: results.map((r, k) => {
        const prefix = echo ? echo[job.requests[k].prompt] : '';
        return {
          index: job.requests[k].index,
          text: prefix + r.text,
          logprobs: params.logprobs !== null ? completionLogprobs(r.logprobs, tokenizer, prefix.length) : null,
          finish_reason: r.finishReason,
        };
      }),
      usage: jobUsage(job, results.reduce((a, r) => a + r.tokenIds.length, 0)),
    };
  });
}
