// Tool-call ids as Mistral's chat templates demand them: exactly 9 ASCII letters or digits (Mistral Nemo's and
// Small 3.x's templates raise "Tool call IDs should be alphanumeric strings with length 9!" on any other, in an
// assistant turn's tool_calls and a tool message's tool_call_id alike). OpenAI clients send back the ids a server
// gave (Spindle's are call_ + 24 hex digits), other clients' ids of any shape, Ollama's clients none at all, so, as
// vLLM does for Mistral tokenizers, the ids are mapped before rendering:
//  - a 9-character alphanumeric id is kept;
//  - another string: its last 9 letters or digits (vLLM's truncate_tool_call_ids), or, with fewer than 9 of them, 9
//    base-36 digits of its SHA-256, so an assistant call and the tool result naming it map alike;
//  - a missing id: derived from the message and call index; a tool message without tool_call_id answers the next
//    call of the assistant turn before it that no tool message has answered yet (Ollama's history, in order).
// Invariant: equal ids map to equal ids; the messages are copied, never changed.
import { createHash } from 'node:crypto';
import type { ChatMessage } from './template.js';

const VALID = /^[A-Za-z0-9]{9}$/;

/** 9 base-36 digits of the SHA-256 of `s`. */
function hashId(s: string): string {
  return BigInt(`0x${createHash('sha256').update(s).digest('hex').slice(0, 16)}`).toString(36).padStart(9, '0').slice(-9);
}

/** The 9-character id `id` maps to. */
export function mistralToolCallId(id: string): string {
  if (VALID.test(id)) return id;
  const alnum = id.replace(/[^A-Za-z0-9]/g, '');
  return alnum.length >= 9 ? alnum.slice(-9) : hashId(id);
}

/** `messages` with every tool-call id in the form Mistral's templates accept (see the file comment). */
export function withMistralToolCallIds(messages: readonly ChatMessage[]): ChatMessage[] {
  let open: string[] = [];  // ids of the last assistant turn's calls no tool message has answered yet
  return messages.map((m, i) => {
    if (typeof m !== 'object' || m === null) return m;
    if (m.role === 'assistant' && Array.isArray(m.tool_calls)) {
      const calls = m.tool_calls.map((c, k) => {
        if (typeof c !== 'object' || c === null) return c;
        const call = c as Record<string, unknown>;
        const id = typeof call.id === 'string' && call.id !== '' ? mistralToolCallId(call.id) : hashId(`${i}:${k}`);
        return { ...call, id };
      });
      open = calls.map((c) => (c as { id?: string }).id ?? '').filter((id) => id !== '');
      return { ...m, tool_calls: calls };
    }
    if (m.role === 'tool') {
      const given = typeof m.tool_call_id === 'string' && m.tool_call_id !== '' ? mistralToolCallId(m.tool_call_id) : open[0];
      open = open.filter((id) => id !== given);
      return given === undefined ? m : { ...m, tool_call_id: given };
    }
    return m;
  });
}
