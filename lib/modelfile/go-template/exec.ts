// Executes a parse tree against data, following Go's executor (text/template/exec.go).
// Invariant: the output is what Go's text/template writes for the Go value the data stands for (values.ts), with
// Go's scoping (a variable lives until the {{ end }} of the structure that declared it), Go's range order (slices
// in order, maps by sorted key, an integer n as 0..n-1), Go's truth, and {{ break }}/{{ continue }}. Any failure is
// a TemplateError naming the position and quoting the action, e.g. "executing {{ .Foo.Bar }}: ...".
import type { Arg, BranchNode, Node, Pipe, Tree } from './ast.js';
import { errorAt, ExecProblem, TemplateError } from './errors.js';
import { sprintValue } from './fmt.js';
import type { CallContext, GoFunction } from './funcs.js';
import { goTypeName, isGoMap, isGoStruct, isTrue, sortedKeys } from './values.js';

/** Go's "no final value" marker for a pipeline stage (distinct from nil). */
const MISSING: unique symbol = Symbol('missing');
type Final = unknown | typeof MISSING;
type Signal = 'break' | 'continue' | null;

const MAX_TEMPLATE_DEPTH = 1000;

export interface ExecOptions {
  funcs: ReadonlyMap<string, GoFunction>;
  env?: Readonly<Record<string, unknown>>;
}

export function execute(src: string, tree: Tree, root: Node[], data: unknown, options: ExecOptions): string {
  const state = new State(src, tree, options);
  state.vars.push({ name: '$', value: data });
  state.walkList(data, root);
  return state.out.join('');
}

class State {
  readonly out: string[] = [];
  vars: { name: string; value: unknown }[] = [];
  private depth = 0;
  private readonly ctx: CallContext;

  constructor(
    private readonly src: string,
    private readonly tree: Tree,
    private readonly options: ExecOptions,
  ) {
    this.ctx = { env: options.env ?? {} };
  }

  private fail(node: { start: number; end: number }, message: string): TemplateError {
    const text = this.src.slice(node.start, node.end).replace(/\s+/g, ' ');
    const quoted = text.length > 60 ? text.slice(0, 57) + '...' : text;
    return errorAt(this.src, node.start, `executing ${quoted.startsWith('{{') ? quoted : `<${quoted}>`}: ${message}`);
  }

  /** Runs `f`, turning an ExecProblem into a TemplateError at `node`. */
  private at<T>(node: { start: number; end: number }, f: () => T): T {
    try {
      return f();
    } catch (e) {
      if (e instanceof ExecProblem) throw this.fail(node, e.message);
      throw e;
    }
  }

  walkList(dot: unknown, nodes: Node[]): Signal {
    for (const node of nodes) {
      const signal = this.walk(dot, node);
      if (signal) return signal;
    }
    return null;
  }

  private walk(dot: unknown, node: Node): Signal {
    switch (node.type) {
      case 'text':
        this.out.push(node.text);
        return null;
      case 'action': {
        const value = this.evalPipeline(dot, node.pipe);
        if (node.pipe.decl.length === 0) this.out.push(value === undefined || value === null ? '<no value>' : this.at(node, () => sprintValue(value)));
        return null;
      }
      case 'if':
      case 'with': {
        const mark = this.vars.length;
        const value = this.evalPipeline(dot, node.pipe);
        let signal: Signal = null;
        if (isTrue(value)) signal = this.walkList(node.type === 'with' ? value : dot, node.list);
        else if (node.elseList) signal = this.walkList(dot, node.elseList);
        this.vars.length = mark;
        return signal;
      }
      case 'range':
        return this.walkRange(dot, node);
      case 'template':
        return this.walkTemplate(dot, node);
      case 'break':
      case 'continue':
        return node.type;
    }
  }

