// POST /v1/embeddings (OpenAI; vLLM's pooling server): `input` as a string, strings, token ids or lists of token
// ids -> one embedding per input, the model's hidden states after its output norm pooled (the engine's
// --pooling, else the model file's pooling type, else the last token) and L2-normalized (vLLM's `normalize:
// false` keeps the raw pooled state); `dimensions` keeps the first N values (normalized again); `encoding_format`
// 'float' (default) or 'base64' (little-endian float32 bytes, what the openai npm client asks for by default).
// Runner mode: `model` names a store model. Invariant: an input over the context is a 400 naming it, never cut
// silently; `truncate_prompt_tokens` (vLLM: keep the last N tokens) is refused by name.
import type { FastifyInstance } from 'fastify';
import { badRequest } from '../../api-error.js';
import { base64Floats, serverEmbed } from '../../embedding.js';
import { checkModel, requestId } from '../../generation.js';
import { useModel } from '../../model-use.js';
import { embeddingSchema } from '../../schemas.js';

interface EmbeddingBody {
  model?: string | null;
  input: string | string[] | number[] | number[][];
  encoding_format?: string | null;
  dimensions?: number | null;
  user?: string | null;
  normalize?: boolean | null;
  truncate_prompt_tokens?: number | null;
}

export default async function embeddingsRoute(app: FastifyInstance): Promise<void> {
  app.post('/v1/embeddings', { schema: { body: embeddingSchema } }, async (request, reply) => {
    const body = request.body as EmbeddingBody;
    const format = body.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') {
      throw badRequest(`encoding_format must be 'float' or 'base64' (got '${format}')`, 'encoding_format');
    }
    if (body.truncate_prompt_tokens != null) {
      throw badRequest('truncate_prompt_tokens is not supported: send at most the model\'s context length of tokens', 'truncate_prompt_tokens', 'unsupported_parameter');
    }
    const { engine, name: model } = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model) });
    const input = body.input;
    const inputs: (string | number[])[] = typeof input === 'string' ? [input]
      : typeof input[0] === 'number' ? [input as number[]] : (input as (string | number[])[]);
    const r = await serverEmbed(engine, reply, inputs, { dimensions: body.dimensions, normalize: body.normalize ?? true }, 'input', app.metrics);
    const promptTokens = r.promptTokenIds.reduce((a, ids) => a + ids.length, 0);
    return {
      id: requestId('embd'),
      object: 'list',
      created: Math.floor(Date.now() / 1000),
      model,
      data: r.embeddings.map((embedding, index) => ({
        object: 'embedding', index, embedding: format === 'base64' ? base64Floats(embedding) : embedding,
      })),
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    };
  });
}
