// Server-sent events over a hijacked Fastify reply, as OpenAI streams: `data: <json>\n\n` frames, keep-alive
// comments while nothing else is sent (a long prefill), `data: [DONE]` at the end.
// Invariant: nothing is written after the client went away or after end(); headers set on the reply before
// the stream starts (CORS, request id) are kept.
import type { FastifyReply } from 'fastify';
import type { ServerResponse } from 'node:http';

export const KEEP_ALIVE_MS = 10_000;

export class SseStream {
  readonly #res: ServerResponse;
  #ended = false;
  #lastWrite = Date.now();
  #timer: NodeJS.Timeout;

  constructor(reply: FastifyReply, opts: { contentType?: string; keepAlive?: boolean } = {}) {
    const contentType = opts.contentType ?? 'text/event-stream; charset=utf-8';
    const headers = { ...reply.getHeaders() } as Record<string, string | number | string[]>;
    reply.hijack();
    this.#res = reply.raw;
    this.#res.writeHead(200, {
      ...headers,
      'content-type': contentType,
      'cache-control': 'no-cache',
      // keep the connection unless the client asked to close it (RFC 9112: then the server closes it too)
      connection: /\bclose\b/i.test(String(reply.request.headers.connection ?? '')) ? 'close' : 'keep-alive',
      'x-accel-buffering': 'no',
    });
    this.#res.flushHeaders(); // the client knows at once that its stream started (a long prefill may follow)
    this.#timer = setInterval(() => {
      if (opts.keepAlive !== false && Date.now() - this.#lastWrite >= KEEP_ALIVE_MS) this.#write(': keep-alive\n\n');
    }, KEEP_ALIVE_MS / 2);
    this.#timer.unref();
    this.#res.once('close', () => this.#stop());
  }

  /** True once the client has gone away or the stream ended. */
  get closed(): boolean {
    return this.#ended || this.#res.destroyed;
  }

  /** One `data:` frame. */
  send(value: unknown): void {
    this.sendJson(JSON.stringify(value));
  }

  /** One `data:` frame of JSON text the caller serialized. */
  sendJson(json: string): void {
    this.#write(`data: ${json}\n\n`);
  }

  /** One named event: `event: <name>` then its `data:` line (the Responses API's stream). */
  event(name: string, value: unknown): void {
    this.#write(`event: ${name}\ndata: ${JSON.stringify(value)}\n\n`);
  }

  /** One NDJSON line (Ollama streams). */
  line(value: unknown): void {
    this.#write(`${JSON.stringify(value)}\n`);
  }

  /** Writes `data: [DONE]` (unless `done` is false) and ends the response. */
  end(done = true): void {
    if (this.closed) return;
    if (done) this.#write('data: [DONE]\n\n');
    this.#stop();
    this.#res.end();
  }

  #write(chunk: string): void {
    if (this.closed) return;
    this.#lastWrite = Date.now();
    this.#res.write(chunk);
  }

  #stop(): void {
    this.#ended = true;
    clearInterval(this.#timer);
  }
}
