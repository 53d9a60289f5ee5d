// `lfm2` (vLLM and SGLang): LiquidAI LFM2 writes `<|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|>`, a
// Python list of keyword-argument calls, or the JSON variant `[{"name": "f", "arguments": {...}}, ...]`.
// Invariant: a block holds one non-empty list (or a single bare call / object) whose every element is a valid
// call, else the whole block stays content; text outside blocks is content.
import { callFromPython, scanJsonCalls } from './call-shape.js';
import { defineParser } from './define-parser.js';
import { scanPythonCall, scanPythonCallList } from './python-scan.js';
import { skipWs, type ScanResult } from './scan.js';
import { TaggedStream, type BlockFormat } from './tagged-stream.js';
import type { ParsedToolCall } from './types.js';

const ARGS = { argumentKeys: ['arguments', 'parameters'], requireArguments: false } as const;

const LFM2_FORMAT: BlockFormat = {
  start: '<|tool_call_start|>',
  python: true,
  end: '<|tool_call_end|>',
  scanBody(text: string, pos: number): ScanResult<ParsedToolCall[]> {
    const c = text[pos];
    if (c === '{') return scanJsonCalls(text, pos, ARGS);
    if (c === '[') {
      const q = skipWs(text, pos + 1);
      if (q === text.length) return { status: 'incomplete' };
      if (text[q] === '{') return scanJsonCalls(text, pos, ARGS);
      const r = scanPythonCallList(text, pos);
      return r.status === 'done' ? { ...r, value: r.value.map(callFromPython) } : r;
    }
    const r = scanPythonCall(text, pos);
    return r.status === 'done' ? { ...r, value: [callFromPython(r.value)] } : r;
  },
};

export const lfm2Parser = defineParser('lfm2', ['<|tool_call_start|>'], false, () => new TaggedStream(LFM2_FORMAT));
