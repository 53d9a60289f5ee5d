// Modelfile -> text (for `spindle show --modelfile`), the inverse of parseModelfile.
// Invariant: parseModelfile(formatModelfile(m)) equals m (warnings aside) for every Modelfile the parser can
// produce; a value is written bare when it reads back unchanged, else in "..." or """...""" (multi-line values
// prefer """), choosing a form whose closing quote cannot be found early. A value no quoting can carry (a carriage
// return, which the parser reads as a line end) or a parameter of the wrong type is an Error, never bad text.
import { PARAMETER_TYPES } from './parameters.js';
import { goTrim, type Modelfile } from './parse.js';

const trimEnd = (s: string): string => goTrim('x' + s).slice(1);

/** Every text before a line break inside `value` (what the parser tests for a closing quote). */
function linePrefixes(value: string): string[] {
  const out: string[] = [];
  for (let k = value.indexOf('\n'); k >= 0; k = value.indexOf('\n', k + 1)) out.push(value.slice(0, k));
  return out;
}

function singleQuotable(value: string): boolean {
  return !`"${value}"`.startsWith('"""') && linePrefixes(value).every((p) => !trimEnd(p).endsWith('"'));
}

function tripleQuotable(value: string): boolean {
  return linePrefixes(value).every((p) => !trimEnd(p).endsWith('"""'));
}

/** `value` as Modelfile text that parseModelfile reads back as exactly `value`. */
export function quoteValue(value: string, what: string): string {
  if (value.includes('\r')) throw new Error(`formatModelfile: ${what} contains a carriage return, which a Modelfile cannot carry`);
  if (value !== '' && !value.includes('\n') && goTrim(value) === value && !value.startsWith('"')) return value;
  const forms = value.includes('\n') ? ['"""', '"'] : ['"', '"""'];
  for (const q of forms) {
    if (q === '"' ? singleQuotable(value) : tripleQuotable(value)) return q + value + q;
  }
  throw new Error(`formatModelfile: ${what} cannot be quoted so that it reads back unchanged (a line of it ends with """)`);
}

function parameterLines(name: string, value: unknown): string[] {
  const type = PARAMETER_TYPES[name];
  const where = `parameters.${name}`;
  if (!type) throw new Error(`formatModelfile: unknown parameter ${JSON.stringify(name)}`);
  if (type === 'string[]') {
    const list = typeof value === 'string' ? [value] : value;
    if (!Array.isArray(list) || list.some((v) => typeof v !== 'string')) throw new Error(`formatModelfile: ${where} must be a string or an array of strings`);
    return list.map((v, i) => `PARAMETER ${name} ${quoteValue(v, `${where}[${i}]`)}`);
  }
  const ok = type === 'bool' ? typeof value === 'boolean' : typeof value === 'number' && Number.isFinite(value) && (type === 'float' || Number.isSafeInteger(value));
  if (!ok) throw new Error(`formatModelfile: ${where} must be ${type === 'bool' ? 'a boolean' : type === 'int' ? 'an integer' : 'a finite number'}`);
  return [`PARAMETER ${name} ${String(value)}`];
}

export interface FormatOptions {
  /** Comment lines to put first (each written as "# line"). */
  header?: string;
}

export function formatModelfile(m: Modelfile, options: FormatOptions = {}): string {
  const out: string[] = [];
  if (options.header) out.push(...options.header.split('\n').map((l) => (l === '' ? '#' : `# ${l}`)));
  if (typeof m.from !== 'string' || m.from === '') throw new Error('formatModelfile: from must be a non-empty string');
  out.push(`FROM ${quoteValue(m.from, 'from')}`);
  m.adapters.forEach((a, i) => out.push(`ADAPTER ${quoteValue(a, `adapters[${i}]`)}`));
  if (m.template !== null) out.push(`TEMPLATE ${quoteValue(m.template, 'template')}`);
  if (m.system !== null) out.push(`SYSTEM ${quoteValue(m.system, 'system')}`);
  for (const [name, value] of Object.entries(m.parameters)) out.push(...parameterLines(name, value));
  m.messages.forEach((msg, i) => {
    if (!['system', 'user', 'assistant'].includes(msg.role)) throw new Error(`formatModelfile: messages[${i}].role must be system, user or assistant`);
    out.push(`MESSAGE ${msg.role} ${quoteValue(msg.content, `messages[${i}].content`)}`);
  });
  m.license.forEach((l, i) => out.push(`LICENSE ${quoteValue(l, `license[${i}]`)}`));
  if (m.requires !== undefined) out.push(`REQUIRES ${quoteValue(m.requires, 'requires')}`);
  if (m.renderer !== undefined) out.push(`RENDERER ${quoteValue(m.renderer, 'renderer')}`);
  if (m.parser !== undefined) out.push(`PARSER ${quoteValue(m.parser, 'parser')}`);
  if (m.draft !== undefined) out.push(`DRAFT ${quoteValue(m.draft, 'draft')}`);
  return out.join('\n') + '\n';
}
