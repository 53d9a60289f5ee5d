// Structured-output compilers: JSON Schema, any JSON, regex, choice and user GBNF -> GBNF text for the sampler.
// Invariant: every compiler either returns GBNF the native parser accepts or throws StructuredOutputError
// naming the problem and what is allowed; nothing is silently approximated (see each module's header).
import { loadNative } from '../native.js';
import { StructuredOutputError } from './gbnf.js';

export { GrammarBuilder, StructuredOutputError, literal, charClass, repeat, type CodeRange } from './gbnf.js';
export { compileJsonSchema, jsonSchemaRule } from './json-schema.js';
export {
  compileJsonObject, compileJsonValue, jsonValueRule, jsonObjectRule, jsonArrayRule, jsonStringRule, jsonNumberRule,
  jsonIntegerRule, wsRule,
} from './json-value.js';
export { compileRegex, regexRule, parseRegex, type RegexNode, type RegexRuleOptions } from './regex.js';
export { compileChoice } from './choice.js';
export { SUPPORTED_FORMATS } from './formats.js';

/** Checks user-supplied GBNF text with the native parser and returns it unchanged. */
export function compileGbnf(text: unknown): string {
  if (typeof text !== 'string') throw new StructuredOutputError('grammar must be a string of GBNF text');
  try {
    loadNative().grammarCheck(text);
  } catch (e) {
    throw new StructuredOutputError(`invalid GBNF grammar: ${(e as Error).message}`);
  }
  return text;
}
