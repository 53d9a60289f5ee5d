// POST /tokenize and /detokenize (vLLM shapes): a prompt (or chat messages, rendered with the model's
// template) to token ids, and token ids back to text; GET /tokenizer_info (vLLM's): the tokenizer's special tokens,
// chat template and limits, which lm-evaluation-harness's remote tokenizer reads (with /tokenize and /detokenize it
// then needs no tokenizer files of its own).
// Runner mode: `model` names a store model (loaded on demand; messages rendered as the chat routes render them).
// Invariant: tokenization is the one the generating routes use (chat: template then no extra BOS).
import type { FastifyInstance } from 'fastify';
import type { ChatMessage } from '../../chat/template.js';
import { badRequest } from '../api-error.js';
import { checkModel } from '../generation.js';
import { useModel } from '../model-use.js';
import { turnOptions } from '../chat-prompt.js';
import { modelfileChatText } from '../modelfile-prompt.js';
import { detokenizeSchema, tokenizeSchema } from '../schemas.js';

interface TokenizeBody {
  model?: string | null;
  prompt?: string;
  messages?: ChatMessage[];
  add_special_tokens?: boolean | null;
  add_generation_prompt?: boolean | null;
  continue_final_message?: boolean | null;
}

export default async function tokenizeRoute(app: FastifyInstance): Promise<void> {
  app.post('/tokenize', { schema: { body: tokenizeSchema } }, async (request, reply) => {
    const body = request.body as TokenizeBody;
    const use = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model), adapters: true });
    const { tokenizer, info } = await use.engine.ready();
    if ((body.prompt === undefined) === (body.messages === undefined)) throw badRequest('give exactly one of prompt or messages', 'prompt');
    let tokens: number[];
    if (body.messages !== undefined) {
      const { addGenerationPrompt, continueFinalMessage } = turnOptions(body, body.messages);
      const options = { addGenerationPrompt, continueFinalMessage };
      const text = use.model ? modelfileChatText(tokenizer, body.messages, options, use.model.manifest, undefined, 'messages')
        : tokenizer.applyChatTemplate(body.messages, { ...options, tokenize: false });
      tokens = tokenizer.encode(text, { addSpecialTokens: body.add_special_tokens ?? false });
    } else {
      tokens = tokenizer.encode(body.prompt!, { addSpecialTokens: body.add_special_tokens ?? true });
    }
    return { count: tokens.length, max_model_len: info.maxModelLen, tokens };
  });
  app.get('/tokenizer_info', async (request, reply) => {
    const model = (request.query as { model?: string }).model;
    const use = await useModel(app, reply, model, { single: (e) => checkModel(e, model), adapters: true });
    const { tokenizer, info } = await use.engine.ready();
    return {
      tokenizer_class: 'GGUFTokenizer', // the GGUF file's own vocabulary, merges and pre-tokenizer
      bos_token: tokenizer.bosToken, eos_token: tokenizer.eosToken, pad_token: null, unk_token: null,
      bos_token_id: tokenizer.bosTokenId, eos_token_id: tokenizer.eosTokenId, eog_token_ids: tokenizer.eogTokenIds,
      add_bos_token: info.addBos, vocab_size: tokenizer.vocabSize, model_max_length: info.maxModelLen,
      chat_template: use.model?.manifest.template ?? info.chatTemplate,
    };
  });
  app.post('/detokenize', { schema: { body: detokenizeSchema } }, async (request, reply) => {
    const body = request.body as { model?: string | null; tokens: number[] };
    const { engine } = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model), adapters: true });
    const { tokenizer } = await engine.ready();
    const bad = body.tokens.findIndex((id) => id >= tokenizer.vocabSize);
    if (bad >= 0) throw badRequest(`tokens[${bad}]: ${body.tokens[bad]} is outside the vocabulary [0, ${tokenizer.vocabSize})`, `tokens[${bad}]`, 'invalid_token_id');
    return { prompt: tokenizer.decode(body.tokens) };
  });
}
