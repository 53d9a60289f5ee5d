// Modelfile text -> Modelfile, reading what Ollama's parser reads (ollama/ollama parser/parser.go, ParseFile and
// CreateRequest; docs/modelfile.mdx).
// Syntax: one command per line, `COMMAND value`; commands are case-insensitive (so are PARAMETER names and MESSAGE
// roles, which Ollama's docs promise though its parser wants them lower-case); blank lines and lines starting
// with # are skipped (# later in a line is part of the value). A value is the rest of the line, trimmed, or a
// quoted value: "..." or """...""" with the text taken verbatim (no escape sequences: a backslash is a
// backslash, as in Ollama). A quoted value continues over the following lines until a line ends with the
// closing quote (""" for """, " for "), so both forms may span lines. A leading BOM is skipped, and CR LF or CR
// line ends read as LF.
// Invariant: the result is exactly what the text says, or a ModelfileError naming the 1-based line and the
// problem (unknown command or parameter, bad value, unclosed quote, bad MESSAGE role, missing FROM). Things
// Ollama accepts but ignores or overrides (retired parameters, a second TEMPLATE or SYSTEM) go in `warnings`.
import { DEPRECATED_PARAMETERS, PARAMETER_TYPES, parseParameterValue } from './parameters.js';

export type ModelfileParameterValue = number | boolean | string | string[];

export interface ModelfileMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface Modelfile {
  /** A GGUF path, a store name or a hub reference, as written. */
  from: string;
  /** Typed values (int and float -> number, use_mmap -> boolean); `stop` collects every PARAMETER stop in order. */
  parameters: Record<string, ModelfileParameterValue>;
  template: string | null;
  system: string | null;
  license: string[];
  adapters: string[];
  messages: ModelfileMessage[];
  /** Ollama-only commands, kept so a Modelfile round-trips; Spindle does not act on them. */
  requires?: string;
  renderer?: string;
  parser?: string;
  draft?: string;
  /** Lines Ollama accepts but ignores or overrides, each "line N: ...". Not written back by formatModelfile. */
  warnings: string[];
}

export class ModelfileError extends Error {
  /** 1-based line the problem is on (1 when the problem is a missing FROM). */
  readonly line: number;

  constructor(line: number, problem: string) {
    super(`Modelfile line ${line}: ${problem}`);
    this.name = 'ModelfileError';
    this.line = line;
  }
}

const COMMANDS = ['from', 'parameter', 'template', 'system', 'message', 'adapter', 'license', 'requires', 'renderer', 'parser', 'draft'];
const ROLES = new Set(['system', 'user', 'assistant']);

/** Go's strings.TrimSpace: Unicode white space at both ends. */
export function goTrim(s: string): string {
  return s.replace(/^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g, '');
}

/** Ollama's unquote: """x""" -> x, "x" -> x, x -> x; null while a quote is still open. */
export function unquote(s: string): string | null {
  if (s.startsWith('"""')) return s.length >= 6 && s.endsWith('"""') ? s.slice(3, -3) : null;
  if (s.startsWith('"')) return s.length >= 2 && s.endsWith('"') ? s.slice(1, -1) : null;
  return s;
}

interface Draft {
  from?: { value: string; line: number };
  seen: Map<string, number>;
  m: Modelfile;
}

/** The text of a Modelfile's bytes: UTF-8, or UTF-16 with a byte order mark (as Ollama's reader accepts). */
export function decodeModelfile(bytes: Uint8Array): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes.subarray(2));
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes.subarray(2));
  return new TextDecoder('utf-8').decode(bytes);
}

export function parseModelfile(text: string): Modelfile {
  const lines = text.replace(/^\ufeff/, '').replace(/\r\n?/g, '\n').split('\n');
  const draft: Draft = {
    seen: new Map(),
    m: { from: '', parameters: {}, template: null, system: null, license: [], adapters: [], messages: [], warnings: [] },
  };
  let i = 0;
  while (i < lines.length) {
    const line = i + 1;
    const s = lines[i]!.replace(/^[ \t]+/, '');
    if (s === '' || s.startsWith('#')) {
      i++;
      continue;
    }
    const { command, name, rest } = splitCommand(s, line);
    let value = rest;
    let unquoted = unquote(goTrim(value));
    while (unquoted === null) {
      if (++i >= lines.length) throw unclosed(command, goTrim(rest), line);
      value += '\n' + lines[i];
      unquoted = unquote(goTrim(value));
    }
    i++;
    apply(draft, command, name, unquoted, line);
  }
  if (!draft.from) throw new ModelfileError(1, 'no FROM line; a Modelfile must name its model with FROM <GGUF path, store name or hub reference>');
  draft.m.from = draft.from.value;
  return draft.m;
}

function unclosed(command: string, opening: string, line: number): ModelfileError {
  const quote = opening.startsWith('"""') ? '"""' : '"';
  return new ModelfileError(line, `${command.toUpperCase()}: the ${quote} opened here is never closed (the closing ${quote} must end a line)`);
}

