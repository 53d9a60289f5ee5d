// Tokens -> parse tree, following Go's parser (text/template/parse/parse.go).
// Invariant: whatever Go's parser rejects that the subset can meet is rejected here with Go's wording and the
// position: undefined variables and functions, {{ else }}/{{ end }} out of place, {{ break }}/{{ continue }}
// outside {{ range }}, literals used as pipeline stages, unclosed actions and blocks. Variables are scoped as in
// Go: one declared in an if/with/range (pipeline or body) lives until that structure's {{ end }}.
import type { Arg, Command, Node, Pipe, Tree } from './ast.js';
import { errorAt } from './errors.js';
import { lex, type Token } from './lexer.js';

type Stop = { kind: 'end' | 'else' | 'eof'; token: Token };

export function parse(src: string, funcs: ReadonlySet<string>): Tree {
  return new Parser(src, lex(src), funcs).parseRoot();
}

const describe = (t: Token): string =>
  t.kind === 'eof' ? 'EOF' : t.kind === 'close' ? '"}}"' : t.kind === 'keyword' ? `<${t.value}>` : JSON.stringify(t.value);

class Parser {
  private i = 0;
  private vars: string[] = ['$'];
  private rangeDepth = 0;
  private readonly defines = new Map<string, Node[]>();

  constructor(
    private readonly src: string,
    private readonly tokens: Token[],
    private readonly funcs: ReadonlySet<string>,
  ) {}

  parseRoot(): Tree {
    const { nodes, stop } = this.list(true);
    if (stop.kind !== 'eof') throw this.error(stop.token, `unexpected {{${stop.kind}}}`);
    return { root: nodes, defines: this.defines };
  }

  private error(t: Token | number, message: string) {
    return errorAt(this.src, typeof t === 'number' ? t : t.start, message);
  }

  private peek(): Token {
    return this.tokens[this.i]!;
  }

  private next(): Token {
    return this.tokens[this.i++]!;
  }

  private expectClose(context: string): Token {
    const t = this.next();
    if (t.kind !== 'close') throw this.error(t, `unexpected ${describe(t)} in ${context}`);
    return t;
  }

  /** Nodes up to {{ end }}, {{ else }} or the end of input. */
  private list(topLevel: boolean): { nodes: Node[]; stop: Stop } {
    const nodes: Node[] = [];
    for (;;) {
      const t = this.next();
      if (t.kind === 'eof') return { nodes, stop: { kind: 'eof', token: t } };
      if (t.kind === 'text') {
        nodes.push({ type: 'text', text: t.value, start: t.start, end: t.end });
        continue;
      }
      // t is an opening delimiter
      const kw = this.peek();
      if (kw.kind === 'keyword') {
        if (kw.value === 'end' || kw.value === 'else') {
          this.next();
          if (kw.value === 'end') this.expectClose('end');
          return { nodes, stop: { kind: kw.value, token: kw } };
        }
        const node = this.keywordAction(t, kw, topLevel);
        if (node) nodes.push(node);
        continue;
      }
      const pipe = this.pipeline('command', 'close');
      const close = this.next();
      nodes.push({ type: 'action', pipe, start: t.start, end: close.end });
    }
  }

  private keywordAction(open: Token, kw: Token, topLevel: boolean): Node | null {
    this.next();
    switch (kw.value) {
      case 'if':
      case 'with':
      case 'range':
        return this.control(open, kw.value);
      case 'break':
      case 'continue': {
        if (this.rangeDepth === 0) throw this.error(kw, `{{${kw.value}}} outside {{range}}`);
        const close = this.expectClose(kw.value);
        return { type: kw.value, start: open.start, end: close.end };
      }
      case 'template':
        return this.templateCall(open, 'template');
      case 'block': {
        const node = this.templateCall(open, 'block');
        this.definition(node.name);
        return node;
      }
      case 'define': {
        if (!topLevel) throw this.error(kw, 'unexpected <define> in command');
        const name = this.templateName('define');
        this.expectClose('define clause');
        this.definition(name);
        return null;
      }
    }
    throw this.error(kw, `unexpected <${kw.value}> in command`);
  }

  private templateName(context: string): string {
    const t = this.next();
    if (t.kind !== 'string') throw this.error(t, `unexpected ${describe(t)} in ${context} clause`);
    return t.value;
  }

