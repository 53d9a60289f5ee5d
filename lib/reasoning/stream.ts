// A reasoning model's output split into its reasoning (the text inside the think block) and its answer (the
// content after it), as it streams and for a whole text.
// Invariants: the pieces of a stream, joined by kind, equal splitReasoning of the joined text, however the text
// is cut (a tag split across pushes included); no text is dropped except the tags themselves, the whitespace
// around the reasoning (after its start tag, before its end tag) and the whitespace between the end tag and
// the answer; a block never closed keeps its text as reasoning (a streamed reasoning delta cannot be taken back).
import type { ReasoningParser, ReasoningStart } from './parsers.js';

export interface ReasoningPiece {
  kind: 'reasoning' | 'content';
  text: string;
}

type State = 'undecided' | 'reasoning-lead' | 'reasoning' | 'content-lead' | 'content';

/** The longest suffix of `text` that is a proper prefix of `tag` (held back: the tag may be arriving). */
function partialTagLength(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; --n) {
    if (tag.startsWith(text.slice(text.length - n))) return n;
  }
  return 0;
}

export class ReasoningStream {
  readonly #parser: ReasoningParser;
  #state: State;
  #buf = ''; // text received and not yet emitted
  #sawReasoning = false;
  #leadTagSeen = false; // reasoning-lead: a start tag at the front was dropped or cannot come any more

  constructor(parser: ReasoningParser, start: ReasoningStart) {
    this.#parser = parser;
    this.#state = start === 'by-output' ? 'undecided' : start === 'reasoning' ? 'reasoning-lead' : 'content';
    if (this.#state === 'reasoning-lead') this.#sawReasoning = true;
  }

  /** Whether the output has been in a reasoning block (so far). */
  get reasoned(): boolean { return this.#sawReasoning; }

  /** Whether the answer is still to come: in a reasoning block, or in the whitespace dropped after its end tag. */
  get beforeAnswer(): boolean {
    return this.#state === 'reasoning' || this.#state === 'reasoning-lead' || this.#state === 'content-lead';
  }

  push(text: string): ReasoningPiece[] {
    this.#buf += text;
    const out: ReasoningPiece[] = [];
    while (this.#step(out));
    return merge(out);
  }

  finish(): ReasoningPiece[] {
    const out: ReasoningPiece[] = [];
    const rest = this.#buf;
    this.#buf = '';
    if (this.#state === 'reasoning-lead') emit(out, 'reasoning', rest.trim());
    else if (this.#state === 'reasoning') emit(out, 'reasoning', rest.trimEnd());
    else if (this.#state === 'undecided' || this.#state === 'content') emit(out, 'content', rest);
    this.#state = 'content';
    return out;
  }

  /** One transition on the buffer; false when it needs more text. */
  #step(out: ReasoningPiece[]): boolean {
    const { startTag, endTag } = this.#parser;
    switch (this.#state) {
      case 'undecided': {
        const t = this.#buf.trimStart();
        if (t.length === 0 || (t.length < startTag.length && startTag.startsWith(t))) return false;
        if (t.startsWith(startTag)) {
          this.#buf = t.slice(startTag.length);
          this.#state = 'reasoning-lead';
          this.#leadTagSeen = true;
          this.#sawReasoning = true;
        } else {
          this.#state = 'content'; // the answer as written, leading whitespace included
        }
        return true;
      }
      case 'reasoning-lead': {
        // whitespace after the start tag; a start tag the model writes again after a prompt that opened the block
        const t = this.#buf.trimStart();
        this.#buf = t;
        if (t.length === 0) return false;
        if (!this.#leadTagSeen) {
          if (t.length < startTag.length && startTag.startsWith(t)) return false;
          this.#leadTagSeen = true;
          if (t.startsWith(startTag)) { this.#buf = t.slice(startTag.length); return true; } // then its whitespace
        }
        this.#state = 'reasoning';
        return true;
      }
      case 'reasoning': {
        const end = this.#buf.indexOf(endTag);
        if (end >= 0) {
          emit(out, 'reasoning', this.#buf.slice(0, end).trimEnd());
          this.#buf = this.#buf.slice(end + endTag.length);
          this.#state = 'content-lead';
          return true;
        }
        const held = this.#buf.length - partialTagLength(this.#buf, endTag);
        const ready = this.#buf.slice(0, held).trimEnd(); // trailing whitespace waits: it may precede the end tag
        emit(out, 'reasoning', ready);
        this.#buf = this.#buf.slice(ready.length);
        return false;
      }
      case 'content-lead': {
        this.#buf = this.#buf.trimStart();
        if (this.#buf.length === 0) return false;
        this.#state = 'content';
        return true;
      }
      case 'content':
        emit(out, 'content', this.#buf);
        this.#buf = '';
        return false;
    }
  }
}

function emit(out: ReasoningPiece[], kind: ReasoningPiece['kind'], text: string): void {
  if (text.length > 0) out.push({ kind, text });
}

function merge(pieces: ReasoningPiece[]): ReasoningPiece[] {
  const out: ReasoningPiece[] = [];
  for (const p of pieces) {
    const last = out[out.length - 1];
    if (last && last.kind === p.kind) last.text += p.text;
    else out.push({ ...p });
  }
  return out;
}

export interface SplitReasoning {
  reasoning: string | null; // null: the output never entered a reasoning block
  content: string;
}

/** A whole output split as its stream would be. */
export function splitReasoning(parser: ReasoningParser, start: ReasoningStart, text: string): SplitReasoning {
  const s = new ReasoningStream(parser, start);
  const pieces = [...s.push(text), ...s.finish()];
  const join = (kind: ReasoningPiece['kind']) => pieces.filter((p) => p.kind === kind).map((p) => p.text).join('');
  return { reasoning: s.reasoned ? join('reasoning') : null, content: join('content') };
}