/** `COMMAND [name] value` -> its parts; `rest` is the raw value text after the separating space. */
function splitCommand(s: string, line: number): { command: string; name: string; rest: string } {
  const word = /^[A-Za-z]+/.exec(s)?.[0];
  const shown = JSON.stringify(s.split(/[ \t]/)[0]);
  if (!word) throw new ModelfileError(line, `expected a command (FROM, PARAMETER, TEMPLATE, SYSTEM, MESSAGE, ADAPTER, LICENSE) but found ${shown}`);
  const command = word.toLowerCase();
  if (!COMMANDS.includes(command) || (s.length > word.length && !/[ \t]/.test(s[word.length]!))) {
    throw new ModelfileError(line, `unknown command ${shown}; a command is one of FROM, PARAMETER, TEMPLATE, SYSTEM, MESSAGE, ADAPTER, LICENSE (or Ollama's REQUIRES, RENDERER, PARSER, DRAFT)`);
  }
  const upper = command.toUpperCase();
  if (s.length === word.length) {
    const example: Record<string, string> = { parameter: 'PARAMETER temperature 0.7', message: 'MESSAGE user Hello', from: 'FROM ./model.gguf' };
    throw new ModelfileError(line, `${upper} needs a value${example[command] ? `, as in "${example[command]}"` : ` (write ${upper} "" for an empty one)`}`);
  }
  const rest = s.slice(word.length + 1);
  if (command !== 'parameter' && command !== 'message') return { command, name: '', rest };
  const what = command === 'parameter' ? 'a parameter name and a value, as in "PARAMETER temperature 0.7"' : 'a role (system, user or assistant) and a text, as in "MESSAGE user Hello"';
  const body = rest.replace(/^[ \t]+/, '');
  const name = (command === 'parameter' ? /^[A-Za-z0-9_]+/ : /^[A-Za-z]+/).exec(body)?.[0];
  if (!name) throw new ModelfileError(line, `${upper} needs ${what}`);
  const after = body.slice(name.length);
  if (after === '') throw new ModelfileError(line, `${upper} ${name} has no ${command === 'parameter' ? 'value' : 'text'}; ${upper} needs ${what}`);
  if (!/^[ \t]/.test(after)) {
    const bad = JSON.stringify(body.split(/[ \t]/)[0]);
    throw new ModelfileError(line, command === 'parameter'
      ? `PARAMETER name ${bad} may only use letters, digits and _`
      : `MESSAGE role must be system, user or assistant, not ${bad}`);
  }
  return { command, name, rest: after.slice(1) };
}

function apply(d: Draft, command: string, name: string, value: string, line: number): void {
  const m = d.m;
  const again = (key: string, what: string) => {
    const before = d.seen.get(key);
    if (before !== undefined) m.warnings.push(`line ${line}: ${what} is given again (first on line ${before}); the last one wins`);
    d.seen.set(key, line);
  };
  switch (command) {
    case 'from':
      if (d.from) throw new ModelfileError(line, `FROM is given twice (lines ${d.from.line} and ${line}); a Modelfile builds on one model`);
      if (value === '') throw new ModelfileError(line, 'FROM needs a model: a GGUF path, a store name or a hub reference');
      d.from = { value, line };
      return;
    case 'parameter':
      return parameter(d, name, value, line, again);
    case 'message': {
      const role = name.toLowerCase();
      if (!ROLES.has(role)) throw new ModelfileError(line, `MESSAGE role must be system, user or assistant, not ${JSON.stringify(name)}`);
      m.messages.push({ role: role as ModelfileMessage['role'], content: value });
      return;
    }
    case 'template':
    case 'system':
      again(command, command.toUpperCase());
      m[command] = value;
      return;
    case 'license':
      m.license.push(value);
      return;
    case 'adapter':
      if (value === '') throw new ModelfileError(line, 'ADAPTER needs a path to a LoRA adapter');
      m.adapters.push(value);
      return;
    case 'requires':
      if (!/^v?\d+(\.\d+(\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?)?)?$/.test(value)) {
        throw new ModelfileError(line, `REQUIRES must be a version such as 0.14.0, not ${JSON.stringify(value)}`);
      }
      again(command, 'REQUIRES');
      m.requires = value.replace(/^v/, '');
      return;
    case 'renderer':
    case 'parser':
    case 'draft':
      again(command, command.toUpperCase());
      m[command] = value;
      return;
  }
}

function parameter(d: Draft, name: string, value: string, line: number, again: (key: string, what: string) => void): void {
  const m = d.m;
  const key = name.toLowerCase();
  if (DEPRECATED_PARAMETERS.has(key)) {
    m.warnings.push(`line ${line}: parameter ${key} is deprecated and ignored (as Ollama does)`);
    return;
  }
  const type = PARAMETER_TYPES[key];
  if (!type) {
    throw new ModelfileError(line, `unknown parameter ${JSON.stringify(name)}; known parameters: ${Object.keys(PARAMETER_TYPES).join(', ')}`);
  }
  if (type === 'string[]') {
    const list = m.parameters[key];
    if (Array.isArray(list)) list.push(value);
    else m.parameters[key] = [value];
    return;
  }
  const parsed = parseParameterValue(type, value);
  if ('problem' in parsed) {
    const kind = { int: 'an integer', float: 'a number', bool: 'true or false' }[type];
    throw new ModelfileError(line, `PARAMETER ${key} ${value}: the value ${JSON.stringify(value)} ${parsed.problem} (${key} takes ${kind})`);
  }
  again(`parameter ${key}`, `PARAMETER ${key}`);
  m.parameters[key] = parsed.value;
}
