// One streamed chat completion: POST /v1/chat/completions with stream and include_usage, handing each text
// delta, reasoning delta (a reasoning model's thinking) and tool call to the caller as it arrives; resolves with the reply's token counts and speed.
import { apiFetch } from './api';
import { sseData } from './sse';
import type { ChatMessage, Conversation, ReplyStats, ToolCall } from './types';

type Part = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

/** The conversation as OpenAI messages: the system prompt first, images as image_url parts before the text. */
export function requestMessages(c: Conversation, upTo: ChatMessage[]): unknown[] {
  const out: unknown[] = [];
  if (c.systemPrompt.trim()) out.push({ role: 'system', content: c.systemPrompt });
  for (const m of upTo) {
    if (m.error) continue;
    if (m.role === 'tool') {
      out.push({ role: 'tool', tool_call_id: m.toolCallId, content: m.content });
    } else if (m.role === 'assistant') {
      const calls = m.toolCalls?.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
      // the reasoning goes back too: templates render it where the model expects it (Qwen3's: within a tool loop)
      const reasoning = m.reasoning ? { reasoning_content: m.reasoning } : {};
      out.push(calls?.length ? { role: 'assistant', content: m.content || null, ...reasoning, tool_calls: calls } : { role: 'assistant', content: m.content, ...reasoning });
    } else if (m.images?.length) {
      const parts: Part[] = m.images.map((url) => ({ type: 'image_url', image_url: { url } }));
      parts.push({ type: 'text', text: m.content });
      out.push({ role: 'user', content: parts });
    } else {
      out.push({ role: 'user', content: m.content });
    }
  }
  return out;
}

export interface StreamHandlers {
  onText(delta: string): void;
  onReasoning(delta: string): void;
  onToolCalls(calls: ToolCall[]): void;
}

interface Chunk {
  choices?: Array<{ delta?: { content?: string | null; reasoning_content?: string | null; reasoning?: string | null; tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }> }; finish_reason?: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  error?: { message?: string };
}

export async function streamChat(model: string, messages: unknown[], fields: Record<string, number>, signal: AbortSignal,
  on: StreamHandlers): Promise<ReplyStats> {
  const response = await apiFetch('/v1/chat/completions', {
    method: 'POST', signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages, stream: true, stream_options: { include_usage: true }, ...fields }),
  });
  const calls: ToolCall[] = [];
  let finishReason = 'stop';
  let usage = { prompt_tokens: 0, completion_tokens: 0 };
  let first = 0;
  let last = 0;
  for await (const data of sseData(response.body!)) {
    const chunk = JSON.parse(data) as Chunk;
    if (chunk.error) throw new Error(chunk.error.message ?? 'the server reported an error mid-stream');
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    const now = performance.now();
    const reasoning = choice.delta?.reasoning_content ?? choice.delta?.reasoning; // the server sends both names
    if (reasoning) {
      first ||= now;
      last = now;
      on.onReasoning(reasoning);
    }
    if (choice.delta?.content) {
      first ||= now;
      last = now;
      on.onText(choice.delta.content);
    }
    for (const t of choice.delta?.tool_calls ?? []) {
      first ||= now;
      last = now;
      const call = (calls[t.index] ??= { id: t.id ?? '', name: '', arguments: '' });
      if (t.id) call.id = t.id;
      call.name += t.function?.name ?? '';
      call.arguments += t.function?.arguments ?? '';
      on.onToolCalls(calls.slice());
    }
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  const seconds = (last - first) / 1000;
  const tokens = usage.completion_tokens;
  return {
    promptTokens: usage.prompt_tokens, completionTokens: tokens, finishReason,
    tokensPerSecond: seconds > 0 && tokens > 1 ? (tokens - 1) / seconds : 0,
  };
}
