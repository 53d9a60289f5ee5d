// The parsed form of a Go text/template, shaped like Go's parse tree (text/template/parse/node.go).
// Invariant: nodes are plain immutable data with the source span they came from (start/end offsets into the
// template text), so an execution error can quote the action and the Ollama layer can rewrite a tree
// (cutting after {{ .Response }}) without touching the parser.

export interface Span {
  start: number;
  end: number;
}

export type Arg =
  | (Span & { type: 'field'; names: string[] }) //                  .A.B
  | (Span & { type: 'variable'; name: string; names: string[] }) // $x.A.B ($ included in name)
  | (Span & { type: 'chain'; node: Arg; names: string[] }) //        (pipeline).A.B
  | (Span & { type: 'identifier'; name: string }) //                 a function name
  | (Span & { type: 'dot' })
  | (Span & { type: 'nil' })
  | (Span & { type: 'bool'; value: boolean })
  | (Span & { type: 'number'; value: number })
  | (Span & { type: 'string'; value: string })
  | (Span & { type: 'pipe'; pipe: Pipe }); //                          ( pipeline )

export interface Command extends Span {
  args: Arg[];
}

export interface Pipe extends Span {
  /** Declared ($x := ...) or assigned ($x = ...) variables; range may have two. */
  decl: string[];
  isAssign: boolean;
  cmds: Command[];
}

export type BranchNode = Span & { type: 'if' | 'with' | 'range'; pipe: Pipe; list: Node[]; elseList: Node[] | null };

export type Node =
  | (Span & { type: 'text'; text: string })
  | (Span & { type: 'action'; pipe: Pipe })
  | BranchNode
  | (Span & { type: 'template'; name: string; pipe: Pipe | null })
  | (Span & { type: 'break' | 'continue' });

export interface Tree {
  root: Node[];
  /** {{ define "name" }} and {{ block "name" }} bodies. */
  defines: Map<string, Node[]>;
}