  private templateCall(open: Token, context: 'template' | 'block') {
    const name = this.templateName(context);
    let pipe: Pipe | null = null;
    if (this.peek().kind !== 'close') pipe = this.pipeline(context, 'close');
    else if (context === 'block') throw this.error(this.peek(), 'missing value for block clause');
    const close = this.expectClose(`${context} clause`);
    return { type: 'template' as const, name, pipe, start: open.start, end: close.end };
  }

  /** The body of a define or block, with a fresh variable scope, up to its {{ end }}. */
  private definition(name: string): void {
    const saved = { vars: this.vars, rangeDepth: this.rangeDepth };
    this.vars = ['$'];
    this.rangeDepth = 0;
    const { nodes, stop } = this.list(false);
    if (stop.kind !== 'end') throw this.error(stop.token, `unexpected ${stop.kind === 'eof' ? 'EOF' : '{{else}}'} in definition of ${JSON.stringify(name)}`);
    this.vars = saved.vars;
    this.rangeDepth = saved.rangeDepth;
    this.defines.set(name, nodes);
  }

  private control(open: Token, kind: 'if' | 'with' | 'range'): Node {
    const mark = this.vars.length;
    const pipe = this.pipeline(kind, 'close');
    this.expectClose(kind);
    if (kind === 'range') this.rangeDepth++;
    const body = this.list(false);
    if (kind === 'range') this.rangeDepth--;
    let elseList: Node[] | null = null;
    let end = body.stop.token.end;
    if (body.stop.kind === 'eof') throw this.error(open, `unexpected EOF: {{${kind}}} has no {{end}}`);
    if (body.stop.kind === 'else') {
      const after = this.peek();
      if ((kind === 'if' || kind === 'with') && after.kind === 'keyword' && after.value === kind) {
        // {{ else if x }} is {{ else }}{{ if x }}...{{ end }}{{ end }} with the inner end doing for both.
        this.next();
        const nested = this.control(body.stop.token, kind);
        elseList = [nested];
        end = nested.end;
      } else {
        this.expectClose('else');
        const rest = this.list(false);
        if (rest.stop.kind !== 'end') {
          throw this.error(rest.stop.token, rest.stop.kind === 'eof' ? `unexpected EOF: {{${kind}}} has no {{end}}` : 'expected end; found {{else}}');
        }
        elseList = rest.nodes;
        end = rest.stop.token.end;
      }
    }
    this.vars.length = mark;
    return { type: kind, pipe, list: body.nodes, elseList, start: open.start, end };
  }

  private checkVariable(t: Token): void {
    if (!this.vars.includes(t.value)) throw this.error(t, `undefined variable ${JSON.stringify(t.value)}`);
  }

  /** Declarations: `$x :=`, `$x =`, and in range `$i, $e :=`. Returns null (and consumes nothing) if none. */
  private declarations(context: string): { decl: string[]; isAssign: boolean } | null {
    const first = this.peek();
    const after = this.tokens[this.i + 1]!;
    if (first.kind !== 'variable') return null;
    const names = [first];
    let op = after;
    if (after.kind === 'comma') {
      if (context !== 'range') throw this.error(after, 'too many declarations in command');
      const second = this.tokens[this.i + 2]!;
      if (second.kind !== 'variable') throw this.error(second, `unexpected ${describe(second)} in range; expected a variable`);
      names.push(second);
      op = this.tokens[this.i + 3]!;
      if (op.kind !== 'declare' && op.kind !== 'assign') throw this.error(op, `unexpected ${describe(op)} in range; expected := or =`);
    } else if (after.kind !== 'declare' && after.kind !== 'assign') {
      return null;
    }
    this.i += names.length === 2 ? 4 : 2;
    const isAssign = op.kind === 'assign';
    for (const n of names) {
      if (isAssign) this.checkVariable(n);
      else this.vars.push(n.value);
    }
    return { decl: names.map((n) => n.value), isAssign };
  }

