// The functions Ollama adds to Go's for its templates (ollama/ollama template/template.go, `funcs`).
// Invariant: each behaves as Ollama's: json is encoding/json's Marshal (errors give ""), currentDate and
// yesterdayDate are the local date as YYYY-MM-DD (any format argument is accepted and ignored, as Ollama does),
// toTypeScriptType maps a tool property's JSON Schema type to TypeScript ("any" for anything else).
// The clock is `env.now` (a Date) when the caller gives one, so renders can be reproduced.
import type { CallContext, GoFunction } from './go-template.js';
import { goMarshal } from './go-template.js';
import { GO_STRUCT } from './go-template/values.js';

function today(ctx: CallContext): Date {
  const now = ctx.env.now;
  return now instanceof Date ? new Date(now.getTime()) : new Date();
}

function ymd(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${String(d.getFullYear()).padStart(4, '0')}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

const TS_TYPES: Record<string, string> = {
  string: 'string', number: 'number', integer: 'number', boolean: 'boolean', array: 'any[]', object: 'Record<string, any>', null: 'null',
};

/** api.ToolProperty.ToTypeScriptType on the struct built by ollama-values.ts. */
export function toTypeScriptType(v: unknown): string {
  if (typeof v !== 'object' || v === null || (v as { [GO_STRUCT]?: string })[GO_STRUCT] !== 'api.ToolProperty') return 'any';
  const p = v as { AnyOf: unknown[]; Type: string[] };
  if (p.AnyOf.length > 0) return p.AnyOf.map(toTypeScriptType).join(' | ');
  if (p.Type.length === 0) return 'any';
  return p.Type.map((t) => TS_TYPES[t] ?? 'any').join(' | ');
}

const strings = (args: unknown[]): void => {
  for (const a of args) if (typeof a !== 'string') throw new Error(`wrong type for value; expected string; got ${typeof a}`);
};

export const OLLAMA_FUNCS: ReadonlyMap<string, GoFunction> = new Map<string, GoFunction>([
  ['json', { min: 1, max: 1, call: ([v]) => goMarshal(v) ?? '' }],
  ['currentDate', { min: 0, max: Infinity, call: (args, ctx) => (strings(args), ymd(today(ctx))) }],
  ['yesterdayDate', {
    min: 0, max: Infinity, call: (args, ctx) => {
      strings(args);
      const d = today(ctx);
      d.setDate(d.getDate() - 1);
      return ymd(d);
    },
  }],
  ['toTypeScriptType', { min: 1, max: 1, call: ([v]) => toTypeScriptType(v) }],
]);
