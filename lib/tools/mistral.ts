// `mistral` (vLLM and SGLang): Mistral models write `[TOOL_CALLS]` (a control token) and then their calls:
// Mistral Nemo / Small 3.0-3.1 (tokenizers before v11) a JSON list `[{"name": "f", "arguments": {...}}, ...]` (one
// bare object too), later ones `f[ARGS]{...}` after each `[TOOL_CALLS]`. Text before the first `[TOOL_CALLS]` is
// content.
// Invariant: a block holds one non-empty list (or one object, or one `name[ARGS]{...}`) whose every element is a
// valid call, else the whole block stays content; text outside blocks is content.
import { scanJsonCalls } from './call-shape.js';
import { defineParser } from './define-parser.js';
import { scanJson } from './json-scan.js';
import { isJsonObject, stringifyJson } from './json-value.js';
import type { ScanResult } from './scan.js';
import { TaggedStream, type BlockFormat } from './tagged-stream.js';
import type { ParsedToolCall } from './types.js';

const ARGS = { argumentKeys: ['arguments', 'parameters'], requireArguments: false } as const;
const ARGS_TAG = '[ARGS]';
const NAME = /^[A-Za-z0-9_.-]$/;

/** `name[ARGS]{...}` (v11+ tokenizers): a function name, the tag, then its arguments object. */
function namedCall(text: string, pos: number): ScanResult<ParsedToolCall[]> {
  let p = pos;
  while (p < text.length && NAME.test(text[p])) p++;
  if (p === pos) return { status: 'error' };
  if (p === text.length) return { status: 'incomplete' };
  if (!text.startsWith(ARGS_TAG, p)) return ARGS_TAG.startsWith(text.slice(p)) ? { status: 'incomplete' } : { status: 'error' };
  const r = scanJson(text, p + ARGS_TAG.length);
  if (r.status !== 'done') return r;
  if (!isJsonObject(r.value)) return { status: 'error' };
  return { status: 'done', value: [{ name: text.slice(pos, p), arguments: stringifyJson(r.value) }], end: r.end };
}

const MISTRAL_FORMAT: BlockFormat = {
  start: '[TOOL_CALLS]',
  python: false,
  end: '', // the calls end the block
  scanBody(text: string, pos: number): ScanResult<ParsedToolCall[]> {
    const c = text[pos];
    return c === '[' || c === '{' ? scanJsonCalls(text, pos, ARGS) : namedCall(text, pos);
  },
};

export const mistralParser = defineParser('mistral', ['[TOOL_CALLS]'], false, () => new TaggedStream(MISTRAL_FORMAT));
