// The grammar that keeps tool calls well-formed, in the model's own call format (the parser's), over the
// request's tools: every call names one of the tools and its arguments match that tool's parameters schema.
// tool_choice 'auto' makes it lazy (free text until the parser's trigger, then a valid call list from the
// trigger on); 'required' and a named function hold from the first output token.
// Invariant: whatever the grammar lets through, the parser of the same format parses into calls whose
// arguments validate against their tool's schema (test/tool-calls.test.ts checks this with ajv).
import type { OutputGrammar } from '../constraints.js';
import { GrammarBuilder } from '../structured/gbnf.js';
import { jsonSchemaRule } from '../structured/json-schema.js';
import { jsonCharRule, wsRule } from '../structured/json-value.js';
import type { FunctionTool, ToolRequest } from './request.js';

type CallRule = (b: GrammarBuilder, tool: FunctionTool) => string;

// {"name": "f", "<argsKey>": {...}}
function jsonCall(argsKey: string): CallRule {
  return (b, tool) => {
    const ws = wsRule(b);
    const args = jsonSchemaRule(b, tool.parameters, `${tool.name}-args`);
    return b.rule(`${tool.name}-call`,
      `"{" ${ws} "\\"name\\"" ${ws} ":" ${ws} ${b.literal(JSON.stringify(tool.name))} ${ws} "," ${ws} ` +
      `${b.literal(JSON.stringify(argsKey))} ${ws} ":" ${ws} ${args} ${ws} "}"`);
  };
}

// f(a=1, b="x"): keyword arguments in the schema's property order, required ones always, optional ones
// optionally; values in JSON syntax, which the pythonic parsers read (true/false/null included).
const pythonCall: CallRule = (b, tool) => {
  jsonCharRule(b, true); // first, so every string of the grammar uses the Python-safe character rule
  const props = (tool.parameters.properties ?? {}) as Record<string, unknown>;
  const required = new Set(Array.isArray(tool.parameters.required) ? tool.parameters.required as string[] : []);
  const names = Object.keys(props);
  const kw = names.map((n) => `${b.literal(`${n}=`)} ${jsonSchemaRule(b, props[n], `${tool.name}-${n}`)}`);
  // rest[i]: arguments i.. after one has been written (each preceded by ", "); first[i]: none written yet.
  const rest: string[] = new Array<string>(names.length + 1).fill('""');
  const first: string[] = new Array<string>(names.length + 1).fill('""');
  for (let i = names.length - 1; i >= 0; --i) {
    const opt = !required.has(names[i]);
    const r = `", " ${kw[i]} ${rest[i + 1]}`;
    rest[i] = b.rule(`${tool.name}-rest`, opt ? `${r} | ${rest[i + 1]}` : r);
    const f = `${kw[i]} ${rest[i + 1]}`;
    first[i] = b.rule(`${tool.name}-kwargs`, opt ? `${f} | ${first[i + 1]}` : f);
  }
  return b.rule(`${tool.name}-call`, `${b.literal(`${tool.name}(`)} ${first[0]} ")"`);
};

interface CallFormat {
  call: CallRule;
  open: string; // text before the call list ('' for none); a lazy grammar's trigger is its start
  openTail?: string; // GBNF right after `open` (mistral: an optional space, then the list's "[")
  between: string; // between two calls
  close: string;
  after: string; // optional text after the list (GBNF), so a token that runs past the close can still end there
  triggers: { text: string; atStart: boolean }[]; // for tool_choice auto
}

const FORMATS: Record<string, CallFormat> = {
  // <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, one block per call
  hermes: { call: jsonCall('arguments'), open: '<tool_call>\n', between: '\n</tool_call>\n<tool_call>\n', close: '\n</tool_call>', after: '"\\n"?', triggers: [{ text: '<tool_call>', atStart: false }] },
  // {"name": ..., "parameters": ...}; several joined by "; "
  llama3_json: { call: jsonCall('parameters'), open: '', between: '; ', close: '', after: '', triggers: [{ text: '{', atStart: true }] },
  // <|tool_call_start|>[f(a=1), g(b="x")]<|tool_call_end|>
  lfm2: { call: pythonCall, open: '<|tool_call_start|>[', between: ', ', close: ']<|tool_call_end|>', after: '', triggers: [{ text: '<|tool_call_start|>', atStart: false }] },
  // [TOOL_CALLS][{"name": ..., "arguments": ...}, ...] (Mistral Nemo / Small 3: [TOOL_CALLS] is a control token)
  // (Nemo's template writes "[TOOL_CALLS][", Mistral 7B v0.3's and Ollama's "[TOOL_CALLS] [": either)
  mistral: { call: jsonCall('arguments'), open: '[TOOL_CALLS]', openTail: '" "? "["', between: ', ', close: ']', after: '', triggers: [{ text: '[TOOL_CALLS]', atStart: false }] },
  // [f(a=1), g(b="x")] as the whole output
  pythonic: { call: pythonCall, open: '[', between: ', ', close: ']', after: '', triggers: [{ text: '[', atStart: true }] },
};

/** The call formats a grammar can be built for (parser names). */
export const TOOL_GRAMMAR_FORMATS = Object.keys(FORMATS);

/** The grammar for `req` in the call format of `parser` (a canonical parser name), or null for tool_choice none. */
export function toolCallGrammar(parser: string, req: ToolRequest): OutputGrammar | null {
  if (req.choice.mode === 'none' || req.tools.length === 0) return null;
  const f = FORMATS[parser];
  if (!f) throw new Error(`no tool-call grammar for the parser '${parser}' (have: ${TOOL_GRAMMAR_FORMATS.join(', ')})`);
  const choice = req.choice;
  const tools = choice.mode === 'named' ? req.tools.filter((t) => t.name === choice.name) : req.tools;
  const b = new GrammarBuilder();
  const call = b.rule('call', tools.map((t) => f.call(b, t)).join(' | '));
  const calls = req.parallel ? `${call} (${b.literal(f.between)} ${call})*` : call;
  const open = (f.open === '' ? '' : `${b.literal(f.open)} `) + (f.openTail ? `${f.openTail} ` : '');
  const close = f.close === '' ? '' : ` ${b.literal(f.close)}`;
  const body = `${open}${calls}${close}${f.after === '' ? '' : ` ${f.after}`}`;
  if (choice.mode === 'auto') return { kind: 'tools', gbnf: b.build(body), triggers: f.triggers };
  // Required / named: from the first token; a little leading whitespace as models often write it.
  return { kind: 'tools', gbnf: b.build(`("\\n" | " ")? ${body}`), triggers: [] };
}
