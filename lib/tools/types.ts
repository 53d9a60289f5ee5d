// Public types of the tool-call parsers (vLLM/SGLang `--tool-call-parser`): a finished output is split into
// content and calls, and a stream of deltas into content / call-name / argument-fragment events.
// Invariant: for any split of an output into deltas, the stream's events fold to exactly parse(output) (see
// collect.ts); `arguments` is always the JSON text of an object.

export interface ParsedToolCall {
  name: string;
  /** JSON text of the arguments object, as OpenAI sends it (compact, like JSON.stringify). */
  arguments: string;
}

export interface ToolParseResult {
  /** Text outside the calls, verbatim; when there is a call, whitespace-only stretches between calls are dropped. */
  content: string;
  toolCalls: ParsedToolCall[];
}

export type ToolStreamEvent =
  | { type: 'content'; text: string }
  /** First event of a call: its name. Indices count from 0 in output order. */
  | { type: 'tool_call'; index: number; name: string }
  /** Then fragments of its arguments JSON text; their concatenation is the call's `arguments`. */
  | { type: 'tool_args'; index: number; fragment: string };

export interface ToolCallStream {
  /** Feeds the next piece of model output; returns the events that became certain. */
  push(delta: string): ToolStreamEvent[];
  /** Ends the output: settles everything still held back. The stream takes no more input afterwards. */
  finish(): ToolStreamEvent[];
}

export interface ToolCallParser {
  /** Canonical name (see TOOL_CALL_PARSER_NAMES for the accepted aliases). */
  readonly name: string;
  /** Text that starts a tool call: what a lazy grammar waits for. */
  readonly triggers: string[];
  /** True when a call is recognised only at the start of the output (after whitespace). */
  readonly triggerAtStartOnly: boolean;
  /** Parses a whole output. Never throws. */
  parse(text: string): ToolParseResult;
  /** A fresh incremental parser for one output. */
  stream(): ToolCallStream;
}
