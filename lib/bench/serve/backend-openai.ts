// The openai-chat (/v1/chat/completions) and openai (/v1/completions) backends: streaming SSE requests
// with stream_options.include_usage, so the final usage chunk gives the server's token counts.
// Invariant: a chunk is a token chunk when its first choice carries non-empty text (delta.content,
// delta.reasoning_content / delta.reasoning, tool-call argument text, or `text` for completions).
import type { Agents } from './http.js';
import type { StreamRecorder } from './record.js';
import { SseParser } from './stream-parse.js';
import { streamRequest } from './stream-request.js';
import type { RequestInput, RequestOutput } from './types.js';

type Kind = 'chat' | 'completions';

/** Request body; ignore_eos is the vLLM / SGLang / llama.cpp / Spindle extension. */
export function openAiBody(kind: Kind, input: RequestInput): Record<string, unknown> {
  const body: Record<string, unknown> = { model: input.model, stream: true, stream_options: { include_usage: true } };
  if (kind === 'chat') {
    body.messages = input.request.messages ?? [{ role: 'user', content: input.request.prompt }];
    // max_completion_tokens is the current name; max_tokens for servers that only know the old one
    body.max_completion_tokens = input.request.outputLen;
  } else {
    body.prompt = input.request.promptIds ?? input.request.prompt;
  }
  body.max_tokens = input.request.outputLen;
  if (input.ignoreEos) body.ignore_eos = true;
  if (input.request.prediction !== undefined) body.prediction = { type: 'content', content: input.request.prediction };
  if (input.temperature !== null) body.temperature = input.temperature;
  return body;
}

function deltaText(delta: Record<string, unknown> | undefined): string {
  if (!delta) return '';
  let text = '';
  for (const key of ['reasoning_content', 'reasoning', 'content']) {
    if (typeof delta[key] === 'string') text += delta[key] as string;
  }
  if (Array.isArray(delta.tool_calls)) {
    for (const call of delta.tool_calls as { function?: { arguments?: unknown } }[]) {
      if (typeof call?.function?.arguments === 'string') text += call.function.arguments;
    }
  }
  return text;
}

function handleMessage(kind: Kind, message: string, t: number, rec: StreamRecorder): void {
  if (message.trim() === '[DONE]') return;
  const data = JSON.parse(message) as Record<string, unknown>;
  if (data.error !== undefined) {
    const e = data.error as { message?: unknown };
    rec.fail(`error in stream: ${typeof e?.message === 'string' ? e.message : JSON.stringify(data.error)}`);
    return;
  }
  const choices = data.choices;
  if (Array.isArray(choices) && choices.length > 0) {
    const c = choices[0] as { delta?: Record<string, unknown>; text?: unknown };
    const text = kind === 'chat' ? deltaText(c.delta) : typeof c.text === 'string' ? c.text : '';
    if (text !== '') rec.content(text, t);
    else rec.event(t);
  }
  const usage = data.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  if (usage) rec.usage(usage.prompt_tokens, usage.completion_tokens);
}

export function sendOpenAiChat(input: RequestInput, agents: Agents): Promise<RequestOutput> {
  return streamRequest(input, openAiBody('chat', input), new SseParser(), (m, t, r) => handleMessage('chat', m, t, r), agents);
}

export function sendOpenAiCompletions(input: RequestInput, agents: Agents): Promise<RequestOutput> {
  return streamRequest(input, openAiBody('completions', input), new SseParser(), (m, t, r) => handleMessage('completions', m, t, r), agents);
}
