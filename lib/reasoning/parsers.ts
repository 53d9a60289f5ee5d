// Reasoning parsers: how a reasoning model marks the thinking it writes before its answer, by the names vLLM and
// SGLang give them (--reasoning-parser), and which one a chat template shows.
// Invariant: a parser's tags are plain text the detokenizer writes (Qwen3's <think> / </think> are user-defined
// tokens, decoded with or without skipSpecialTokens), and the end tag's first character does not occur again in
// it (grammar.ts builds its "text without the end tag" rule on that).

export interface ReasoningParser {
  name: 'qwen3' | 'deepseek_r1'; // canonical name
  startTag: string;
  endTag: string;
  /**
   * Where the output starts when the prompt does not say (it neither ends inside an open block nor right after a
   * closed one): qwen3 reasons only when the output opens a block (hybrid models write <think> themselves);
   * deepseek_r1 reasons from the first token (R1's template may open the block in the prompt or not at all).
   */
  undecided: 'by-output' | 'reasoning';
}

const THINK = { startTag: '<think>', endTag: '</think>' };
const PARSERS: Record<string, ReasoningParser> = {
  qwen3: { name: 'qwen3', ...THINK, undecided: 'by-output' },
  deepseek_r1: { name: 'deepseek_r1', ...THINK, undecided: 'reasoning' },
};
const ALIASES: Record<string, string> = { 'deepseek-r1': 'deepseek_r1', 'qwen3-thinking': 'qwen3' };

/** Every name --reasoning-parser takes ('none': no reasoning parser, not even a detected one). */
export const REASONING_PARSER_NAMES: readonly string[] = [...Object.keys(PARSERS), ...Object.keys(ALIASES), 'none'];

/** The parser of a name (case-insensitive, aliases included); null for 'none'; throws for an unknown name. */
export function getReasoningParser(name: string): ReasoningParser | null {
  const key = name.trim().toLowerCase();
  if (key === 'none') return null;
  const p = PARSERS[ALIASES[key] ?? key];
  if (!p) throw new Error(`unknown reasoning parser '${name}' (have: ${REASONING_PARSER_NAMES.join(', ')})`);
  return p;
}

/**
 * The parser a chat template shows: one that writes or strips <think> ... </think> blocks (Qwen3, QwQ, DeepSeek-R1
 * and their distills, LFM2.5 thinking models). A template that opens the block in the generation prompt itself is
 * deepseek_r1's case as much as qwen3's; qwen3 reads it from the prompt the same way (see reasoningStart).
 */
export function detectReasoningParser(template: string): ReasoningParser | null {
  return template.includes(THINK.startTag) && template.includes(THINK.endTag) ? PARSERS.qwen3 : null;
}

/** Where a request's output starts: inside a reasoning block, in the answer, or decided by the output's first text. */
export type ReasoningStart = 'reasoning' | 'content' | 'by-output';

/**
 * From the rendered prompt: one that ends with an open block (Qwen3-Thinking, R1: `<think>\n`) starts in the
 * reasoning; one that ends with a closed block (Qwen3 with enable_thinking false: `<think>\n\n</think>\n\n`) in
 * the answer; otherwise the parser's default. `continued`: the final message's text when the prompt continues it.
 */
export function reasoningStart(parser: ReasoningParser, promptText: string, continued: string | null = null): ReasoningStart {
  if (continued !== null) {
    // a continued final message (continue_final_message, an Ollama prefill): its own tags say where it stands; text
    // without tags is an answer being written, unless the prompt opened a block right before it
    const open = continued.lastIndexOf(parser.startTag);
    const close = continued.lastIndexOf(parser.endTag);
    if (open > close) return 'reasoning';
    if (close >= 0) return 'content';
    const before = promptText.endsWith(continued) ? promptText.slice(0, promptText.length - continued.length) : promptText;
    return before.trimEnd().endsWith(parser.startTag) ? 'reasoning' : 'content';
  }
  const tail = promptText.trimEnd();
  if (tail.endsWith(parser.startTag)) return 'reasoning';
  if (tail.endsWith(parser.endTag)) return 'content';
  return parser.undecided;
}
