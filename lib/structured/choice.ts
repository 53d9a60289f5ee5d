// Choice constraint (vLLM guided_choice): the output is exactly one of a list of strings.
// Invariant: the grammar's sentences are exactly the given strings (duplicates collapse); an empty list,
// a non-string entry or a string that is not valid Unicode (lone surrogate) is refused.
import { GrammarBuilder, StructuredOutputError, literal } from './gbnf.js';

/** Full GBNF grammar whose sentences are exactly `choices`. */
export function compileChoice(choices: unknown): string {
  if (!Array.isArray(choices) || choices.length === 0) {
    throw new StructuredOutputError('choice list must be a non-empty array of strings');
  }
  choices.forEach((c, i) => {
    if (typeof c !== 'string') {
      throw new StructuredOutputError(`choice ${i} must be a string, got ${c === null ? 'null' : Array.isArray(c) ? 'an array' : typeof c}`);
    }
  });
  const alts = [...new Set(choices as string[])].map((c) => literal(c));
  return new GrammarBuilder().build(alts.join(' | '));
}
