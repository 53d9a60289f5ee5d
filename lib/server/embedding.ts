// Embedding (and scoring) requests on the server: admission as for generation (every input counts as a sequence, a batch at
// most maxNumSeqs of them, so a large batch is not refused forever under load; 429 when the queue is full),
// aborted when the client goes away before the answer was sent; each input that gets its vector
// counts in /metrics as a finished request (request_success_total with finished_reason 'stop', e2e latency), as
// vLLM counts pooling requests.
// Invariant: every begin() is paired with one release, whatever happens to the requests.
import type { FastifyReply } from 'fastify';
import { embed, EmbeddingInputError, type EmbedOptions, type EmbedResult } from '../embeddings.js';
import { badRequest } from './api-error.js';
import type { GenerationObserver } from './generation.js';
import type { ServerEngine } from './plugins/engine.js';

export async function serverEmbed(engine: ServerEngine, reply: FastifyReply, inputs: readonly (string | readonly number[])[],
  options: EmbedOptions, what: string, observer: GenerationObserver | null = null): Promise<EmbedResult> {
  if (inputs.length === 0) {  // Ollama's load-only request
    await engine.ready();
    return { embeddings: [], promptTokenIds: [], pooling: 'last' };
  }
  return serverPooled(engine, reply, inputs.length, (signal) => embed(engine.core, inputs, { ...options, signal }, what), observer);
}

/**
 * Runs `count` pooling requests (embeddings, scores) under the server's admission, aborted when the client goes
 * away, each counted in /metrics as a finished request (or a failed one, unless the input was refused up front).
 */
export async function serverPooled<T>(engine: ServerEngine, reply: FastifyReply, count: number, run: (signal: AbortSignal) => Promise<T>,
  observer: GenerationObserver | null): Promise<T> {
  const res = reply.raw;
  if (res.destroyed) throw badRequest('the client closed the connection before its request started');
  const release = engine.begin(Math.min(count, engine.maxNumSeqs));
  const controller = new AbortController();
  const onClose = (): void => { if (!res.writableFinished) controller.abort(); };
  res.once('close', onClose);
  const started = performance.now();
  try {
    const r = await run(controller.signal);
    const seconds = (performance.now() - started) / 1000;
    for (let i = 0; i < count; i++) observer?.finished('stop', seconds);
    return r;
  } catch (e) {
    if (!(e instanceof EmbeddingInputError)) {  // requests that ran and failed (or were aborted)
      for (let i = 0; i < count; i++) observer?.finished('error', (performance.now() - started) / 1000);
    }
    throw e;
  } finally {
    res.off('close', onClose);
    release();
  }
}

/** OpenAI's base64 encoding_format: the little-endian float32 bytes, base64. */
export function base64Floats(v: readonly number[]): string {
  const bytes = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) bytes.writeFloatLE(v[i], i * 4);
  return bytes.toString('base64');
}
