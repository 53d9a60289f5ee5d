// POST /v1/completions: OpenAI (legacy) completions on raw prompts: a string, strings, token ids, or lists of
// token ids; `n` samples per prompt (choice index = prompt * n + sample); `echo` prepends the prompt text.
// Invariant: same streaming contract as chat (text chunks, a finish chunk per choice, optional usage chunk,
// `data: [DONE]`); the prompt is tokenized as LLM.generate does (BOS where the model asks for it).
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { SamplingParams } from '../../../sampling-params.js';
import type { Tokenizer } from '../../../tokenizer.js';
import { badRequest, toApiError } from '../../api-error.js';
import { checkModel, checkPrompt, Job, jobUsage, requestId, samplingFrom } from '../../generation.js';
import { completionLogprobs } from '../../logprobs.js';
import { completionSchema } from '../../schemas.js';
import { SseStream } from '../../sse.js';

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
}

function refuseUnsupported(body: CompletionBody, n: number): void {
  if (body.suffix !== undefined && body.suffix !== null && body.suffix !== '') throw badRequest('suffix is not supported', 'suffix', 'unsupported_parameter');
  if (body.best_of != null && body.best_of !== n) throw badRequest('best_of other than n is not supported', 'best_of', 'unsupported_parameter');
  if (body.logit_bias && Object.keys(body.logit_bias).length > 0) throw badRequest('logit_bias is not supported', 'logit_bias', 'unsupported_parameter');
}

/** The prompts as token ids, plus their text (for echo). */
function promptsOf(prompt: CompletionBody['prompt'], tokenizer: Tokenizer): { ids: number[][]; texts: string[] } {
  const list: Array<string | number[]> = typeof prompt === 'string' ? [prompt]
    : typeof prompt[0] === 'number' ? [prompt as number[]] : (prompt as Array<string | number[]>);
  const ids = list.map((p) => (typeof p === 'string' ? tokenizer.encode(p) : p));
  const texts = list.map((p, i) => (typeof p === 'string' ? p : ids[i].every((id) => id < tokenizer.vocabSize) ? tokenizer.decode(p) : ''));
  return { ids, texts };
}

interface Ctx {
  id: string;
  created: number;
  model: string;
  params: SamplingParams;
  tokenizer: Tokenizer;
  echo: string[] | null; // prompt texts to prepend
}

async function streamCompletion(reply: FastifyReply, job: Job, ctx: Ctx, includeUsage: boolean): Promise<void> {
  const sse = new SseStream(reply);
  const base = { id: ctx.id, object: 'text_completion', created: ctx.created, model: ctx.model };
  const usage = includeUsage ? { usage: null } : {};
  const chunk = (index: number, text: string, logprobs: unknown, finish: string | null): void =>
    sse.send({ ...base, choices: [{ index, text, logprobs, finish_reason: finish }], ...usage });
  const wantLogprobs = ctx.params.logprobs !== null;
  let completion = 0;
  try {
    await Promise.all(job.requests.map(async (r) => {
      let offset = 0;
      if (ctx.echo) {
        chunk(r.index, ctx.echo[r.prompt], null, null);
        offset = ctx.echo[r.prompt].length;
      }
      for await (const d of r.handle.deltas!) {
        completion += d.tokenIds.length;
        if (d.text.length > 0 || (wantLogprobs && d.tokenIds.length > 0)) {
          chunk(r.index, d.text, wantLogprobs ? completionLogprobs(d.logprobs, ctx.tokenizer, offset) : null, null);
          offset += d.text.length;
        }
        if (d.finishReason !== null) chunk(r.index, '', null, d.finishReason);
      }
    }));
    if (includeUsage) sse.send({ ...base, choices: [], usage: jobUsage(job, completion) });
  } catch (e) {
    job.abort();
    sse.send(toApiError(e).toBody());
  }
  sse.end();
}

export default async function completionsRoute(app: FastifyInstance): Promise<void> {
  app.post('/v1/completions', { schema: { body: completionSchema } }, async (request, reply) => {
    const body = request.body as CompletionBody;
    const model = checkModel(app.engine, body.model);
    const { tokenizer, info } = await app.engine.ready();
    const params = samplingFrom(body, body.logprobs != null ? { logprobs: body.logprobs } : {});
    refuseUnsupported(body, params.n);
    const { ids, texts } = promptsOf(body.prompt, tokenizer);
    ids.forEach((p, i) => checkPrompt(p, params, info.maxModelLen, tokenizer.vocabSize, ids.length > 1 ? `prompt[${i}]` : 'prompt'));
    const stream = body.stream === true;
    const job = new Job(app.engine, ids, params, stream);
    job.bindToReply(reply);
    const ctx: Ctx = {
      id: requestId('cmpl'), created: Math.floor(Date.now() / 1000), model, params, tokenizer, echo: body.echo === true ? texts : null,
    };
    if (stream) return streamCompletion(reply, job, ctx, body.stream_options?.include_usage === true);
    const results = await job.results();
    return {
      id: ctx.id,
      object: 'text_completion',
      created: ctx.created,
      model,
      choices: results.map((r, k) => {
        const prefix = ctx.echo ? ctx.echo[job.requests[k].prompt] : '';
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
