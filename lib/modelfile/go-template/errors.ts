// The one error type of the Go template engine.
// Invariant: every lexing, parsing and execution failure is a TemplateError; when it comes from the template text
// it carries the 1-based line and column and its message starts with "template line L, column C:", and an
// execution error also quotes the action that failed ("executing {{ .Foo.Bar }}: ...").

export class TemplateError extends Error {
  /** 1-based line of the failing spot in the template, or null when the error is about the input data. */
  readonly line: number | null;
  /** 1-based column (in UTF-16 code units) of the failing spot, or null. */
  readonly column: number | null;

  constructor(message: string, line: number | null = null, column: number | null = null) {
    super(message);
    this.name = 'TemplateError';
    this.line = line;
    this.column = column;
  }
}

/** 1-based line and column of `offset` in `source`. */
export function positionOf(source: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < source.length; i++) {
    if (source.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

/** A TemplateError pointing at `offset` in `source`. */
export function errorAt(source: string, offset: number, message: string): TemplateError {
  const { line, column } = positionOf(source, offset);
  return new TemplateError(`template line ${line}, column ${column}: ${message}`, line, column);
}

/** Thrown by functions and field lookups without a position; the executor adds the position of the action. */
export class ExecProblem extends Error {}