  private walkRange(dot: unknown, node: BranchNode): Signal {
    const mark = this.vars.length;
    const value = this.evalPipeline(dot, node.pipe);
    const items = this.at(node.pipe, () => rangeItems(value));
    const bodyMark = this.vars.length;
    const { decl, isAssign } = node.pipe;
    for (const [index, elem] of items) {
      if (decl.length === 1) {
        if (isAssign) this.setVar(node, decl[0]!, elem);
        else this.vars[this.vars.length - 1]!.value = elem;
      } else if (decl.length === 2) {
        if (isAssign) {
          this.setVar(node, decl[0]!, index);
          this.setVar(node, decl[1]!, elem);
        } else {
          this.vars[this.vars.length - 1]!.value = elem;
          this.vars[this.vars.length - 2]!.value = index;
        }
      }
      const signal = this.walkList(elem, node.list);
      this.vars.length = bodyMark;
      if (signal === 'break') break;
    }
    if (items.length === 0 && node.elseList) this.walkList(dot, node.elseList);
    this.vars.length = mark;
    return null;
  }

  private walkTemplate(dot: unknown, node: Extract<Node, { type: 'template' }>): Signal {
    const body = this.tree.defines.get(node.name);
    if (!body) throw this.fail(node, `template ${JSON.stringify(node.name)} not defined`);
    if (this.depth >= MAX_TEMPLATE_DEPTH) throw this.fail(node, `exceeded maximum template depth (${MAX_TEMPLATE_DEPTH})`);
    const value = node.pipe ? this.evalPipeline(dot, node.pipe) : undefined;
    const saved = this.vars;
    this.vars = [{ name: '$', value }];
    this.depth++;
    try {
      this.walkList(value, body);
    } finally {
      this.depth--;
      this.vars = saved;
    }
    return null;
  }

  private setVar(node: { start: number; end: number }, name: string, value: unknown): void {
    for (let i = this.vars.length - 1; i >= 0; i--) {
      if (this.vars[i]!.name === name) {
        this.vars[i]!.value = value;
        return;
      }
    }
    throw this.fail(node, `undefined variable: ${name}`);
  }

  private lookup(node: { start: number; end: number }, name: string): unknown {
    for (let i = this.vars.length - 1; i >= 0; i--) if (this.vars[i]!.name === name) return this.vars[i]!.value;
    throw this.fail(node, `undefined variable: ${name}`);
  }

  private evalPipeline(dot: unknown, pipe: Pipe): unknown {
    let value: Final = MISSING;
    for (const cmd of pipe.cmds) value = this.evalCommand(dot, cmd.args, value);
    const result = value === MISSING ? undefined : value;
    for (const name of pipe.decl) {
      if (pipe.isAssign) this.setVar(pipe, name, result);
      else this.vars.push({ name, value: result });
    }
    return result;
  }

  private evalCommand(dot: unknown, args: Arg[], final: Final): unknown {
    const first = args[0]!;
    switch (first.type) {
      case 'field':
        return this.evalFieldChain(dot, dot, first, first.names, args, final);
      case 'variable': {
        const value = this.lookup(first, first.name);
        if (first.names.length === 0) {
          this.notAFunction(args, final);
          return value;
        }
        return this.evalFieldChain(dot, value, first, first.names, args, final);
      }
      case 'chain': {
        if (first.node.type === 'nil') throw this.fail(first, 'indirection through explicit nil');
        const receiver = this.evalArg(dot, first.node);
        return this.evalFieldChain(dot, receiver, first, first.names, args, final);
      }
      case 'identifier':
        return this.evalFunction(dot, first, args, final);
      case 'pipe':
        this.notAFunction(args, final);
        return this.evalPipeline(dot, first.pipe);
      case 'nil':
        throw this.fail(first, 'nil is not a command');
      default:
        this.notAFunction(args, final);
        return this.evalArg(dot, first);
    }
  }

  private notAFunction(args: Arg[], final: Final): void {
    if (args.length > 1 || final !== MISSING) {
      throw this.fail(args[0]!, `can't give argument to non-function ${this.src.slice(args[0]!.start, args[0]!.end)}`);
    }
  }

  private evalArg(dot: unknown, arg: Arg): unknown {
    switch (arg.type) {
      case 'dot':
        return dot;
      case 'nil':
        return null;
      case 'bool':
      case 'number':
      case 'string':
        return arg.value;
      case 'identifier':
        return this.evalFunction(dot, arg, [arg], MISSING);
      default:
        return this.evalCommand(dot, [arg], MISSING);
    }
  }

