// POST /v1/chat/completions: OpenAI chat completions, non-streamed and streamed (SSE). In runner mode `model`
// names a store model (loaded on demand), whose Modelfile TEMPLATE / SYSTEM / MESSAGEs shape the prompt and whose
// PARAMETERs are the sampling defaults.
// Invariants: a streamed response is a role chunk per choice, content deltas, one finish chunk per choice,
// a `choices: []` usage chunk when stream_options.include_usage, then `data: [DONE]`; a failure after the
// stream started is one `data: {"error": ...}` frame; fields we know but do not support are 400s naming them.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { finalMessageText, type ChatMessage } from '../../../chat/template.js';
import type { SamplingParams } from '../../../sampling-params.js';
import type { NativeModelInfo } from '../../../native.js';
import type { Tokenizer } from '../../../tokenizer.js';
import { badRequest } from '../../api-error.js';
import { responseFormatSampling } from '../../response-format.js';
import { chatPrompt, turnOptions } from '../../chat-prompt.js';
import { cacheSaltOf, checkModel, checkPrompt, Job, jobUsage, requestId, samplingFrom, usageOf, type JobRequest } from '../../generation.js';
import { beamTokens, serverBeamSearch, wantsBeamSearch } from '../../beam-search.js';
import { chatLogprobs, vllmPromptLogprobs } from '../../logprobs.js';
import { streamChoices, type ChoiceFormat } from '../../openai-stream.js';
import { constrainAfterReasoning, OutputSplitter, reasoningFields, reasoningTokenCount, requestReasoning, thinkingKwargs,
  withReasoningTokens, type RequestReasoning } from '../../reasoning.js';
import { splitReasoning, type SplitReasoning } from '../../../reasoning/index.js';
import { ChatDeltas, chatTools, openAiToolCalls, toolFinishReason, useToolGrammar, type ChatTools } from '../../tool-calls.js';
import { chatCompletionSchema } from '../../schemas.js';
import { openAiDefaults, useModel, type ModelUse } from '../../model-use.js';

