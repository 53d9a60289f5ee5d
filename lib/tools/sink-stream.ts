// The shell every parser stream shares: push() and finish() feed the parser's decisions into an EventSink and
// hand out the events that became certain. Invariant: finish() feeds the end once; push() after it throws.
import { EventSink } from './event-sink.js';
import type { ToolCallStream, ToolStreamEvent } from './types.js';

export abstract class SinkStream implements ToolCallStream {
  protected readonly sink = new EventSink();
  private finished = false;

  push(delta: string): ToolStreamEvent[] {
    if (this.finished) throw new Error('tool-call stream: push() after finish()');
    this.feed(delta, false);
    return this.sink.take();
  }

  finish(): ToolStreamEvent[] {
    if (!this.finished) {
      this.finished = true;
      this.feed('', true);
      this.sink.end();
    }
    return this.sink.take();
  }

  /** Takes more output (`final`: the output ended; `input` is then ''). */
  protected abstract feed(input: string, final: boolean): void;
}
