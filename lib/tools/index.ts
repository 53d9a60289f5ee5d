// Tool-call parsers as vLLM/SGLang `--tool-call-parser` has them: model output -> content + OpenAI tool calls,
// whole or streamed. Invariant: this is the folder's public surface; everything else in it is internal.
export type { ParsedToolCall, ToolCallParser, ToolCallStream, ToolParseResult, ToolStreamEvent } from './types.js';
export { TOOL_CALL_PARSER_ALIASES, TOOL_CALL_PARSER_NAMES, getToolCallParser } from './registry.js';
export { detectToolCallParser } from './detect.js';
export { collectEvents } from './collect.js';