interface ChatBody extends Record<string, unknown> {
  model?: string | null;
  messages: ChatMessage[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  add_generation_prompt?: boolean | null;
  continue_final_message?: boolean | null;
  echo?: boolean | null;
  chat_template_kwargs?: Record<string, unknown> | null;
  response_format?: unknown;
  tools?: unknown[] | null;
  tool_choice?: unknown;
  parallel_tool_calls?: boolean | null;
  logit_bias?: Record<string, unknown> | null;
  max_completion_tokens?: number | null;
  reasoning_effort?: string | null;
  prompt_logprobs?: number | null;
}

/** Known fields this server does not implement: refused by name rather than ignored. */
function refuseUnsupported(body: ChatBody): void {
  if (body.functions !== undefined && body.functions !== null) throw badRequest('functions: function calling is not supported by this server yet', 'functions', 'unsupported_parameter');
  if (body.chat_template !== undefined && body.chat_template !== null) {
    throw badRequest('chat_template: request-supplied chat templates are not accepted; the model\'s template is used', 'chat_template', 'unsupported_parameter');
  }
  if (Array.isArray(body.modalities) && body.modalities.some((m) => m !== 'text')) throw badRequest('modalities: only text output is supported', 'modalities', 'unsupported_parameter');
  if (body.prompt_logprobs != null && body.stream === true) {
    throw badRequest('prompt_logprobs is not available when streaming', 'prompt_logprobs', 'unsupported_parameter');
  }
}

/** OpenAI's 'developer' role is the newer name of 'system'. */
function templateMessages(messages: ChatMessage[]): ChatMessage[] {
  return messages.map((m) => ((m.role as string) === 'developer' ? { ...m, role: 'system' } : m));
}

/** Chat chunks: a role chunk per choice, `delta.content` pieces (or reasoning, or tool-call deltas), an empty delta
 * with the finish reason. */
function chatFormat(params: SamplingParams, tokenizer: Tokenizer, tools: ChatTools | null, reasoning: RequestReasoning | null,
  echo: string): ChoiceFormat {
  const wantLogprobs = params.logprobs !== null;
  const parser = tools?.parser ?? null;
  const plain = !parser && !reasoning; // the model's text is the content, delta for delta
  /** A choice's output split, its deltas, and (with reasoning) every token id for the reasoning token count. */
  interface Choice { output: OutputSplitter; deltas: ChatDeltas; ids: number[] }
  const choices = new Map<number, Choice>(); // per choice index
  const choiceOf = (r: JobRequest): Choice => {
    let c = choices.get(r.index);
    if (!c) choices.set(r.index, c = { output: new OutputSplitter(reasoning, parser), deltas: new ChatDeltas(), ids: [] });
    return c;
  };
  return {
    object: 'chat.completion.chunk',
    opening: () => ({ delta: { role: 'assistant', content: echo }, logprobs: null }), // vLLM's echo comes with the role
    content: (r, d) => {
      const logprobs = wantLogprobs ? chatLogprobs(d.logprobs, tokenizer) : null;
      if (plain) return { delta: { content: d.text }, logprobs };
      const c = choiceOf(r);
      const deltas = c.deltas.deltas(c.output.push(d.text));
      if (deltas.length === 0) return logprobs ? [{ delta: {}, logprobs }] : [];
      return deltas.map((delta, i) => ({ delta, logprobs: i === 0 ? logprobs : null }));
    },
    closing: () => ({ delta: {}, logprobs: null }),
    finish: (r, reason) => {
      if (plain) return { chunks: [], reason };
      const c = choiceOf(r);
      const chunks = c.deltas.deltas(c.output.finish()).map((delta) => ({ delta, logprobs: null }));
      return { chunks, reason: parser ? toolFinishReason(reason, c.deltas.calls, tools!) : reason };
    },
    tokens: reasoning ? (r, ids) => { choiceOf(r).ids.push(...ids); } : undefined,
    completionDetails: reasoning ? () => ({
      reasoning_tokens: [...choices.values()].reduce((a, c) => a + reasoningTokenCount(tokenizer, reasoning, c.output.reasoned, c.ids), 0),
    }) : undefined,
  };
}

/** The assistant message of a finished choice: content (after the reasoning, when the model reasons), or content +
 * tool_calls parsed from it. */
function chatMessage(text: string, reason: string, tools: ChatTools | null, split: SplitReasoning | null):
  { message: Record<string, unknown>; finish: string } {
  const answer = split ? split.content : text;
  const thought = split?.reasoning ? reasoningFields(split.reasoning) : {}; // only where the choice wrote reasoning
  const noContent = split?.reasoning ? null : ''; // content of a choice that only reasoned
  if (!tools?.parser) return { message: { role: 'assistant', content: answer.length > 0 ? answer : noContent, ...thought }, finish: reason };
  const parsed = tools.parser.parse(answer);
  if (parsed.toolCalls.length === 0) {
    return { message: { role: 'assistant', content: parsed.content.length > 0 ? parsed.content : noContent, ...thought }, finish: reason };
  }
  return {
    message: { role: 'assistant', content: parsed.content.length > 0 ? parsed.content : null, ...thought, tool_calls: openAiToolCalls(parsed.toolCalls) },
    finish: toolFinishReason(reason, parsed.toolCalls.length, tools),
  };
}

/** vLLM's `echo`: the final message's text, when it is an assistant message (the answer's role), to go before the
 * answer (a continued prefill comes back whole); '' otherwise. */
function echoText(body: ChatBody, messages: readonly ChatMessage[]): string {
  if (body.echo !== undefined && body.echo !== null && typeof body.echo !== 'boolean') throw badRequest('echo must be a boolean', 'echo');
  if (body.echo !== true) return '';
  return messages.at(-1)?.role === 'assistant' ? finalMessageText(messages) : '';
}

/** vLLM's use_beam_search: the n best beams of the rendered conversation as the choices (lib/server/beam-search.ts). */
async function beamChat(body: ChatBody, use: ModelUse, reply: FastifyReply, tokenizer: Tokenizer, info: NativeModelInfo): Promise<unknown> {
  const { engine } = use;
  const messages = templateMessages(body.messages);
  const turn = turnOptions(body, messages);
  const { ids, images, text } = await chatPrompt(engine, tokenizer, messages, {
    addGenerationPrompt: turn.addGenerationPrompt, continueFinalMessage: turn.continueFinalMessage,
    chatTemplateKwargs: thinkingKwargs(body.reasoning_effort, body.chat_template_kwargs),
  }, 'messages', use.model?.manifest ?? null);
  if (images > 0) throw badRequest('use_beam_search takes text conversations only (no images)', 'messages', 'unsupported_parameter');
  const [out] = await serverBeamSearch(engine, reply, [ids], () => 'messages', body, 'max_completion_tokens', null,
    { lora: use.lora, cacheSalt: cacheSaltOf(body) }, openAiDefaults(use));
  const reasoning = requestReasoning(engine, use.model?.manifest.template ?? info.chatTemplate, text, turn.continued);
  return {
    id: requestId('chatcmpl'), object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: use.name,
    choices: out.sequences.map((s, index) => {
      const split = reasoning ? splitReasoning(reasoning.parser, reasoning.start, s.outputText) : { reasoning: null, content: s.outputText };
      return {
        index, finish_reason: s.finishReason, stop_reason: s.stopReason, logprobs: null,
        message: { role: 'assistant', content: split.content, ...(split.reasoning ? reasoningFields(split.reasoning) : {}) },
      };
    }),
    usage: usageOf(ids.length, out.sequences.reduce((a, s) => a + beamTokens(s, body), 0)),
  };
}

export default async function chatCompletionsRoute(app: FastifyInstance): Promise<void> {
  app.post('/v1/chat/completions', { schema: { body: chatCompletionSchema } }, async (request, reply) => {
    const body = request.body as ChatBody;
    refuseUnsupported(body);
    const use = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model), adapters: true });
    const { engine, name: model } = use;
    const { tokenizer, info } = await engine.ready();
    if (body.top_logprobs != null && body.logprobs !== true) throw badRequest('top_logprobs needs logprobs: true', 'top_logprobs');
    if (wantsBeamSearch(body)) return beamChat(body, use, reply, tokenizer, info);
    // As vLLM: max_completion_tokens replaces the deprecated max_tokens, which is ignored when both are given
    // (benchmark clients, ours included, send both for servers that know only the old name).
    const sampling = body.max_completion_tokens != null ? { ...body, max_tokens: undefined } : body;
    const params = samplingFrom(sampling, {
      ...(body.logprobs === true ? { logprobs: body.top_logprobs ?? 0 } : {}),
      ...responseFormatSampling(body.response_format),
    }, openAiDefaults(use));
    const template = use.model?.manifest.template ?? info.chatTemplate;
    const tools = chatTools(engine, template, body.tools, body.tool_choice, body.parallel_tool_calls);
    useToolGrammar(params, tools, params.grammar?.kind === 'json' || params.grammar?.kind === 'json_object' ? 'response_format' : 'a structured output');
    const messages = templateMessages(body.messages);
    const turn = turnOptions(body, messages);
    const { ids, prompt, images, text } = await chatPrompt(engine, tokenizer, messages, {
      addGenerationPrompt: turn.addGenerationPrompt, continueFinalMessage: turn.continueFinalMessage,
      chatTemplateKwargs: thinkingKwargs(body.reasoning_effort, body.chat_template_kwargs),
      tools: tools?.templateTools,
    }, 'messages', use.model?.manifest ?? null);
    const reasoning = requestReasoning(engine, template, text, turn.continued);
    constrainAfterReasoning(params, reasoning);
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, 'messages',
      body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens', images > 0);
    const stream = body.stream === true;
    const echo = echoText(body, messages);
    const job = new Job(engine, [prompt], params, app.metrics, { lora: use.lora, cacheSalt: cacheSaltOf(body) });
    job.bindToReply(reply);
    const head = { id: requestId('chatcmpl'), created: Math.floor(Date.now() / 1000), model };
    if (stream) {
      return streamChoices(reply, job, head, chatFormat(params, tokenizer, tools, reasoning, echo),
        { includeUsage: body.stream_options?.include_usage === true, wantLogprobs: params.logprobs !== null });
    }
    const results = await job.results();
    const splits = results.map((r) => (reasoning ? splitReasoning(reasoning.parser, reasoning.start, r.text) : null));
    const reasoningTokens = reasoning
      ? results.reduce((a, r, k) => a + reasoningTokenCount(tokenizer, reasoning, splits[k]!.reasoning !== null, r.tokenIds), 0) : null;
    return {
      id: head.id,
      object: 'chat.completion',
      created: head.created,
      model,
      choices: results.map((r, index) => {
        const { message, finish } = chatMessage(r.text, r.finishReason, tools, splits[index]);
        if (echo) message.content = echo + ((message.content as string | null) ?? '');
        return { index, message, logprobs: params.logprobs !== null ? chatLogprobs(r.logprobs, tokenizer) : null, finish_reason: finish };
      }),
      usage: withReasoningTokens(jobUsage(job, results.reduce((a, r) => a + r.tokenIds.length, 0)), reasoningTokens),
      ...(body.prompt_logprobs != null ? { prompt_logprobs: vllmPromptLogprobs(results[0]?.promptLogprobs, tokenizer) } : {}),
    };
  });
}
