// An output constraint (response_format, structured outputs, a required or named tool call) for a request whose
// model reasons first: the grammar lets the reasoning block through unconstrained and holds the answer after it,
// as vLLM applies structured outputs only once the reasoning has ended.
// Invariants: the answer part is exactly the original grammar (its root renamed, nothing else touched); the
// reasoning part accepts any text that does not contain the end tag, then the end tag and optional whitespace;
// a lazy grammar (tool_choice auto) keeps its rules and gets a `reasoning` field: the engine then looks for its
// triggers only in the answer, after the thinking block (native/engine/output_constraint.h).
import type { OutputGrammar } from '../constraints.js';
import { literal } from '../structured/gbnf.js';
import type { ReasoningParser, ReasoningStart } from './parsers.js';

/** Words (rule names) of a GBNF text outside literals, classes and comments. */
function ruleWords(gbnf: string): Set<string> {
  const words = new Set<string>();
  mapWords(gbnf, (w) => { words.add(w); return w; });
  return words;
}

/**
 * GBNF rules for "any text without `tag`", as the automaton that tracks how much of the tag the text ends with:
 * state i (0 <= i < tag.length) has matched tag[0..i); from it the next character either continues the tag (never
 * to its end), restarts it (the first character, which does not recur in the tag) or breaks it; the text may end
 * in any state. Right-recursive, which the matcher runs without growing its stacks (a rule at the end of an
 * alternative returns to its parent). The start rule is name(0).
 */
function textWithoutRules(tag: string, name: (i: number) => string): string[] {
  const first = tag[0];
  if (tag.length < 2 || tag.indexOf(first, 1) >= 0) throw new Error(`reasoning tag ${tag}: needs 2+ characters, the first not recurring`);
  const esc = (ch: string) => (ch === ']' || ch === '\\' || ch === '^' || ch === '-' ? `\\${ch}` : ch);
  const rules: string[] = [];
  for (let i = 0; i < tag.length; ++i) {
    const alts = [`${literal(first)} ${name(1)}`];
    if (i === 0) alts.push(`[^${esc(first)}] ${name(0)}`);
    else {
      if (i + 1 < tag.length) alts.push(`${literal(tag[i])} ${name(i + 1)}`);
      alts.push(`[^${esc(first)}${esc(tag[i])}] ${name(0)}`);
    }
    alts.push('""');
    rules.push(`${name(i)} ::= ${alts.join(' | ')}`);
  }
  return rules;
}

/** Rewrites every word (rule name) of a GBNF text through `f`, leaving literals, classes and comments as they are. */
function mapWords(gbnf: string, f: (word: string) => string): string {
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
      out += f(gbnf.slice(i, j));
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
  if (start === 'content') return grammar;
  // a lazy grammar (tool_choice auto) stays lazy; the engine looks for its triggers only after the thinking block
  if (grammar.triggers.length > 0) return { ...grammar, reasoning: { startTag: parser.startTag, endTag: parser.endTag, inBlock: start === 'reasoning' } };
  // names the grammar does not use (a user's GBNF may name its rules anything)
  const used = ruleWords(grammar.gbnf);
  let prefix = 'reasoning';
  for (let n = 2; [...used].some((w) => w.startsWith(prefix)); ++n) prefix = `reasoning${n}`;
  const answer = `${prefix}-answer`;
  const text = (i: number) => `${prefix}-text${i}`;
  const ws = '[ \\t\\n]*';
  const block = `${text(0)} ${literal(parser.endTag)} ${ws}`;
  const head = start === 'reasoning' ? block : `(${ws} ${literal(parser.startTag)} ${block})?`;
  const gbnf = [`root ::= ${head} ${answer}`, ...textWithoutRules(parser.endTag, text),
    mapWords(grammar.gbnf, (w) => (w === 'root' ? answer : w))].join('\n');
  return { ...grammar, gbnf };
}
