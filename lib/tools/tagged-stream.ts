// The stream shared by formats that wrap calls in start/end tags anywhere in the output (hermes, lfm2, mistral): a
// block is start tag, whitespace, the call(s), whitespace, then the end tag or the end of the output (a format
// without an end tag, mistral's: the block ends right after its calls).
// Invariant: text that may begin a start tag is held until decided; a malformed block puts its start tag into
// content and everything after it is read again as text; every split of the output gives the same events.
import { SinkStream } from './sink-stream.js';
import { skipWs, type ScanResult } from './scan.js';
import { ScanSchedule } from './scan-schedule.js';
import type { ParsedToolCall } from './types.js';

export interface BlockFormat {
  start: string;
  end: string; // '' for none
  /** Whether bodies are Python-like (single and triple quotes delimit strings), for the scan schedule. */
  python: boolean;
  /** Scans the call(s) of one block from `pos`, the first non-whitespace character after the start tag. */
  scanBody(text: string, pos: number): ScanResult<ParsedToolCall[]>;
}

type BlockOutcome = { kind: 'wait' } | { kind: 'reject' } | { kind: 'accept'; calls: ParsedToolCall[]; consumed: number };

const WAIT: BlockOutcome = { kind: 'wait' };
const REJECT: BlockOutcome = { kind: 'reject' };

/** Length of the longest proper prefix of `tag` that `s` ends with. */
export function partialTagSuffix(s: string, tag: string): number {
  for (let k = Math.min(tag.length - 1, s.length); k > 0; k--) if (s.endsWith(tag.slice(0, k))) return k;
  return 0;
}

export class TaggedStream extends SinkStream {
  private readonly schedule: ScanSchedule;
  private inBlock = false;
  /** Outside a block: the tail of the text that may be the beginning of a start tag. */
  private held = '';
  /** Inside a block: the text after its start tag. */
  private body = '';
  /** Inside a block: its calls and where they end, once scanned (prefix-stable, so kept). */
  private scanned: { calls: ParsedToolCall[]; end: number } | null = null;

  constructor(private readonly fmt: BlockFormat) {
    super();
    this.schedule = new ScanSchedule(fmt.python);
  }

  protected feed(input: string, final: boolean): void {
    const { start } = this.fmt;
    for (;;) {
      if (!this.inBlock) {
        const s = this.held + input;
        const i = s.indexOf(start);
        if (i < 0) {
          const keep = final ? 0 : partialTagSuffix(s, start);
          this.sink.content(s.slice(0, s.length - keep));
          this.held = s.slice(s.length - keep);
          return;
        }
        this.sink.content(s.slice(0, i));
        this.held = '';
        this.inBlock = true;
        this.body = '';
        this.scanned = null;
        this.schedule.reset();
        input = s.slice(i + start.length);
        continue;
      }
      this.body += input;
      // Once the calls are scanned only the short tail is looked at, on every change.
      if (this.scanned === null && !this.schedule.due(this.body, final)) return;
      const r = this.evaluate(final);
      if (r.kind === 'wait') return;
      this.inBlock = false;
      if (r.kind === 'accept') {
        for (const c of r.calls) this.sink.call(c);
        input = this.body.slice(r.consumed);
      } else {
        this.sink.content(start);
        input = this.body;
      }
      this.body = '';
    }
  }

  private evaluate(final: boolean): BlockOutcome {
    const { body } = this;
    const { end } = this.fmt;
    if (this.scanned === null) {
      const p = skipWs(body, 0);
      if (p === body.length) return final ? REJECT : WAIT;
      const r = this.fmt.scanBody(body, p);
      if (r.status === 'incomplete') return final ? REJECT : WAIT;
      if (r.status === 'error') return REJECT;
      this.scanned = { calls: r.value, end: r.end };
    }
    const { calls } = this.scanned;
    // no end tag (mistral): the block ends with its calls, and what follows is text again, whitespace included
    if (end === '') return { kind: 'accept', calls, consumed: this.scanned.end };
    const p = skipWs(body, this.scanned.end);
    this.scanned.end = p; // whitespace seen once is not scanned again
    if (body.startsWith(end, p)) return { kind: 'accept', calls, consumed: p + end.length };
    if (p === body.length) return final ? { kind: 'accept', calls, consumed: p } : WAIT;
    if (end.startsWith(body.slice(p))) return final ? REJECT : WAIT;
    return REJECT;
  }
}
