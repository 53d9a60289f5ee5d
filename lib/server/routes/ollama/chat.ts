// POST /api/chat (Ollama): messages through the model's chat template, NDJSON streaming unless
// `stream: false`; each chunk is `{ message: { role: 'assistant', content } }`, the final one has empty
// content, done_reason and the durations. An empty message list answers done_reason 'load'.
// Tools work as in /v1/chat/completions with tool_choice auto (Ollama has no tool_choice): the reply's
// message carries `tool_calls` with arguments as objects; history messages may carry tool_calls and tool
// results. Invariant: images are refused by name (no vision yet); `thinking` of history messages is not rendered.
import type { FastifyInstance } from 'fastify';
import type { ChatMessage, Role } from '../../../chat/template.js';
import { badRequest } from '../../api-error.js';
import { checkPrompt, Job } from '../../generation.js';
import { chatTools } from '../../tool-calls.js';
import { answerOllama, loadAnswer, ollamaModel, ollamaSampling, refuseCommon, type OllamaBody } from './ollama.js';
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
function templateMessages(body: ChatBody): ChatMessage[] {
  return (body.messages ?? []).map((m, i) => {
    if (m.images && m.images.length > 0) throw badRequest(`messages[${i}].images: this model takes text only`, `messages[${i}].images`, 'unsupported_parameter');
    const out: ChatMessage = { role: m.role as Role, content: m.content ?? '' };
    if (m.tool_calls && m.tool_calls.length > 0) out.tool_calls = m.tool_calls.map((c) => ({ type: 'function', ...(c as object) }));
    if (m.tool_name) out.name = m.tool_name;
    return out;
  });
}

export default async function ollamaChatRoute(app: FastifyInstance): Promise<void> {
  app.post('/api/chat', { schema: { body: ollamaChatSchema } }, async (request, reply) => {
    const requestStart = performance.now();
    const body = request.body as ChatBody;
    refuseCommon(body);
    const model = ollamaModel(app.engine, body.model);
    const messages = templateMessages(body);
    if (messages.length === 0) return { ...loadAnswer(body), message: { role: 'assistant', content: '' } };
    const { tokenizer, info } = await app.engine.ready();
    const loaded = performance.now();
    const params = ollamaSampling(body.options, info.maxModelLen, body.logprobs === true ? body.top_logprobs ?? 0 : null, body.format);
    const tools = chatTools(app.engine, info.chatTemplate, body.tools, undefined, undefined);
    if (tools?.grammar) {
      if (params.grammar) throw badRequest('tools and format cannot both constrain the output; give one', 'format');
      params.grammar = tools.grammar;
      if (tools.parser?.name === 'lfm2') params.skipSpecialTokens = false;
    }
    const text = tokenizer.applyChatTemplate(messages, { tokenize: false, addGenerationPrompt: true, tools: tools?.templateTools }) as string;
    const ids = tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: true });
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, 'messages', 'options.num_predict');
    const job = new Job(app.engine, [ids], params, app.metrics);
    job.bindToReply(reply);
    return answerOllama(reply, job, {
      piece: (content) => ({ message: { role: 'assistant', content } }),
      final: () => ({}),
    }, { toolParser: tools?.parser, model, stream: body.stream !== false, wantLogprobs: params.logprobs !== null, tokenizer, requestStart, loaded });
  });
}
