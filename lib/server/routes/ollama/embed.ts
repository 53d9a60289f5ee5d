// POST /api/embed (Ollama): `input` as a string or strings -> `embeddings`, L2-normalized, with Ollama's
// durations and prompt_eval_count; `truncate` (default true) keeps an over-long input's first num_ctx tokens,
// false makes it an error; `dimensions` keeps the first N values. An empty input string (or none, or []) only
// loads the model; the items of a list are embedded one for one (an empty item as its special tokens).
// POST /api/embeddings (Ollama's older route): one `prompt` -> `embedding`, not normalized (as Ollama); an empty
// prompt answers an empty embedding. Runner mode: `model` names a store model (keep_alive, options.num_ctx apply).
import type { FastifyInstance, FastifyReply } from 'fastify';
import { serverEmbed } from '../../embedding.js';
import { useModel } from '../../model-use.js';
import { ollamaModel, type OllamaBody } from './ollama.js';
import { ollamaEmbeddingsSchema, ollamaEmbedSchema } from './schemas.js';

type EmbedBody = Pick<OllamaBody, 'model' | 'keep_alive' | 'options'> & {
  input?: string | string[] | null;
  prompt?: string;
  truncate?: boolean | null;
  dimensions?: number | null;
};

async function embedFor(app: FastifyInstance, reply: FastifyReply, body: EmbedBody, inputs: string[], normalize: boolean) {
  const requestStart = performance.now();
  const use = await useModel(app, reply, body.model, {
    single: (e) => ollamaModel(e, body.model), keepAlive: body.keep_alive, numCtx: body.options?.num_ctx,
  });
  await use.engine.ready();
  const loaded = performance.now();
  const r = await serverEmbed(use.engine, reply, inputs,
    { dimensions: body.dimensions, normalize, truncate: body.truncate ?? true, allowEmptyText: true }, 'input', app.metrics);
  const ns = (ms: number): number => Math.round(ms * 1e6);
  return {
    r, model: use.name,
    durations: { total_duration: ns(performance.now() - requestStart), load_duration: ns(loaded - requestStart) },
  };
}

export default async function ollamaEmbedRoute(app: FastifyInstance): Promise<void> {
  app.post('/api/embed', { schema: { body: ollamaEmbedSchema } }, async (request, reply) => {
    const body = request.body as EmbedBody;
    const input = body.input ?? [];
    // Ollama: one empty string only loads the model; a list keeps every item (one embedding each)
    const inputs = typeof input === 'string' ? (input.length > 0 ? [input] : []) : input;
    const { r, model, durations } = await embedFor(app, reply, body, inputs, true);
    return {
      model, embeddings: r.embeddings, ...durations,
      prompt_eval_count: r.promptTokenIds.reduce((a, ids) => a + ids.length, 0),
    };
  });
  app.post('/api/embeddings', { schema: { body: ollamaEmbeddingsSchema } }, async (request, reply) => {
    const body = request.body as EmbedBody;
    const inputs = body.prompt ? [body.prompt] : [];
    const { r } = await embedFor(app, reply, body, inputs, false);
    return { embedding: r.embeddings[0] ?? [] };
  });
}
