// An Ollama chat template: Go text/template plus Ollama's rules for what it is executed with
// (ollama/ollama template/template.go: Parse, Vars, Execute, collate, deleteNode).
//
// Rules, as Ollama has them:
// 1. Parse: the template gets Ollama's functions (json, currentDate, yesterdayDate, toTypeScriptType). If it names
//    neither .Messages nor .Response (any field or $-variable path containing them, case-insensitively), an
//    {{ .Response }} action is appended at the end. A {{ template "x" }} without a pipeline is refused.
// 2. collate: consecutive messages with the same role (except "tool") merge into one, contents joined by "\n\n";
//    .System is every system message's content joined by "\n\n".
// 3. Execute with a prompt and a suffix (fill-in-middle, /api/generate): once, with .Prompt .Suffix .Response="".
// 4. Execute when the template names .Messages: once, with .System, .Messages (collated, system messages
//    included), .Tools, .Response="", .Think, .ThinkLevel, .IsThinkSet.
// 5. Otherwise (a .Prompt/.Response template) the conversation is replayed turn by turn over the collated
//    messages: a system message flushes a pending turn (if it has a prompt or a response) and becomes .System; a
//    user message flushes a pending turn if it has a response, then becomes .Prompt; an assistant message becomes
//    .Response; tool messages are skipped. Each flush executes the whole template once and clears
//    .System/.Prompt/.Response (so a system prompt appears in its turn only). The last turn is executed with
//    everything after the first {{ .Response }} cut away, so the prompt ends where the model's reply begins
//    (and a trailing assistant message is continued, not closed).
// Invariant: for the same template and values, execute() returns what Ollama's Template.Execute writes, except:
// {{ .Function }} prints JSON (see ollama-values.ts); and the last turn of rule 5 keeps the template's functions
// and {{ define }}s (Ollama runs that cut tree in a bare template, where json, currentDate or {{ template }} fail).
// Names only reached through a chain such as (index $.Messages 0).Content do not count for rules 1 and 4, as in
// Ollama.
import type { Arg, Node, Pipe } from './go-template.js';
import { GoTemplate } from './go-template.js';
import { errorAt } from './go-template/errors.js';
import { OLLAMA_FUNCS } from './ollama-funcs.js';
import { templateMessage, toolsValue, type NormalizedMessage } from './ollama-values.js';

/** Ollama's `think` request value: true/false, or a level ("low" | "medium" | "high" | "max"). */
export type ThinkValue = boolean | 'low' | 'medium' | 'high' | 'max';

export interface OllamaValues {
  messages: NormalizedMessage[];
  tools?: readonly unknown[] | null;
  /** With `suffix`: the fill-in-middle prompt (rule 3). */
  prompt?: string;
  suffix?: string;
  think?: ThinkValue;
  /** Clock for currentDate / yesterdayDate. */
  now?: Date;
}

export class OllamaTemplate {
  readonly source: string;
  /** Ollama's Vars(): every field and variable name the template uses, lower-cased, sorted, without repeats. */
  readonly vars: readonly string[];
  /** The template names .Messages, so it gets the whole conversation in one execution (rule 4). */
  readonly usesMessages: boolean;
  private readonly template: GoTemplate;
  private readonly root: Node[];
  private readonly lastTurn: Node[];

  constructor(source: string) {
    this.source = source;
    this.template = new GoTemplate(source, { funcs: OLLAMA_FUNCS });
    const { tree } = this.template;
    const names = [tree.root, ...tree.defines.values()].flatMap((nodes) => identifiers(source, nodes));
    const vars = new Set(names.map((n) => n.toLowerCase()));
    this.root = tree.root;
    if (!vars.has('messages') && !vars.has('response')) {
      this.root = [...tree.root, responseAction(source.length)];
      vars.add('response');
    }
    this.vars = [...vars].sort();
    this.usesMessages = vars.has('messages');
    this.lastTurn = cutAfterResponse(this.root);
  }

