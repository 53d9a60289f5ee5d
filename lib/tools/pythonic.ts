// `pythonic` (vLLM and SGLang; Llama 3.2 / 4 style): the whole output, after optional whitespace, is a Python
// list of keyword-argument calls `[f(a=1), g(b="x")]`, trailing whitespace allowed.
// Invariant: either the whole output is such a list (calls, no content; certain only at finish()) or it is all
// content, verbatim, released as soon as the output can no longer be such a list.
import { callFromPython } from './call-shape.js';
import { defineParser } from './define-parser.js';
import { SinkStream } from './sink-stream.js';
import { scanPythonCallList, type PyCall } from './python-scan.js';
import { skipWs } from './scan.js';
import { ScanSchedule } from './scan-schedule.js';

class PythonicStream extends SinkStream {
  private readonly schedule = new ScanSchedule(true);
  private mode: 'lead' | 'list' | 'text' = 'lead';
  /** Everything so far, while it may still be a call list. */
  private buf = '';
  private listStart = 0;
  private calls: PyCall[] | null = null;
  private listEnd = 0;

  protected feed(input: string, final: boolean): void {
    if (this.mode === 'text') {
      this.sink.content(input);
      return;
    }
    this.buf += input;
    if (this.mode === 'lead') {
      const p = skipWs(this.buf, 0);
      if (p === this.buf.length) {
        if (final) this.reject();
        return;
      }
      if (this.buf[p] !== '[') return this.reject();
      this.mode = 'list';
      this.listStart = p;
    }
    if (this.calls === null) {
      if (!this.schedule.due(this.buf, final)) return;
      const r = scanPythonCallList(this.buf, this.listStart);
      if (r.status === 'error' || (r.status === 'incomplete' && final)) return this.reject();
      if (r.status === 'incomplete') return;
      this.calls = r.value;
      this.listEnd = r.end;
    }
    if (skipWs(this.buf, this.listEnd) < this.buf.length) return this.reject();
    this.listEnd = this.buf.length; // only whitespace so far: no need to look at it again
    if (final) for (const c of this.calls) this.sink.call(callFromPython(c));
  }

  private reject(): void {
    this.mode = 'text';
    this.sink.content(this.buf);
    this.buf = '';
  }
}

export const pythonicParser = defineParser('pythonic', ['['], true, () => new PythonicStream());
