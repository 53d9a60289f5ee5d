// `llama3_json` (vLLM, also `llama4_json`; SGLang `llama3`): an output that starts (after whitespace and an
// optional `<|python_tag|>`) with `{"name": "f", "parameters": {...}}` ("arguments" too), several split by `;`.
// Invariant: calls are the longest run of valid call objects at the start, each emitted when its `}` arrives;
// what follows the last one is content; if the first object is not a call the whole output is content.
import { callFromObject } from './call-shape.js';
import { defineParser } from './define-parser.js';
import { SinkStream } from './sink-stream.js';
import { scanJson } from './json-scan.js';
import { skipWs } from './scan.js';
import { ScanSchedule } from './scan-schedule.js';
import type { ParsedToolCall } from './types.js';

const PYTHON_TAG = '<|python_tag|>';
const ARGS = { argumentKeys: ['parameters', 'arguments'], requireArguments: true } as const;

type Step = { kind: 'wait' } | { kind: 'reject' } | { kind: 'end' } | { kind: 'call'; call: ParsedToolCall; end: number };

class Llama3JsonStream extends SinkStream {
  private readonly schedule = new ScanSchedule(false);
  private passthrough = false;
  /** The undecided text: from the start of the output, or from the end of the last call. */
  private buf = '';
  private first = true;

  protected feed(input: string, final: boolean): void {
    if (this.passthrough) {
      this.sink.content(input);
      return;
    }
    this.buf += input;
    for (;;) {
      if (!this.schedule.due(this.buf, final)) return;
      const step = this.step(final);
      if (step.kind === 'wait') return;
      if (step.kind === 'end') {
        this.buf = ''; // a dangling `;` after the last call is syntax, not content
        return;
      }
      if (step.kind === 'reject') {
        this.passthrough = true;
        this.sink.content(this.buf);
        this.buf = '';
        return;
      }
      this.sink.call(step.call);
      this.buf = this.buf.slice(step.end);
      this.first = false;
      this.schedule.reset();
    }
  }

  private step(final: boolean): Step {
    const b = this.buf;
    let p = skipWs(b, 0);
    if (this.first) {
      if (b.startsWith(PYTHON_TAG, p)) p = skipWs(b, p + PYTHON_TAG.length);
      else if (p < b.length && PYTHON_TAG.startsWith(b.slice(p))) return final ? { kind: 'reject' } : { kind: 'wait' };
    } else if (b[p] === ';') p = skipWs(b, p + 1);
    if (p === b.length) return !final ? { kind: 'wait' } : this.first ? { kind: 'reject' } : { kind: 'end' };
    if (b[p] !== '{') return { kind: 'reject' };
    const r = scanJson(b, p);
    if (r.status === 'incomplete') return final ? { kind: 'reject' } : { kind: 'wait' };
    if (r.status === 'error') return { kind: 'reject' };
    const call = callFromObject(r.value, ARGS);
    return call ? { kind: 'call', call, end: r.end } : { kind: 'reject' };
  }
}

export const llama3JsonParser = defineParser('llama3_json', [PYTHON_TAG, '{'], true, () => new Llama3JsonStream());