  execute(values: OllamaValues): string {
    const env = values.now ? { now: values.now } : {};
    const think = {
      Think: values.think === undefined ? false : values.think === true || ['low', 'medium', 'high', 'max'].includes(values.think as string),
      ThinkLevel: values.think === true ? 'medium' : typeof values.think === 'string' ? values.think : '',
      IsThinkSet: values.think !== undefined,
    };
    const run = (root: Node[], data: object) => this.template.execute(data, { root, env });
    if (values.prompt && values.suffix) {
      return run(this.root, { Prompt: values.prompt, Suffix: values.suffix, Response: '', ...think });
    }
    const { system, messages } = collate(values.messages);
    if (this.usesMessages) {
      return run(this.root, { System: system, Messages: messages.map(templateMessage), Tools: toolsValue(values.tools), Response: '', ...think });
    }
    let out = '';
    let turn = { System: '', Prompt: '', Response: '' };
    const flush = () => {
      out += run(this.root, { ...turn, ...think });
      turn = { System: '', Prompt: '', Response: '' };
    };
    for (const m of messages) {
      if (m.role === 'system') {
        if (turn.Prompt !== '' || turn.Response !== '') flush();
        turn.System = m.content;
      } else if (m.role === 'user') {
        if (turn.Response !== '') flush();
        turn.Prompt = m.content;
      } else if (m.role === 'assistant') {
        turn.Response = m.content;
      }
    }
    return out + run(this.lastTurn, { ...turn, ...think });
  }
}

/** Ollama's collate: merge consecutive same-role messages (not tool ones); gather the system prompts. */
export function collate(input: readonly NormalizedMessage[]): { system: string; messages: NormalizedMessage[] } {
  const system: string[] = [];
  const messages: NormalizedMessage[] = [];
  for (const m of input) {
    if (m.role === 'system') system.push(m.content);
    const last = messages[messages.length - 1];
    if (last && last.role === m.role && m.role !== 'tool') last.content += '\n\n' + m.content;
    else messages.push({ ...m });
  }
  return { system: system.join('\n\n'), messages };
}

function responseAction(at: number): Node {
  const field: Arg = { type: 'field', names: ['Response'], start: at, end: at };
  const pipe: Pipe = { decl: [], isAssign: false, cmds: [{ args: [field], start: at, end: at }], start: at, end: at };
  return { type: 'action', pipe, start: at, end: at };
}

/** Ollama's Identifiers(): field and variable paths of actions and branch pipelines (not inside chains). */
function identifiers(source: string, nodes: Node[]): string[] {
  const ofPipe = (p: Pipe): string[] => p.cmds.flatMap((c) => c.args.flatMap((a) => {
    if (a.type === 'field') return a.names;
    if (a.type === 'variable') return [a.name, ...a.names];
    if (a.type === 'pipe') return ofPipe(a.pipe);
    return [];
  }));
  return nodes.flatMap((n): string[] => {
    switch (n.type) {
      case 'action':
        return ofPipe(n.pipe);
      case 'if':
      case 'with':
      case 'range':
        return [...ofPipe(n.pipe), ...identifiers(source, n.list), ...identifiers(source, n.elseList ?? [])];
      case 'template':
        if (!n.pipe) {
          throw errorAt(source, n.start, `undefined template specified: Ollama wants a pipeline in {{ template ${JSON.stringify(n.name)} }} (write {{ template ${JSON.stringify(n.name)} . }})`);
        }
        return ofPipe(n.pipe);
      default:
        return [];
    }
  });
}

/** Ollama's deleteNode with its predicate: keep everything up to and including the first .Response field, drop
 *  what follows in tree order (text, actions, else branches), keeping the enclosing structures. */
export function cutAfterResponse(root: Node[]): Node[] {
  let cut = false;
  const isResponse = (a: Arg) => a.type === 'field' && a.names.includes('Response');
  const pipe = (p: Pipe): Pipe | null => {
    if (cut) return null;
    const cmds = [];
    for (const c of p.cmds) {
      const args: Arg[] = [];
      for (const a of c.args) {
        if (isResponse(a)) {
          cut = true;
          args.push(a);
        } else if (cut) continue;
        else if (a.type === 'pipe') {
          const inner = pipe(a.pipe);
          if (inner) args.push({ ...a, pipe: inner });
        } else args.push(a);
      }
      if (args.length === 0) return null;
      cmds.push({ ...c, args });
    }
    return cmds.length === 0 ? null : { ...p, cmds };
  };
  const list = (nodes: Node[]): Node[] => {
    const out: Node[] = [];
    for (const n of nodes) {
      if (cut) break;
      if (n.type === 'action') {
        const p = pipe(n.pipe);
        if (p) out.push({ ...n, pipe: p });
      } else if (n.type === 'if' || n.type === 'with' || n.type === 'range') {
        const body = list(n.list);
        const elseList = n.elseList && !cut ? list(n.elseList) : null;
        out.push({ ...n, list: body, elseList });
      } else out.push(n);
    }
    return out;
  };
  return list(root);
}
