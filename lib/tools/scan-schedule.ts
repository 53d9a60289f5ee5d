// When a stream re-runs its from-scratch scan of a held buffer: at the end, while the buffer is short, when a
// cheap bracket/string tracker sees the depth return to zero, and whenever the buffer has doubled.
// Invariant: only latency depends on this (scans are prefix-stable, scan.ts), and the total work stays linear
// in the output for well-formed calls.

/** Tracks quotes and bracket depth over a growing buffer, resuming where it stopped. */
class ExtentTracker {
  private pos = 0;
  private depth = 0;
  private quote = '';
  private triple = false;

  constructor(private readonly python: boolean) {}

  /** Advances over the new part of `buf`; true when the depth returned to zero (or below) on the way. */
  advance(buf: string): boolean {
    let closed = false;
    while (this.pos < buf.length) {
      const c = buf[this.pos];
      if (this.quote !== '') {
        if (c === '\\') {
          if (this.pos + 1 >= buf.length) break;
          this.pos += 2;
          continue;
        }
        if (c === this.quote && this.triple) {
          if (this.pos + 2 >= buf.length) break;
          if (buf[this.pos + 1] === c && buf[this.pos + 2] === c) {
            this.quote = '';
            this.pos += 3;
            continue;
          }
        } else if (c === this.quote) this.quote = '';
        this.pos++;
        continue;
      }
      if (c === '"' || (this.python && c === "'")) {
        if (this.python) {
          if (this.pos + 2 >= buf.length) break;
          this.triple = buf[this.pos + 1] === c && buf[this.pos + 2] === c;
        }
        this.quote = c;
        this.pos += this.triple ? 3 : 1;
        continue;
      }
      if (c === '{' || c === '[' || c === '(') this.depth++;
      else if (c === '}' || c === ']' || c === ')') {
        this.depth--;
        if (this.depth <= 0) closed = true;
      }
      this.pos++;
    }
    return closed;
  }
}

export class ScanSchedule {
  private lastLen = 0;
  private tracker: ExtentTracker;

  /** `python`: single quotes and triple quotes delimit strings too. */
  constructor(
    private readonly python: boolean,
    private readonly eagerUpTo = 64,
  ) {
    this.tracker = new ExtentTracker(python);
  }

  /** Whether to scan `buffer` now (call once per change of the buffer; it only ever grows until reset). */
  due(buffer: string, final: boolean): boolean {
    const closed = this.tracker.advance(buffer);
    const due = final || closed || buffer.length <= this.eagerUpTo || buffer.length >= 2 * this.lastLen;
    if (due) this.lastLen = buffer.length;
    return due;
  }

  /** For a new buffer. */
  reset(): void {
    this.lastLen = 0;
    this.tracker = new ExtentTracker(this.python);
  }
}
