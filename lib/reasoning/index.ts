// Reasoning models (Qwen3, QwQ, DeepSeek-R1): the thinking they write before the answer, kept apart from it.
export {
  REASONING_PARSER_NAMES, getReasoningParser, detectReasoningParser, reasoningStart, type ReasoningParser, type ReasoningStart,
} from './parsers.js';
export { ReasoningStream, splitReasoning, type ReasoningPiece, type SplitReasoning } from './stream.js';
export { withReasoning } from './grammar.js';
export { THINK_LEVELS, thinkTemplateVars } from './think.js';
