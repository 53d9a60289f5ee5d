// A Go text/template engine for chat templates: the part of Go's language Ollama's templates use, with Go's
// semantics and error wording.
// Supported: text with {{- -}} trimming and {{/* comments */}}; fields .A.B, $, $x.A, (pipeline).A; literals
// (strings "..." and `raw`, chars, ints, floats, true/false/nil); pipelines a | b; $x := / $x = ; if / else if /
// else, with / else with, range (slices, maps by sorted key, integers; $i, $e :=; else; break; continue); define,
// template, block; functions and, or, not, len, index, slice, eq, ne, lt, le, gt, ge, print, printf, println,
// html, js, urlquery, call, plus any the caller registers (Ollama's json, currentDate, ... in ollama-funcs.ts).
// Not supported: methods with Go receivers beyond JS functions on data objects, range over channels/iterators,
// complex numbers. See go-template/values.ts for how JS values stand for Go values.
// Invariant: parse once, execute many times; both fail only with TemplateError (line, column, Go's wording).
import type { Node, Tree } from './go-template/ast.js';
import { execute } from './go-template/exec.js';
import { BUILTINS, type GoFunction } from './go-template/funcs.js';
import { parse } from './go-template/parser.js';

export { TemplateError } from './go-template/errors.js';
export type { GoFunction, CallContext } from './go-template/funcs.js';
export type { Node, Tree, Arg, Pipe, Command } from './go-template/ast.js';
export { goStruct, goNamed, JSONObject, isTrue, GO_STRUCT, GO_STRING, GO_JSON } from './go-template/values.js';
export { goMarshal } from './go-template/json.js';
export { sprintValue } from './go-template/fmt.js';

export interface GoTemplateOptions {
  /** Functions beyond Go's predefined ones, by name (a registered name shadows a predefined one). */
  funcs?: ReadonlyMap<string, GoFunction> | Record<string, GoFunction>;
}

export class GoTemplate {
  readonly source: string;
  readonly tree: Tree;
  private readonly funcs: ReadonlyMap<string, GoFunction>;

  constructor(source: string, options: GoTemplateOptions = {}) {
    const extra = options.funcs instanceof Map ? options.funcs : new Map(Object.entries(options.funcs ?? {}));
    this.funcs = new Map([...BUILTINS, ...extra]);
    this.source = source;
    this.tree = parse(source, new Set(this.funcs.keys()));
  }

  /** Renders with `data` as dot and $. `root` replaces the top-level nodes (a rewritten tree); `env` reaches functions. */
  execute(data: unknown, options: { root?: Node[]; env?: Readonly<Record<string, unknown>> } = {}): string {
    return execute(this.source, this.tree, options.root ?? this.tree.root, data, { funcs: this.funcs, env: options.env });
  }
}

export function parseGoTemplate(source: string, options: GoTemplateOptions = {}): GoTemplate {
  return new GoTemplate(source, options);
}
