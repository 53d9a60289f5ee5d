// An output constraint (response_format, structured outputs, a required or named tool call) for a request whose
// model reasons first: the grammar lets the reasoning block through unconstrained and holds the answer after it,
// as vLLM applies structured outputs only once the reasoning has ended.
// Invariants: the answer part is exactly the original grammar (its root renamed, nothing else touched); the
// reasoning part accepts any text that does not contain the end tag, then the end tag and optional whitespace;
// a lazy grammar (tool_choice auto) is returned unchanged (its triggers already leave free text, the reasoning
// included, unconstrained until a call starts).
import type { OutputGrammar } from '../constraints.js';
import { literal } from '../structured/gbnf.js';
import type { ReasoningParser, ReasoningStart } from './parsers.js';

/** Rule names of the reasoning part (the answer's root is renamed to ANSWER_ROOT). */
const PREFIX = 'reasoning';
const ANSWER_ROOT = 'reasoning-answer';

/**
 * GBNF for "any text without `tag`": every `<` run (the tag's first character) is followed by a character that
 * breaks the tag, or ends the text part-way into it. Valid because the first character does not recur in the tag.
 */
function textWithoutRule(tag: string): string {
  const first = tag[0];
  if (tag.indexOf(first, 1) >= 0) throw new Error(`reasoning tag ${tag}: its first character recurs in it`);
  const esc = (ch: string) => (ch === ']' || ch === '\\' || ch === '^' || ch === '-' ? `\\${ch}` : ch);
  const notOr = (ch: string) => `[^${esc(first)}${esc(ch)}]`;
  // after "<" ... tag[i-1]: the next character either breaks the tag (not tag[i], not "<": that starts a new run)
  // or continues it; the last character may not complete it.
  let breaks = notOr(tag[tag.length - 1]);
  for (let i = tag.length - 2; i >= 1; --i) breaks = `${notOr(tag[i])} | ${literal(tag[i])} (${breaks})`;
  let tail = '';
  for (let i = tag.length - 2; i >= 1; --i) tail = `(${literal(tag[i])} ${tail})?`;
  const run = `${literal(first)}+`;
  return [
    `${PREFIX}-text ::= ([^${esc(first)}] | ${run} ${PREFIX}-break)* (${run} ${tail})?`,
    `${PREFIX}-break ::= ${breaks}`,
  ].join('\n');
}

/** Renames the rule `root` (definition and references) outside literals, classes and comments. */
function renameRoot(gbnf: string, to: string): string {
  let out = '';
  let i = 0;
  while (i < gbnf.length) {
    const c = gbnf[i];
    if (c === '"' || c === '[') {
      const close = c === '"' ? '"' : ']';
      let j = i + 1;
      while (j < gbnf.length && gbnf[j] !== close) j += gbnf[j] === '\\' ? 2 : 1;
      out += gbnf.slice(i, j + 1);
      i = j + 1;
    } else if (c === '#') {
      const j = gbnf.indexOf('\n', i);
      const end = j < 0 ? gbnf.length : j;
      out += gbnf.slice(i, end);
      i = end;
    } else if (/[a-zA-Z0-9-]/.test(c)) {
      let j = i;
      while (j < gbnf.length && /[a-zA-Z0-9-]/.test(gbnf[j])) ++j;
      const word = gbnf.slice(i, j);
      out += word === 'root' ? to : word;
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

/** `grammar` for a request whose output starts at `start` (reasoningStart); unchanged where nothing comes first. */
export function withReasoning(grammar: OutputGrammar, parser: ReasoningParser, start: ReasoningStart): OutputGrammar {
  if (start === 'content' || grammar.triggers.length > 0) return grammar;
  const ws = '[ \\t\\n]*';
  const block = `${PREFIX}-text ${literal(parser.endTag)} ${ws}`;
  const head = start === 'reasoning' ? block : `(${ws} ${literal(parser.startTag)} ${block})?`;
  const gbnf = [`root ::= ${head} ${ANSWER_ROOT}`, textWithoutRule(parser.endTag), renameRoot(grammar.gbnf, ANSWER_ROOT)].join('\n');
  return { ...grammar, gbnf };
}
