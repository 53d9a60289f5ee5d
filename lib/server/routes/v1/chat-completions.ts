// POST /v1/chat/completions: OpenAI chat completions, non-streamed and streamed (SSE).
// Invariants: a streamed response is a role chunk per choice, content deltas, one finish chunk per choice,
// a `choices: []` usage chunk when stream_options.include_usage, then `data: [DONE]`; a failure after the
// stream started is one `data: {"error": ...}` frame; fields we know but do not support are 400s naming them.
import type { FastifyInstance } from 'fastify';
import type { ChatMessage } from '../../../chat/template.js';
import type { SamplingParams } from '../../../sampling-params.js';
import type { Tokenizer } from '../../../tokenizer.js';
import { badRequest } from '../../api-error.js';
import { checkModel, checkPrompt, Job, jobUsage, requestId, samplingFrom } from '../../generation.js';
import { chatLogprobs } from '../../logprobs.js';
import { streamChoices, type ChoiceFormat } from '../../openai-stream.js';
import { chatCompletionSchema } from '../../schemas.js';

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

/** Chat chunks: a role chunk per choice, `delta.content` pieces, an empty delta with the finish reason. */
function chatFormat(params: SamplingParams, tokenizer: Tokenizer): ChoiceFormat {
  const wantLogprobs = params.logprobs !== null;
  return {
    object: 'chat.completion.chunk',
    opening: () => ({ delta: { role: 'assistant', content: '' }, logprobs: null }),
    content: (_r, d) => ({ delta: { content: d.text }, logprobs: wantLogprobs ? chatLogprobs(d.logprobs, tokenizer) : null }),
    closing: () => ({ delta: {}, logprobs: null }),
  };
}

export default async function chatCompletionsRoute(app: FastifyInstance): Promise<void> {
  app.post('/v1/chat/completions', { schema: { body: chatCompletionSchema } }, async (request, reply) => {
    const body = request.body as ChatBody;
    refuseUnsupported(body);
    const model = checkModel(app.engine, body.model);
    const { tokenizer, info } = await app.engine.ready();
    if (body.top_logprobs != null && body.logprobs !== true) throw badRequest('top_logprobs needs logprobs: true', 'top_logprobs');
    // As vLLM: max_completion_tokens replaces the deprecated max_tokens, which is ignored when both are given
    // (benchmark clients, ours included, send both for servers that know only the old name).
    const sampling = body.max_completion_tokens != null ? { ...body, max_tokens: undefined } : body;
    const params = samplingFrom(sampling, body.logprobs === true ? { logprobs: body.top_logprobs ?? 0 } : {});
    const prompt = tokenizer.applyChatTemplate(templateMessages(body.messages), {
      tokenize: false,
      addGenerationPrompt: body.add_generation_prompt ?? true,
      chatTemplateKwargs: body.chat_template_kwargs ?? undefined,
    });
    const ids = tokenizer.encode(prompt, { addSpecialTokens: false, parseSpecial: true });
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, 'messages',
      body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens');
    const stream = body.stream === true;
    const job = new Job(app.engine, [ids], params, app.metrics);
    job.bindToReply(reply);
    const head = { id: requestId('chatcmpl'), created: Math.floor(Date.now() / 1000), model };
    if (stream) {
      return streamChoices(reply, job, head, chatFormat(params, tokenizer),
        { includeUsage: body.stream_options?.include_usage === true, wantLogprobs: params.logprobs !== null });
    }
    const results = await job.results();
    return {
      id: head.id,
      object: 'chat.completion',
      created: head.created,
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