  private pipeline(context: string, end: 'close' | 'rparen'): Pipe {
    const start = this.peek().start;
    const { decl, isAssign } = this.declarations(context) ?? { decl: [], isAssign: false };
    const cmds: Command[] = [];
    for (;;) {
      const t = this.peek();
      if (t.kind === end) {
        if (cmds.length === 0) throw this.error(t, `missing value for ${context}`);
        break;
      }
      if (t.kind === 'pipe') throw this.error(t, cmds.length === 0 ? `missing value for ${context}` : 'missing command after |');
      cmds.push(this.command(end));
      if (this.peek().kind === 'pipe') {
        this.next();
        if (this.peek().kind === end) throw this.error(this.peek(), 'missing command after |');
      }
    }
    cmds.slice(1).forEach((cmd, k) => {
      const first = cmd.args[0]!;
      if (['bool', 'dot', 'nil', 'number', 'string'].includes(first.type)) {
        throw this.error(first.start, `non executable command in pipeline stage ${k + 2}`);
      }
    });
    return { decl, isAssign, cmds, start, end: this.peek().start };
  }

  private command(end: 'close' | 'rparen'): Command {
    const args: Arg[] = [];
    for (;;) {
      const t = this.peek();
      if (t.kind === end || t.kind === 'pipe') break;
      if (args.length > 0 && !t.space) throw this.error(t, `unexpected ${describe(t)} in operand`);
      const arg = this.operand();
      if (!arg) throw this.error(t, `unexpected ${describe(t)} in command`);
      args.push(arg);
    }
    return { args, start: args[0]!.start, end: args[args.length - 1]!.end };
  }

  private operand(): Arg | null {
    const node = this.term();
    if (!node) return null;
    if (this.peek().kind !== 'field' || this.peek().space) return node;
    const names: string[] = [];
    let end = node.end;
    while (this.peek().kind === 'field' && !this.peek().space) {
      const f = this.next();
      names.push(f.value);
      end = f.end;
    }
    switch (node.type) {
      case 'field':
      case 'variable':
        return { ...node, names: [...node.names, ...names], end };
      case 'identifier':
      case 'pipe':
      case 'chain':
        return { type: 'chain', node, names, start: node.start, end };
      default:
        throw this.error(node.start, `unexpected . after term ${JSON.stringify(this.src.slice(node.start, node.end))}`);
    }
  }

  private term(): Arg | null {
    const t = this.peek();
    const span = { start: t.start, end: t.end };
    switch (t.kind) {
      case 'identifier':
        this.next();
        if (!this.funcs.has(t.value)) throw this.error(t, `function ${JSON.stringify(t.value)} not defined`);
        return { type: 'identifier', name: t.value, ...span };
      case 'dot':
        this.next();
        return { type: 'dot', ...span };
      case 'nil':
        this.next();
        return { type: 'nil', ...span };
      case 'variable':
        this.next();
        this.checkVariable(t);
        return { type: 'variable', name: t.value, names: [], ...span };
      case 'field':
        this.next();
        return { type: 'field', names: [t.value], ...span };
      case 'bool':
        this.next();
        return { type: 'bool', value: t.value === 'true', ...span };
      case 'number':
        this.next();
        return { type: 'number', value: this.numberValue(t), ...span };
      case 'char':
        this.next();
        return { type: 'number', value: t.value.codePointAt(0)!, ...span };
      case 'string':
        this.next();
        return { type: 'string', value: t.value, ...span };
      case 'lparen': {
        this.next();
        const pipe = this.pipeline('parenthesized pipeline', 'rparen');
        const close = this.next();
        return { type: 'pipe', pipe, start: t.start, end: close.end };
      }
      default:
        return null;
    }
  }

  private numberValue(t: Token): number {
    const text = t.value;
    if (text.endsWith('i')) throw this.error(t, `complex number ${text} is not supported`);
    const sign = text.startsWith('-') ? -1 : 1;
    const body = text.replace(/^[+-]/, '').replace(/_/g, '');
    let value: number;
    if (/^0[xX][0-9a-fA-F]+$/.test(body)) value = parseInt(body.slice(2), 16);
    else if (/^0[oO][0-7]+$/.test(body)) value = parseInt(body.slice(2), 8);
    else if (/^0[bB][01]+$/.test(body)) value = parseInt(body.slice(2), 2);
    else if (/^0[0-7]+$/.test(body)) value = parseInt(body, 8); // Go: a leading 0 means octal
    else if (/^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(body)) value = Number(body);
    else throw this.error(t, `illegal number syntax: ${JSON.stringify(text)}`);
    if (!Number.isFinite(value)) throw this.error(t, `number out of range: ${text}`);
    if (Number.isInteger(value) && !/[.eEpP]/.test(body) && !Number.isSafeInteger(value)) {
      throw this.error(t, `integer ${text} is too large (beyond 2^53)`);
    }
    return sign * value;
  }
}
