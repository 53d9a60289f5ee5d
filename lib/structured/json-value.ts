// The JSON text grammar (RFC 8259) as shared rules: whitespace, strings, numbers, any value, any object.
// Invariant: every rule here accepts only valid JSON texts (no raw control characters in strings, no lone
// surrogate escapes, no leading zeros); to keep a sampled model from looping, whitespace is bounded (one
// optional newline plus up to 20 spaces/tabs, or one space) and unconstrained numbers have at most 16
// integer digits, 16 fraction digits and 3 exponent digits.
import { GrammarBuilder } from './gbnf.js';

/** Whitespace allowed between JSON tokens: nothing, one space, or a newline and up to 20 spaces/tabs. */
export const WS_BODY = '| " " | "\\n" [ \\t]{0,20}';
/** Digits of an unconstrained number's integer part / fraction / exponent. */
export const MAX_INT_DIGITS = 16;
export const MAX_FRACTION_DIGITS = 16;
const MAX_EXPONENT_DIGITS = 3;

export function wsRule(b: GrammarBuilder): string {
  return b.cached('ws', 'ws', () => WS_BODY);
}

/** `ws "," ws`: the separator between members / elements. */
export function sepExpr(b: GrammarBuilder): string {
  const ws = wsRule(b);
  return `${ws} "," ${ws}`;
}

/**
 * One character of a JSON string's text, decoding to one code point: a raw character other than `"`, `\` and
 * U+0000..U+001F; a short escape; a \u escape of a non-surrogate; or a \u surrogate pair. Lone surrogate
 * escapes are excluded so that length bounds count code points exactly.
 */
export function jsonCharRule(b: GrammarBuilder, pythonSafe = false): string {
  return b.cached('json-char', 'json-char', () => {
    const h = '[0-9a-fA-F]';
    const nonSurrogate = `[0-9a-cA-CeEfF] ${h}{3} | [dD] [0-7] ${h}{2}`;
    const pair = `[dD] [89abAB] ${h}{2} "\\\\u" [dD] [c-fC-F] ${h}{2}`;
    // pythonSafe: no `\\/` escape, which a Python string literal reads as two characters (pythonic tool calls).
    return `[^"\\\\\\x00-\\x1F] | "\\\\" ([${pythonSafe ? '' : '/'}"\\\\bfnrt] | "u" (${nonSurrogate} | ${pair}))`;
  });
}

export function jsonStringRule(b: GrammarBuilder): string {
  return b.cached('json-string', 'json-string', () => `"\\"" ${jsonCharRule(b)}* "\\""`);
}

/** Any JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)? with bounded digit counts. */
export function jsonNumberRule(b: GrammarBuilder): string {
  return b.cached('json-number', 'json-number', () =>
    `"-"? ("0" | [1-9] [0-9]{0,${MAX_INT_DIGITS - 1}}) ("." [0-9]{1,${MAX_FRACTION_DIGITS}})? ` +
    `([eE] [-+]? [0-9]{1,${MAX_EXPONENT_DIGITS}})?`);
}

/** Any JSON integer written plainly: 0 or -?[1-9][0-9]* (no -0, fraction or exponent). */
export function jsonIntegerRule(b: GrammarBuilder): string {
  return b.cached('json-integer', 'json-integer', () => `"0" | "-"? [1-9] [0-9]{0,${MAX_INT_DIGITS - 1}}`);
}

export function jsonBooleanRule(b: GrammarBuilder): string {
  return b.rule('json-boolean', '"true" | "false"');
}

export function jsonNullRule(b: GrammarBuilder): string {
  return b.rule('json-null', '"null"');
}

/** Any JSON value (recursive through json-object and json-array). */
export function jsonValueRule(b: GrammarBuilder): string {
  return b.cached('json-value', 'json-value', () =>
    [jsonObjectRule(b), jsonArrayRule(b), jsonStringRule(b), jsonNumberRule(b), '"true"', '"false"', '"null"'].join(' | '));
}

/** Any JSON object (members in any order, duplicate keys allowed as RFC 8259 does). */
export function jsonObjectRule(b: GrammarBuilder): string {
  return b.cached('json-object', 'json-object', () => {
    const ws = wsRule(b);
    const member = b.rule('json-member', `${jsonStringRule(b)} ${ws} ":" ${ws} ${jsonValueRule(b)}`);
    return `"{" ${ws} (${member} (${sepExpr(b)} ${member})* ${ws})? "}"`;
  });
}

/** Any JSON array. */
export function jsonArrayRule(b: GrammarBuilder): string {
  return b.cached('json-array', 'json-array', () => {
    const ws = wsRule(b);
    const value = jsonValueRule(b);
    return `"[" ${ws} (${value} (${sepExpr(b)} ${value})* ${ws})? "]"`;
  });
}

/** Full grammar: any JSON object at top level (the OpenAI `json_object` response format). */
export function compileJsonObject(): string {
  const b = new GrammarBuilder();
  return b.build(jsonObjectRule(b));
}

/** Full grammar: any JSON value at top level. */
export function compileJsonValue(): string {
  const b = new GrammarBuilder();
  return b.build(jsonValueRule(b));
}
