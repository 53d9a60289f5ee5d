// `hermes` (vLLM; SGLang `hermes`, `qwen25`, `qwen`): Qwen2.5/Qwen3 and NousHermes write each call as
// `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`; text around the blocks is content.
// Invariant: a block is one JSON object with a non-empty string "name" and object "arguments" ("parameters" too;
// missing/null is {}; a JSON string holding an object is unwrapped), else it stays content.
import { callFromObject } from './call-shape.js';
import { defineParser } from './define-parser.js';
import { scanJson } from './json-scan.js';
import type { ScanResult } from './scan.js';
import { TaggedStream, type BlockFormat } from './tagged-stream.js';
import type { ParsedToolCall } from './types.js';

const ARGS = { argumentKeys: ['arguments', 'parameters'], requireArguments: false } as const;

const HERMES_FORMAT: BlockFormat = {
  start: '<tool_call>',
  python: false,
  end: '</tool_call>',
  scanBody(text: string, pos: number): ScanResult<ParsedToolCall[]> {
    if (text[pos] !== '{') return { status: 'error' };
    const r = scanJson(text, pos);
    if (r.status !== 'done') return r;
    const call = callFromObject(r.value, ARGS);
    return call ? { status: 'done', value: [call], end: r.end } : { status: 'error' };
  },
};

export const hermesParser = defineParser('hermes', ['<tool_call>'], false, () => new TaggedStream(HERMES_FORMAT));
