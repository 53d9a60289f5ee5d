// The ollama backend: POST /api/generate (prompt) or /api/chat (messages), NDJSON streaming. The final
// `done: true` line carries prompt_eval_count / eval_count, the server's token counts.
// Invariant: /api/chat is chosen by the endpoint path, anything else gets the /api/generate body.
// Ollama has no ignore_eos; it is sent as options.ignore_eos (Spindle's /api honours it, Ollama logs
// "invalid option" and ignores it), so output lengths are exact only where the server supports it.
import type { Agents } from './http.js';
import type { StreamRecorder } from './record.js';
import { NdjsonParser } from './stream-parse.js';
import { streamRequest } from './stream-request.js';
import type { RequestInput, RequestOutput } from './types.js';

export function isOllamaChat(url: string): boolean {
  return new URL(url).pathname.replace(/\/+$/, '').endsWith('/api/chat');
}

export function ollamaBody(input: RequestInput): Record<string, unknown> {
  const options: Record<string, unknown> = { num_predict: input.request.outputLen };
  if (input.temperature !== null) options.temperature = input.temperature;
  if (input.ignoreEos) options.ignore_eos = true;
  const body: Record<string, unknown> = { model: input.model, stream: true, options };
  if (isOllamaChat(input.url)) body.messages = input.request.messages ?? [{ role: 'user', content: input.request.prompt }];
  else body.prompt = input.request.prompt;
  return body;
}

/** Handles one NDJSON line; returns true for the final `done: true` line. */
function handleLine(chat: boolean, line: string, t: number, rec: StreamRecorder): boolean {
  const data = JSON.parse(line) as Record<string, unknown>;
  if (data.error !== undefined) {
    rec.fail(`error in stream: ${typeof data.error === 'string' ? data.error : JSON.stringify(data.error)}`);
    return false;
  }
  const src = (chat ? data.message : data) as Record<string, unknown> | undefined;
  let text = '';
  for (const key of ['thinking', chat ? 'content' : 'response']) {
    if (src && typeof src[key] === 'string') text += src[key] as string;
  }
  if (text !== '') rec.content(text, t);
  else rec.event(t);
  if (data.done !== true) return false;
  rec.usage(data.prompt_eval_count, data.eval_count);
  return true;
}

export async function sendOllama(input: RequestInput, agents: Agents): Promise<RequestOutput> {
  const chat = isOllamaChat(input.url);
  let done = false;
  const out = await streamRequest(input, ollamaBody(input), new NdjsonParser(), (m, t, r) => {
    if (handleLine(chat, m, t, r)) done = true;
  }, agents);
  if (out.success && !done) {
    out.success = false;
    out.error = 'the NDJSON stream ended without a `done: true` line';
  }
  return out;
}
