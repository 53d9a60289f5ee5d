// The sglang backend: SGLang's native POST /generate (what SGLang's bench_serving sends by default), SSE frames
// that each carry the whole text so far and meta_info with the server's token counts.
// Invariant: a frame is a token frame when its text grew; the new characters are its content.
import type { Agents } from './http.js';
import type { StreamRecorder } from './record.js';
import { SseParser } from './stream-parse.js';
import { streamRequest } from './stream-request.js';
import type { RequestInput, RequestOutput } from './types.js';

export function sglangBody(input: RequestInput): Record<string, unknown> {
  const sampling: Record<string, unknown> = { max_new_tokens: input.request.outputLen };
  if (input.temperature !== null) sampling.temperature = input.temperature;
  if (input.ignoreEos) sampling.ignore_eos = true;
  const body: Record<string, unknown> = { sampling_params: sampling, stream: true, model: input.model }; // model: Spindle's runner mode
  if (input.request.promptIds) body.input_ids = input.request.promptIds;
  else body.text = input.request.prompt; // a conversation's joined text (multi-turn dataset), as completions send it
  return body;
}

export async function sendSglang(input: RequestInput, agents: Agents): Promise<RequestOutput> {
  let seen = 0; // characters of the text already recorded
  let finished = false;
  const out = await streamRequest(input, sglangBody(input), new SseParser(), (message: string, t: number, rec: StreamRecorder) => {
    if (message.trim() === '[DONE]') return;
    const data = JSON.parse(message) as { text?: unknown; error?: { message?: unknown }; meta_info?: Record<string, unknown> };
    if (data.error !== undefined) {
      rec.fail(`error in stream: ${typeof data.error?.message === 'string' ? data.error.message : JSON.stringify(data.error)}`);
      return;
    }
    const text = typeof data.text === 'string' ? data.text : '';
    if (text.length > seen) rec.content(text.slice(seen), t);
    else rec.event(t);
    seen = Math.max(seen, text.length);
    const meta = data.meta_info;
    if (meta) {
      rec.usage(meta.prompt_tokens, meta.completion_tokens);
      if (meta.finish_reason !== null && meta.finish_reason !== undefined) finished = true;
    }
  }, agents);
  if (out.success && !finished) {
    out.success = false;
    out.error = 'the stream ended without a frame carrying meta_info.finish_reason';
  }
  return out;
}
