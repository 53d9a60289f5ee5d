// POST /v1/chat/completions: OpenAI chat completions, non-streamed and streamed (SSE).
// Invariants: a streamed response is a role chunk per choice, content deltas, one finish chunk per choice,
// a `choices: []` usage chunk when stream_options.include_usage, then `data: [DONE]`; a failure after the
// stream started is one `data: {"error": ...}` frame; fields we know but do not support are 400s naming them.
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ChatMessage } from '../../../chat/template.js';
import type { SamplingParams } from '../../../sampling-params.js';
import type { Tokenizer } from '../../../tokenizer.js';
import { badRequest, toApiError } from '../../api-error.js';
import { checkModel, checkPrompt, Job, jobUsage, requestId, samplingFrom } from '../../generation.js';
import { chatLogprobs } from '../../logprobs.js';
import { chatCompletionSchema } from '../../schemas.js';
import { SseStream } from '../../sse.js';

interface ChatBody extends Record<string, unknown> {
  model?: string | null;
  messages: ChatMessage[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  add_generation_prompt?: boolean | null;
  chat_template_kwargs?: Record<string, unknown> | null;
  response_format?: { type?: string } | null;
  tools?: unknown[] | null;
  logit_bias?: Record<string, unknown> | null;
  max_completion_tokens?: number | null;
}

/** Known fields this server does not implement: refused by name rather than ignored. */
function refuseUnsupported(body: ChatBody): void {
  if (Array.isArray(body.tools) && body.tools.length > 0) throw badRequest('tools: tool calling is not supported by this server yet', 'tools', 'unsupported_parameter');
  if (body.functions !== undefined && body.functions !== null) throw badRequest('functions: function calling is not supported by this server yet', 'functions', 'unsupported_parameter');
  if (body.response_format && body.response_format.type !== 'text') {
    throw badRequest(`response_format: only { type: 'text' } is supported (got ${JSON.stringify(body.response_format.type)})`, 'response_format', 'unsupported_parameter');
  }
  if (body.logit_bias && Object.keys(body.logit_bias).length > 0) throw badRequest('logit_bias is not supported', 'logit_bias', 'unsupported_parameter');
  if (body.chat_template !== undefined && body.chat_template !== null) {
    throw badRequest('chat_template: request-supplied chat templates are not accepted; the model\'s template is used', 'chat_template', 'unsupported_parameter');
  }
  if (Array.isArray(body.modalities) && body.modalities.some((m) => m !== 'text')) throw badRequest('modalities: only text output is supported', 'modalities', 'unsupported_parameter');
}

/** OpenAI's 'developer' role is the newer name of 'system'. */
function templateMessages(messages: ChatMessage[]): ChatMessage[] {
  return messages.map((m) => ((m.role as string) === 'developer' ? { ...m, role: 'system' } : m));
}

interface Ctx {
  id: string;
  created: number;
  model: string;
  params: SamplingParams;
  tokenizer: Tokenizer;
}

async function streamChat(reply: FastifyReply, job: Job, ctx: Ctx, includeUsage: boolean): Promise<void> {
  const sse = new SseStream(reply);
  const base = { id: ctx.id, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model };
  const usage = includeUsage ? { usage: null } : {};
  const chunk = (index: number, delta: Record<string, unknown>, logprobs: unknown, finish: string | null): void =>
    sse.send({ ...base, choices: [{ index, delta, logprobs, finish_reason: finish }], ...usage });
  const wantLogprobs = ctx.params.logprobs !== null;
  for (const r of job.requests) chunk(r.index, { role: 'assistant', content: '' }, null, null);
  let completion = 0;
  try {
    await Promise.all(job.requests.map(async (r) => {
      for await (const d of r.handle.deltas!) {
        completion += d.tokenIds.length;
        if (d.text.length > 0 || (wantLogprobs && d.tokenIds.length > 0)) {
          chunk(r.index, { content: d.text }, wantLogprobs ? chatLogprobs(d.logprobs, ctx.tokenizer) : null, null);
        }
        if (d.finishReason !== null) chunk(r.index, {}, null, d.finishReason);
      }
    }));
    if (includeUsage) sse.send({ ...base, choices: [], usage: jobUsage(job, completion) });
  } catch (e) {
    job.abort();
    sse.send(toApiError(e).toBody());
  }
  sse.end();
}

export default async function chatCompletionsRoute(app: FastifyInstance): Promise<void> {
  app.post('/v1/chat/completions', { schema: { body: chatCompletionSchema } }, async (request, reply) => {
    const body = request.body as ChatBody;
    refuseUnsupported(body);
    const model = checkModel(app.engine, body.model);
    const { tokenizer, info } = await app.engine.ready();
    if (body.top_logprobs != null && body.logprobs !== true) throw badRequest('top_logprobs needs logprobs: true', 'top_logprobs');
    const params = samplingFrom(body, body.logprobs === true ? { logprobs: body.top_logprobs ?? 0 } : {});
    const prompt = tokenizer.applyChatTemplate(templateMessages(body.messages), {
      tokenize: false,
      addGenerationPrompt: body.add_generation_prompt ?? true,
      chatTemplateKwargs: body.chat_template_kwargs ?? undefined,
    });
    const ids = tokenizer.encode(prompt, { addSpecialTokens: false, parseSpecial: true });
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, 'messages',
      body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens');
    const stream = body.stream === true;
    const job = new Job(app.engine, [ids], params, stream);
    job.bindToReply(reply);
    const ctx: Ctx = { id: requestId('chatcmpl'), created: Math.floor(Date.now() / 1000), model, params, tokenizer };
    if (stream) return streamChat(reply, job, ctx, body.stream_options?.include_usage === true);
    const results = await job.results();
    return {
      id: ctx.id,
      object: 'chat.completion',
      created: ctx.created,
      model,
      choices: results.map((r, index) => ({
        index,
        message: { role: 'assistant', content: r.text },
        logprobs: params.logprobs !== null ? chatLogprobs(r.logprobs, tokenizer) : null,
        finish_reason: r.finishReason,
      })),
      usage: jobUsage(job, results.reduce((a, r) => a + r.tokenIds.length, 0)),
    };
  });
}
