// POST /api/chat (Ollama): messages through the model's chat template, NDJSON streaming unless
// `stream: false`; each chunk is `{ message: { role: 'assistant', content } }`, the final one has empty
// content, done_reason and the durations. An empty message list answers done_reason 'load' (runner mode: loads the
// model; with keep_alive 0 unloads it, done_reason 'unload'). Runner mode: `model` names a store model, loaded on
// demand and kept for keep_alive; its Modelfile TEMPLATE / SYSTEM / MESSAGEs and PARAMETERs (under `options`) apply.
// Tools work as in /v1/chat/completions with tool_choice auto (Ollama has no tool_choice): the reply's
// message carries `tool_calls` with arguments as objects; history messages may carry tool_calls and tool
// results. Images (base64, Ollama's `images`) go before the message text, for models with a vision projector
// (a text-only model refuses them by name). A reasoning model's thinking comes in `message.thinking` (`think`: see
// thinkKwargs); history messages' `thinking` reaches the template as reasoning_content (Qwen3's renders it for the
// turns after the last user message). A final assistant message with text is a prefill: the model continues it
// (transformers' continue_final_message), as Ollama's own templates leave a last assistant message open.
import type { FastifyInstance } from 'fastify';
import { finalMessageText, type ChatMessage, type Role } from '../../../chat/template.js';
import { badRequest } from '../../api-error.js';
import { chatPrompt } from '../../chat-prompt.js';
import { checkPrompt, Job } from '../../generation.js';
import { chatTools, useToolGrammar } from '../../tool-calls.js';
import { constrainAfterReasoning, reasoningParserOf, requestReasoning } from '../../reasoning.js';
import { useModel, withModelOptions } from '../../model-use.js';
import { answerOllama, loadOrUnload, ollamaImageUrl, ollamaModel, ollamaSampling, thinkKwargs, type OllamaBody } from './ollama.js';
import { ollamaChatSchema } from './schemas.js';

interface OllamaMessage {
  role: string;
  content?: string | null;
  images?: string[] | null;
  tool_calls?: unknown[] | null;
  tool_name?: string | null;
  thinking?: string | null;
}

interface ChatBody extends OllamaBody {
  messages?: OllamaMessage[] | null;
  tools?: unknown[] | null;
}

/** Ollama messages -> template messages, refusing what this server cannot render. */
function templateMessages(body: ChatBody, vision: boolean): ChatMessage[] {
  return (body.messages ?? []).map((m, i) => {
    let content: ChatMessage['content'] = m.content ?? '';
    if (m.images && m.images.length > 0) {
      if (!vision) throw badRequest(`messages[${i}].images: this model takes text only (it has no vision projector)`, `messages[${i}].images`, 'unsupported_parameter');
      content = [...m.images.map((b64) => ({ type: 'image_url' as const, image_url: { url: ollamaImageUrl(b64) } })),
        ...(m.content ? [{ type: 'text' as const, text: m.content }] : [])];
    }
    const out: ChatMessage = { role: m.role as Role, content };
    if (m.tool_calls && m.tool_calls.length > 0) out.tool_calls = m.tool_calls.map((c) => ({ type: 'function', ...(c as object) }));
    if (m.tool_name) out.name = m.tool_name;
    if (m.thinking) out.reasoning_content = m.thinking; // templates render it where the model expects it (Qwen3: in a tool loop)
    return out;
  });
}

export default async function ollamaChatRoute(app: FastifyInstance): Promise<void> {
  app.post('/api/chat', { schema: { body: ollamaChatSchema } }, async (request, reply) => {
    const requestStart = performance.now();
    const body = request.body as ChatBody;
    if ((body.messages ?? []).length === 0) return { ...(await loadOrUnload(app, reply, body)), message: { role: 'assistant', content: '' } };
    const use = await useModel(app, reply, body.model, {
      adapters: true,
      single: (e) => ollamaModel(e, body.model), keepAlive: body.keep_alive, numCtx: body.options?.num_ctx,
    });
    const { engine, name: model } = use;
    const { tokenizer, info } = await engine.ready();
    const messages = templateMessages(body, engine.core.acceptsImages);
    const loaded = performance.now();
    const params = ollamaSampling(withModelOptions(use.model, body.options), info.maxModelLen,
      body.logprobs === true ? body.top_logprobs ?? 0 : null, body.format);
    const template = use.model?.manifest.template ?? info.chatTemplate;
    const kwargs = thinkKwargs(body, reasoningParserOf(engine, template) !== null);
    const tools = chatTools(engine, template, body.tools, undefined, undefined);
    useToolGrammar(params, tools, () => badRequest('tools and format cannot both constrain the output; give one', 'format'));
    // a final assistant message with text is a prefill the model continues, as Ollama's templates render it
    const last = messages.at(-1);
    const prefill = last?.role === 'assistant' && !(last.tool_calls?.length) && finalMessageText(messages).trim() !== '';
    const { ids, prompt, images, text } = await chatPrompt(engine, tokenizer, messages,
      { addGenerationPrompt: !prefill, continueFinalMessage: prefill, tools: tools?.templateTools, chatTemplateKwargs: kwargs },
      'messages', use.model?.manifest ?? null);
    const reasoning = requestReasoning(engine, template, text, prefill ? finalMessageText(messages) : null);
    constrainAfterReasoning(params, reasoning);
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, 'messages', 'options.num_predict', images > 0);
    const job = new Job(engine, [prompt], params, app.metrics, { lora: use.lora });
    job.bindToReply(reply);
    return answerOllama(reply, job, {
      piece: (content) => ({ message: { role: 'assistant', content } }),
      thinking: (thinking) => ({ message: { role: 'assistant', content: '', thinking } }),
      final: () => ({}),
    }, { toolParser: tools?.parser, reasoning, model, stream: body.stream !== false, wantLogprobs: params.logprobs !== null, tokenizer, requestStart, loaded });
  });
}
