// Where a stream's decisions become events: content text, then each accepted call as a name and its arguments.
// Invariant: content is the text outside accepted calls in order, except that once a call is accepted every
// whitespace-only stretch of content (before, between, after calls) is dropped; such a stretch is held until
// it is decided. A trailing high surrogate is held too, so a split pair never reaches a client.
import type { ParsedToolCall, ToolStreamEvent } from './types.js';
import { isWs } from './scan.js';

export class EventSink {
  private events: ToolStreamEvent[] = [];
  private nextIndex = 0;
  private sawCall = false;
  /** Whether the current stretch of content (since the start or the last call) has non-whitespace. */
  private stretchHasText = false;
  /** Whitespace of the current stretch, held while the stretch is whitespace only. */
  private pendingWs = '';
  private heldSurrogate = '';

  content(text: string): void {
    if (text === '') return;
    if (this.stretchHasText) {
      this.emit(text);
      return;
    }
    let i = 0;
    while (i < text.length && isWs(text[i])) i++;
    if (i === text.length) {
      this.pendingWs += text;
      return;
    }
    this.stretchHasText = true;
    const ws = this.pendingWs;
    this.pendingWs = '';
    this.emit(ws + text);
  }

  call(call: ParsedToolCall): void {
    this.flushSurrogate();
    this.pendingWs = ''; // a whitespace-only stretch next to a call is dropped
    this.stretchHasText = false;
    this.sawCall = true;
    const index = this.nextIndex++;
    this.events.push({ type: 'tool_call', index, name: call.name });
    this.events.push({ type: 'tool_args', index, fragment: call.arguments });
  }

  /** End of output: a whitespace-only last stretch is content only when there was no call at all. */
  end(): void {
    if (this.pendingWs !== '' && !this.sawCall) this.emit(this.pendingWs);
    this.pendingWs = '';
    this.flushSurrogate();
  }

  /** The events gathered since the last take, adjacent content merged. */
  take(): ToolStreamEvent[] {
    const out = this.events;
    this.events = [];
    return out;
  }

  private emit(text: string): void {
    text = this.heldSurrogate + text;
    this.heldSurrogate = '';
    const last = text.charCodeAt(text.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) {
      this.heldSurrogate = text[text.length - 1];
      text = text.slice(0, -1);
    }
    if (text === '') return;
    const prev = this.events[this.events.length - 1];
    if (prev?.type === 'content') prev.text += text;
    else this.events.push({ type: 'content', text });
  }

  private flushSurrogate(): void {
    if (this.heldSurrogate === '') return;
    const s = this.heldSurrogate;
    this.heldSurrogate = '';
    const prev = this.events[this.events.length - 1];
    if (prev?.type === 'content') prev.text += s;
    else this.events.push({ type: 'content', text: s });
  }
}
