// POST /api/generate (Ollama): a prompt rendered through the model's chat template as one user turn (with
// `system` as the system turn), or sent verbatim with `raw: true`; `context` (deprecated) token ids are put
// before it. NDJSON streaming unless `stream: false`; the final object carries `context` (prompt + output
// ids) except in raw mode, as Ollama does. An empty prompt answers done_reason 'load' (the model is loaded).
// Invariant: request-supplied Go templates, suffix (fill-in-the-middle) and images are refused by name.
import type { FastifyInstance } from 'fastify';
import { badRequest } from '../../api-error.js';
import { checkPrompt, Job } from '../../generation.js';
import { answerOllama, loadAnswer, ollamaModel, ollamaSampling, refuseCommon, type OllamaBody } from './ollama.js';
import { ollamaGenerateSchema } from './schemas.js';

interface GenerateBody extends OllamaBody {
  prompt?: string;
  suffix?: string;
  system?: string;
  template?: string;
  raw?: boolean | null;
  images?: string[] | null;
  context?: number[] | null;
}

function refuseUnsupported(body: GenerateBody): void {
  refuseCommon(body);
  if (body.raw === true && (body.template || body.system || (body.context && body.context.length > 0))) {
    throw badRequest('raw mode does not support template, system, or context', 'raw');
  }
  if (body.template) {
    throw badRequest("template: request-supplied (Go) templates are not supported; the model's chat template is used", 'template', 'unsupported_parameter');
  }
  if (body.suffix) throw badRequest('suffix: fill-in-the-middle is not supported by this server', 'suffix', 'unsupported_parameter');
  if (body.images && body.images.length > 0) throw badRequest('images: this model takes text only', 'images', 'unsupported_parameter');
}

export default async function ollamaGenerateRoute(app: FastifyInstance): Promise<void> {
  app.post('/api/generate', { schema: { body: ollamaGenerateSchema } }, async (request, reply) => {
    const requestStart = performance.now();
    const body = request.body as GenerateBody;
    refuseUnsupported(body);
    const model = ollamaModel(app.engine, body.model);
    if (!body.prompt) return { ...loadAnswer(body), response: '' };
    const { tokenizer, info } = await app.engine.ready();
    const loaded = performance.now();
    const params = ollamaSampling(body.options, info.maxModelLen, body.logprobs === true ? body.top_logprobs ?? 0 : null, body.format);
    let ids: number[];
    if (body.raw === true) {
      ids = tokenizer.encodePrompt(body.prompt);
    } else {
      const messages = [...(body.system ? [{ role: 'system' as const, content: body.system }] : []), { role: 'user' as const, content: body.prompt }];
      const text = tokenizer.applyChatTemplate(messages, { tokenize: false, addGenerationPrompt: true }) as string;
      ids = [...(body.context ?? []), ...tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: true })];
    }
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, body.context?.length ? 'context' : 'prompt', 'options.num_predict');
    const job = new Job(app.engine, [ids], params, app.metrics);
    job.bindToReply(reply);
    const raw = body.raw === true;
    return answerOllama(reply, job, {
      piece: (text) => ({ response: text }),
      final: (outputIds) => (raw ? {} : { context: [...ids, ...outputIds] }),
    }, { model, stream: body.stream !== false, wantLogprobs: params.logprobs !== null, tokenizer, requestStart, loaded });
  });
}
