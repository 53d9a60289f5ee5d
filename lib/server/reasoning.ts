// Reasoning on the chat routes: which parser a request gets (--reasoning-parser, else the chat template's), where
// its output starts (read from the rendered prompt), the grammar of a constrained answer moved after the reasoning,
// each choice's output split as it streams (reasoning, then content and tool calls), and its reasoning tokens counted.
// Invariant: without a parser nothing changes (the routes' output is byte for byte what it was); with one, a
// choice's streamed reasoning and content join to exactly its non-streamed split (lib/reasoning/stream.ts).
import { detectReasoningParser, reasoningStart, ReasoningStream, withReasoning, type ReasoningParser, type ReasoningPiece,
  type ReasoningStart } from '../reasoning/index.js';
import type { ToolCallParser, ToolStreamEvent } from '../tools/index.js';
import type { SamplingParams } from '../sampling-params.js';
import type { Tokenizer } from '../tokenizer.js';
import type { Usage } from './generation.js';
import type { ServerEngine } from './plugins/engine.js';

export interface RequestReasoning {
  parser: ReasoningParser;
  start: ReasoningStart;
}

/** The engine's reasoning parser: the one named on the command line ('none': off), else the chat template's. */
export function reasoningParserOf(engine: Pick<ServerEngine, 'reasoningParser'>, chatTemplate: string | null): ReasoningParser | null {
  if (engine.reasoningParser !== undefined) return engine.reasoningParser;
  return chatTemplate ? detectReasoningParser(chatTemplate) : null;
}

/** A request's reasoning from its rendered prompt; null when the model has no reasoning parser. */
export function requestReasoning(engine: ServerEngine, chatTemplate: string | null, promptText: string,
  continued: string | null = null): RequestReasoning | null {
  const parser = reasoningParserOf(engine, chatTemplate);
  return parser ? { parser, start: reasoningStart(parser, promptText, continued) } : null;
}

/** Moves the request's output constraint (if any) after the reasoning block. */
export function constrainAfterReasoning(params: SamplingParams, reasoning: RequestReasoning | null): void {
  if (reasoning && params.grammar) params.grammar = withReasoning(params.grammar, reasoning.parser, reasoning.start);
}

/** One event of a choice's output: reasoning text, or (the answer) content text and tool-call parts. */
export type OutputEvent = { type: 'reasoning'; text: string } | ToolStreamEvent;

/**
 * A choice's output as every chat route reads it: a reasoning model's thinking first (when the request has a
 * reasoning parser), then the answer, which the tool-call parser (when the request has tools) splits into content
 * and calls. Events carry no empty text; those of a stream, in order, are those of the whole text however it is cut.
 */
export class OutputSplitter {
  readonly #reasoning: ReasoningStream | null;
  readonly #tools: ReturnType<ToolCallParser['stream']> | null;

  constructor(reasoning: RequestReasoning | null, parser: ToolCallParser | null) {
    this.#reasoning = reasoning ? new ReasoningStream(reasoning.parser, reasoning.start) : null;
    this.#tools = parser ? parser.stream() : null;
  }

  /** Whether the output has been in a reasoning block (so far). */
  get reasoned(): boolean { return this.#reasoning?.reasoned ?? false; }

  /** Whether the answer is still to come (ReasoningStream.beforeAnswer; false without a reasoning parser). */
  get beforeAnswer(): boolean { return this.#reasoning?.beforeAnswer ?? false; }

  push(text: string): OutputEvent[] {
    return this.#reasoning ? this.#split(this.#reasoning.push(text)) : this.#answer(text);
  }

  finish(): OutputEvent[] {
    const out = this.#reasoning ? this.#split(this.#reasoning.finish()) : [];
    if (this.#tools) out.push(...nonEmpty(this.#tools.finish()));
    return out;
  }

  #split(pieces: ReasoningPiece[]): OutputEvent[] {
    return pieces.flatMap((p): OutputEvent[] => (p.kind === 'reasoning' ? [{ type: 'reasoning', text: p.text }] : this.#answer(p.text)));
  }

  #answer(text: string): OutputEvent[] {
    if (this.#tools) return nonEmpty(this.#tools.push(text));
    return text.length > 0 ? [{ type: 'content', text }] : [];
  }
}

function nonEmpty(events: ToolStreamEvent[]): ToolStreamEvent[] {
  return events.filter((e) => e.type !== 'content' || e.text.length > 0);
}

/**
 * Output tokens spent reasoning (OpenAI's completion_tokens_details.reasoning_tokens): the fewest leading tokens whose
 * text holds the end tag (all of them while the block is open); 0 for an output that did not reason.
 */
export function reasoningTokenCount(tokenizer: Tokenizer, r: RequestReasoning, reasoned: boolean, ids: readonly number[]): number {
  if (!reasoned) return 0;
  const closedBy = (k: number) => tokenizer.decode(ids.slice(0, k)).includes(r.parser.endTag);
  if (!closedBy(ids.length)) return ids.length;
  let lo = 1;
  let hi = ids.length; // closedBy(hi) holds
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (closedBy(mid)) hi = mid; else lo = mid + 1;
  }
  return lo;
}

/** usage with completion_tokens_details.reasoning_tokens (null: no parser, usage unchanged). */
export function withReasoningTokens(usage: Usage, tokens: number | null): Usage {
  if (tokens === null) return usage;
  return { ...usage, completion_tokens_details: { ...usage.completion_tokens_details, reasoning_tokens: tokens } };
}

/**
 * Chat template variables of a request's reasoning effort (OpenAI's reasoning_effort, the Responses API's
 * reasoning.effort): passed as `reasoning_effort` (templates that take it, e.g. gpt-oss's), and 'none' turns
 * thinking off as Qwen3's `enable_thinking: false`; the request's own chat_template_kwargs win.
 */
export function thinkingKwargs(effort: string | null | undefined, kwargs: Record<string, unknown> | null | undefined):
  Record<string, unknown> | undefined {
  if (effort == null) return kwargs ?? undefined;
  return { reasoning_effort: effort, ...(effort === 'none' ? { enable_thinking: false } : {}), ...(kwargs ?? {}) };
}

/** The OpenAI-compatible fields of reasoning text: vLLM's current `reasoning` and the `reasoning_content` of
 * DeepSeek's API and earlier vLLM, which most clients read. */
export function reasoningFields(text: string | null): Record<string, string | null> {
  return { reasoning_content: text, reasoning: text };
}
