// Folds stream events into a ToolParseResult; every parser's parse() is its own stream run over the whole text,
// so parsing and streaming cannot disagree. Invariant: content is the concatenation of content events; each
// call's arguments the concatenation of its tool_args fragments, calls ordered by index.
import type { ToolCallStream, ToolParseResult, ToolStreamEvent } from './types.js';

export function collectEvents(events: Iterable<ToolStreamEvent>): ToolParseResult {
  let content = '';
  const calls: { name: string; arguments: string }[] = [];
  for (const e of events) {
    if (e.type === 'content') content += e.text;
    else if (e.type === 'tool_call') calls[e.index] = { name: e.name, arguments: '' };
    else calls[e.index].arguments += e.fragment;
  }
  return { content, toolCalls: calls };
}

export function parseWithStream(stream: ToolCallStream, text: string): ToolParseResult {
  return collectEvents([...stream.push(text), ...stream.finish()]);
}
