// POST /api/chat (Ollama): messages through the model's chat template, NDJSON streaming unless
// `stream: false`; each chunk is `{ message: { role: 'assistant', content } }`, the final one has empty
// content, done_reason and the durations. An empty message list answers done_reason 'load'.
// Invariant: tools, tool calls in the history and images are refused by name (this server has neither tool
// calling nor vision yet); the `thinking` and `tool_name` fields of history messages are not rendered.
import type { FastifyInstance } from 'fastify';
import type { ChatMessage, Role } from '../../../chat/template.js';
import { badRequest } from '../../api-error.js';
import { checkPrompt, Job } from '../../generation.js';
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
  if (body.tools && body.tools.length > 0) throw badRequest('tools: tool calling is not supported by this server yet', 'tools', 'unsupported_parameter');
  return (body.messages ?? []).map((m, i) => {
    if (m.images && m.images.length > 0) throw badRequest(`messages[${i}].images: this model takes text only`, `messages[${i}].images`, 'unsupported_parameter');
    if (m.tool_calls && m.tool_calls.length > 0) {
      throw badRequest(`messages[${i}].tool_calls: tool calling is not supported by this server yet`, `messages[${i}].tool_calls`, 'unsupported_parameter');
    }
    return { role: m.role as Role, content: m.content ?? '' };
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
    const params = ollamaSampling(body.options, info.maxModelLen, body.logprobs === true ? body.top_logprobs ?? 0 : null);
    const text = tokenizer.applyChatTemplate(messages, { tokenize: false, addGenerationPrompt: true }) as string;
    const ids = tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: true });
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, 'messages', 'options.num_predict');
    const job = new Job(app.engine, [ids], params, app.metrics);
    job.bindToReply(reply);
    return answerOllama(reply, job, {
      piece: (content) => ({ message: { role: 'assistant', content } }),
      final: () => ({}),
    }, { model, stream: body.stream !== false, wantLogprobs: params.logprobs !== null, tokenizer, requestStart, loaded });
  });
}
