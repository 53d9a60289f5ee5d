// Negative numbers as separate words for node:util parseArgs, which otherwise refuses a value that starts
// with '-' (`--chunked-prefill-size -1`, as vLLM / SGLang users type it): joinNegativeValues rewrites
// `--flag -1` (and `-p -1` for a short flag) into `--flag=-1` before parseArgs sees the words.
// Invariant: only a word that reads as a number (-1, -0.5, -.5, -1e3, -inf) after a string-valued flag
// written without '=' is joined; a real flag (--port, -h) is never taken as a value, and words after '--'
// are left alone.
import type { ParseArgsConfig } from 'node:util';

const NEGATIVE_NUMBER = /^-(?:(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?)$/i;

export function joinNegativeValues(args: readonly string[], options: NonNullable<ParseArgsConfig['options']>): string[] {
  const longOf = new Map<string, string>();
  for (const [name, o] of Object.entries(options)) if (o.short !== undefined) longOf.set(o.short, name);
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const word = args[i];
    if (word === '--') {
      out.push(...args.slice(i));
      break;
    }
    const name = /^--[^=]+$/.test(word) ? word.slice(2) : /^-[^-]$/.test(word) ? longOf.get(word[1]) : undefined;
    const next = args[i + 1];
    if (name !== undefined && options[name]?.type === 'string' && next !== undefined && NEGATIVE_NUMBER.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else {
      out.push(word);
    }
  }
  return out;
}
