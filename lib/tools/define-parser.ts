// Builds a ToolCallParser from a stream factory: parse() is the stream run over the whole text.
// Invariant: the parser object is immutable and stateless; all state lives in the streams it makes.
import { parseWithStream } from './collect.js';
import type { ToolCallParser, ToolCallStream } from './types.js';

export function defineParser(
  name: string,
  triggers: string[],
  triggerAtStartOnly: boolean,
  createStream: () => ToolCallStream,
): ToolCallParser {
  return Object.freeze({
    name,
    triggers: Object.freeze([...triggers]) as string[],
    triggerAtStartOnly,
    parse: (text: string) => parseWithStream(createStream(), text),
    stream: createStream,
  });
}
