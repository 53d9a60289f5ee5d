// POST /api/generate (Ollama): a prompt rendered through the model's chat template as one user turn (with
// `system` as the system turn), or sent verbatim with `raw: true`; `context` (deprecated) token ids are put
// before it. NDJSON streaming unless `stream: false`; the final object carries `context` (prompt + output
// ids) except in raw mode, as Ollama does. An empty prompt answers done_reason 'load' (the model is loaded; runner
// mode: with keep_alive 0 it is unloaded, done_reason 'unload'). Runner mode: `model` names a store model; its
// Modelfile TEMPLATE (Go, rendered as Ollama's /api/generate does), SYSTEM (unless the request gives `system`),
// MESSAGEs and PARAMETERs (under `options`) apply.
// `images` (base64) go before the prompt text (raw mode: where `<image>` markers are, else first), for models
// with a vision projector. `suffix` (fill-in-the-middle): a Modelfile TEMPLATE that uses .Suffix renders it, as
// Ollama; without a Modelfile, the vocabulary's FIM tokens make the infill prompt (lib/fim.ts, llama.cpp's
// order); a model with neither "does not support insert" (400, as Ollama). Invariant: request-supplied Go
// templates are refused by name, and so are images for a text-only model.
import type { FastifyInstance } from 'fastify';
import { badRequest } from '../../api-error.js';
import type { ChatMessage } from '../../../chat/template.js';
import type { CorePrompt } from '../../../engine-core.js';
import { MEDIA_MARKER, markRawPrompt } from '../../../vision/multimodal-prompt.js';
import { chatPrompt, renderedPrompt, serverImagesPrompt } from '../../chat-prompt.js';
import { useModel, withModelOptions } from '../../model-use.js';
import { modelfileGenerateText, ollamaThink } from '../../modelfile-prompt.js';
import { constrainAfterReasoning, reasoningParserOf, requestReasoning, type RequestReasoning } from '../../reasoning.js';
import { fimPrompt, fimTokens } from '../../../fim.js';
import { checkPrompt, Job } from '../../generation.js';
import { answerOllama, loadOrUnload, ollamaImageUrl, ollamaModel, ollamaSampling, thinkKwargs, type OllamaBody } from './ollama.js';
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

/** Ollama's answer for a suffix the model cannot take. */
function noInsert(model: string): Error {
  return badRequest(`"${model}" does not support insert (its template has no .Suffix and its vocabulary no fill-in-the-middle tokens)`, 'suffix', 'unsupported_parameter');
}

function refuseUnsupported(body: GenerateBody): void {
  if (body.raw === true && (body.template || body.system || (body.context && body.context.length > 0))) {
    throw badRequest('raw mode does not support template, system, or context', 'raw');
  }
  if (body.template) {
    throw badRequest("template: request-supplied (Go) templates are not supported; the model's chat template is used", 'template', 'unsupported_parameter');
  }
  if (body.suffix && (body.raw === true || (body.images ?? []).length > 0 || (body.context ?? []).length > 0)) {
    throw badRequest('suffix (fill-in-the-middle) cannot be combined with raw, images or context', 'suffix');
  }
}

export default async function ollamaGenerateRoute(app: FastifyInstance): Promise<void> {
  app.post('/api/generate', { schema: { body: ollamaGenerateSchema } }, async (request, reply) => {
    const requestStart = performance.now();
    const body = request.body as GenerateBody;
    refuseUnsupported(body);
    if (!body.prompt) return { ...(await loadOrUnload(app, reply, body)), response: '' };
    const use = await useModel(app, reply, body.model, {
      adapters: true,
      single: (e) => ollamaModel(e, body.model), keepAlive: body.keep_alive, numCtx: body.options?.num_ctx,
    });
    const { engine, name: model } = use;
    const manifest = use.model?.manifest ?? null;
    const { tokenizer, info } = await engine.ready();
    const loaded = performance.now();
    const template = manifest?.template ?? info.chatTemplate;
    const kwargs = thinkKwargs(body, reasoningParserOf(engine, template) !== null);
    const params = ollamaSampling(withModelOptions(use.model, body.options), info.maxModelLen,
      body.logprobs === true ? body.top_logprobs ?? 0 : null, body.format);
    const images = (body.images ?? []).map(ollamaImageUrl);
    if (images.length > 0 && !engine.core.acceptsImages) {
      throw badRequest('images: this model takes text only (it has no vision projector; start the server with --mmproj)', 'images', 'unsupported_parameter');
    }
    let ids: number[];
    let prompt: CorePrompt;
    let reasoning: RequestReasoning | null = null; // raw and fill-in-the-middle prompts are taken as they are
    if (body.suffix) {  // fill-in-the-middle
      if (manifest?.template) {
        if (!/\.Suffix\b/.test(manifest.template)) throw noInsert(model);
        prompt = ids = tokenizer.encodePrompt(modelfileGenerateText({ ...manifest, template: manifest.template }, body.prompt, null, [], undefined, body.suffix));
      } else {
        const fim = fimTokens(tokenizer);
        if (!fim) throw noInsert(model);
        prompt = ids = fimPrompt(tokenizer, fim, body.prompt, body.suffix);
      }
    } else if (body.raw === true) {
      if (images.length > 0) ({ ids, prompt } = await serverImagesPrompt(engine, markRawPrompt(body.prompt, images.length), images, false, 'images'));
      else prompt = ids = tokenizer.encodePrompt(body.prompt);
    } else {
      if (images.length > 0 && (body.context ?? []).length > 0) throw badRequest('context cannot be combined with images', 'context');
      let chat;
      if (manifest?.template) {
        const marker = engine.core.acceptsImages ? MEDIA_MARKER : undefined;
        const text = modelfileGenerateText({ ...manifest, template: manifest.template }, body.prompt, body.system ?? null, images, marker,
          undefined, ollamaThink(kwargs));
        chat = await renderedPrompt(engine, tokenizer, text, images, 'images');
      } else {
        const content: ChatMessage['content'] = images.length === 0 ? body.prompt
          : [...images.map((url) => ({ type: 'image_url' as const, image_url: { url } })), { type: 'text' as const, text: body.prompt }];
        const system = body.system || manifest?.system;
        const messages: ChatMessage[] = [...(system ? [{ role: 'system' as const, content: system }] : []),
          ...(manifest?.messages ?? []).map((m) => ({ role: m.role as ChatMessage['role'], content: m.content })), { role: 'user' as const, content }];
        chat = await chatPrompt(engine, tokenizer, messages, { addGenerationPrompt: true, chatTemplateKwargs: kwargs }, 'images');
      }
      ids = [...(body.context ?? []), ...chat.ids];
      prompt = images.length > 0 ? chat.prompt : ids;
      reasoning = requestReasoning(engine, template, chat.text);
      constrainAfterReasoning(params, reasoning);
    }
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, body.context?.length ? 'context' : 'prompt', 'options.num_predict', images.length > 0);
    const job = new Job(engine, [prompt], params, app.metrics, { lora: use.lora });
    job.bindToReply(reply);
    const raw = body.raw === true;
    return answerOllama(reply, job, {
      piece: (text) => ({ response: text }),
      thinking: (thinking) => ({ response: '', thinking }),
      final: (outputIds) => (raw ? {} : { context: [...ids, ...outputIds] }),
    }, { model, reasoning, stream: body.stream !== false, wantLogprobs: params.logprobs !== null, tokenizer, requestStart, loaded });
  });
}
