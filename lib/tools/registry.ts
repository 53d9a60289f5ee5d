// Parser lookup by the names vLLM and SGLang give to `--tool-call-parser`.
// Invariant: every name in TOOL_CALL_PARSER_NAMES resolves; any other name is an Error that lists them all.
import { hermesParser } from './hermes.js';
import { lfm2Parser } from './lfm2.js';
import { llama3JsonParser } from './llama3-json.js';
import { mistralParser } from './mistral.js';
import { pythonicParser } from './pythonic.js';
import type { ToolCallParser } from './types.js';

const PARSERS: Record<string, ToolCallParser> = {
  hermes: hermesParser,
  qwen25: hermesParser, // SGLang
  qwen: hermesParser, // SGLang
  lfm2: lfm2Parser,
  pythonic: pythonicParser,
  llama3_json: llama3JsonParser,
  llama4_json: llama3JsonParser, // vLLM registers the same parser under both names
  llama3: llama3JsonParser, // SGLang
  mistral: mistralParser,
};

/** Every accepted name, canonical names and aliases. */
export const TOOL_CALL_PARSER_NAMES: string[] = Object.freeze(Object.keys(PARSERS)) as string[];

/** Canonical name of each accepted name. */
export const TOOL_CALL_PARSER_ALIASES: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries(Object.entries(PARSERS).map(([k, p]) => [k, p.name])),
);

export function getToolCallParser(name: string): ToolCallParser {
  const key = name.trim().toLowerCase();
  if (Object.hasOwn(PARSERS, key)) return PARSERS[key];
  throw new Error(`unknown tool call parser "${name}"; known parsers: ${TOOL_CALL_PARSER_NAMES.join(', ')}`);
}
