// Warm-up: one short streamed chat request (a completion for a model without a chat template) to the server's own socket (startServer sends it once listening), right
// after the model loads and before /health turns 200 (single-model mode; `--skip-server-warmup` leaves it out).
// The first request pays one-time costs on both sides: weight packing and kernel / thread-pool start-up in the
// engine, and the first run of the route, the chat template, the tokenizer and the HTTP / SSE writers in
// JavaScript (together 3-5x a later request's time to first token on the demo model; a request injected without a
// socket leaves part of it). Its prompt fills one engine step (the step's token budget, capped by the context), so
// the largest buffers of a step are touched once too (a 30-token warm-up left the first 300-token request ~2x
// slower than the second). The warm-up pays them, so the first real request is about as fast as the second
// (test/server-deploy-warmup.test.ts measures the ratio).
// Invariants: the warm-up takes the path of a real client's request (auth with a configured key included); it is
// one request in the counters and the log (`x-request-id: spindle-warmup`); it resolves with its duration or
// rejects naming the status and the error it got.
import type { CoreReady } from '../engine-core.js';

export const WARMUP_MAX_TOKENS = 4; // a prefill and a few decode steps
export const WARMUP_REQUEST_ID = 'spindle-warmup';
const PHRASE = 'Hello! Please answer in one short sentence. ';
const TEMPLATE_ROOM = 128; // tokens left for the chat template's own text and the answer

export interface WarmupRequest {
  model: string; // a served model name
  content: string; // the user message, or the prompt (warmupContent)
  chat: boolean; // /v1/chat/completions; false (the model has no chat template): /v1/completions
  apiKey?: string; // one of --api-key, when auth is on
}

/** The warm-up's user message: PHRASE repeated to about one engine step's tokens (as the engine resolved
 *  --max-num-batched-tokens or its default), within the context. */
export function warmupContent(ready: CoreReady): string {
  const target = Math.min(ready.info.maxNumBatchedTokens, ready.info.maxModelLen - TEMPLATE_ROOM - WARMUP_MAX_TOKENS);
  const perPhrase = Math.max(1, ready.tokenizer.encode(PHRASE, { addSpecialTokens: false }).length);
  return PHRASE.repeat(Math.max(1, Math.floor(target / perPhrase))).trim();
}

/** Where a client on this machine reaches a server listening at `url` (0.0.0.0 / :: mean this machine). */
export function localUrl(url: string): string {
  return url.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//[::1]:');
}

/** Sends the warm-up request to the server at `url`; resolves with its duration in ms. */
export async function warmUp(url: string, request: WarmupRequest): Promise<number> {
  const start = performance.now();
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': WARMUP_REQUEST_ID };
  if (request.apiKey !== undefined) headers.authorization = `Bearer ${request.apiKey}`;
  const route = request.chat ? '/v1/chat/completions' : '/v1/completions';
  const input = request.chat ? { messages: [{ role: 'user', content: request.content }] } : { prompt: request.content };
  const response = await fetch(`${localUrl(url)}${route}`, {
    method: 'POST', headers,
    body: JSON.stringify({ model: request.model, stream: true, temperature: 0, max_tokens: WARMUP_MAX_TOKENS, ...input }),
  });
  const body = await response.text();
  const errorFrame = /^data: (\{"error".*)$/m.exec(body);
  if (response.status !== 200 || errorFrame || !body.includes('data: [DONE]')) {
    throw new Error(`POST ${route} answered ${response.status}: ${errorFrame?.[1] ?? body.slice(0, 300)}`);
  }
  return performance.now() - start;
}