  private evalFieldChain(dot: unknown, receiver: unknown, node: Arg, names: string[], args: Arg[], final: Final): unknown {
    let value = receiver;
    for (let i = 0; i < names.length; i++) {
      const last = i === names.length - 1;
      value = this.evalField(dot, names[i]!, node, last ? args : [], last ? final : MISSING, value);
    }
    return value;
  }

  private evalField(dot: unknown, name: string, node: Arg, args: Arg[], final: Final, receiver: unknown): unknown {
    const hasArgs = args.length > 1 || final !== MISSING;
    if (receiver === undefined) return undefined; // Go: a field of "no value" is no value
    if (receiver === null) throw this.fail(node, `nil pointer evaluating interface {}.${name}`);
    const struct = isGoStruct(receiver);
    if (!struct && !isGoMap(receiver)) throw this.fail(node, `can't evaluate field ${name} in type ${goTypeName(receiver)}`);
    const has = Object.hasOwn(receiver, name);
    const field = has ? receiver[name] : undefined;
    if (typeof field === 'function') return this.callMethod(dot, name, field, node, args, final, receiver);
    if (struct && !has) throw this.fail(node, `can't evaluate field ${name} in type ${goTypeName(receiver)}`);
    if (hasArgs) throw this.fail(node, struct ? `${name} has arguments but cannot be invoked as function` : `${name} is not a method but has arguments`);
    return has ? field : null; // a missing map key reads as nil (Ollama parses with missingkey=zero)
  }

  private callMethod(dot: unknown, name: string, method: Function, node: Arg, args: Arg[], final: Final, receiver: object): unknown {
    const argv = args.slice(1).map((a) => this.evalArg(dot, a));
    if (final !== MISSING) argv.push(final);
    try {
      return method.apply(receiver, argv);
    } catch (e) {
      if (e instanceof TemplateError) throw e;
      throw this.fail(node, `error calling ${name}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private evalFunction(dot: unknown, node: Extract<Arg, { type: 'identifier' }>, args: Arg[], final: Final): unknown {
    const name = node.name;
    const span = { start: node.start, end: args[args.length - 1]!.end };
    const fn = this.options.funcs.get(name);
    if (!fn) throw this.fail(node, `function ${JSON.stringify(name)} not defined`);
    const count = args.length - 1 + (final === MISSING ? 0 : 1);
    if (count < fn.min || count > fn.max) {
      const want = fn.min === fn.max ? `${fn.min}` : fn.max === Infinity ? `at least ${fn.min}` : `${fn.min} to ${fn.max}`;
      throw this.fail(span, `wrong number of args for ${name}: want ${want} got ${count}`);
    }
    if (name === 'and' || name === 'or') return this.evalAndOr(dot, name, args.slice(1), final);
    const argv = args.slice(1).map((a) => this.evalArg(dot, a));
    if (final !== MISSING) argv.push(final);
    try {
      return fn.call(argv, this.ctx);
    } catch (e) {
      if (e instanceof TemplateError) throw e;
      throw this.fail(span, `error calling ${name}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** `and` returns its first false argument or its last; `or` its first true one or its last; both stop early. */
  private evalAndOr(dot: unknown, name: 'and' | 'or', args: Arg[], final: Final): unknown {
    let value: unknown;
    const values: (() => unknown)[] = args.map((a) => () => this.evalArg(dot, a));
    if (final !== MISSING) values.push(() => final);
    for (const get of values) {
      value = get();
      if (isTrue(value) === (name === 'or')) return value;
    }
    return value;
  }
}

/** The [index, element] pairs a range visits; Go's "range can't iterate over" for anything else. */
function rangeItems(value: unknown): [unknown, unknown][] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value.map((v, i) => [i, v]);
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new ExecProblem(`range can't iterate over ${sprintValue(value)}`);
    return Array.from({ length: Math.max(0, value) }, (_, i) => [i, i]);
  }
  if (isGoMap(value)) return sortedKeys(value).map((k) => [k, value[k]]);
  throw new ExecProblem(`range can't iterate over ${sprintValue(value)}`);
}
