// Output constraints of a request, from every spelling users bring: vLLM's `structured_outputs` (json, regex,
// choice, grammar, json_object) and its older `guided_*` fields, SGLang's `json_schema` / `regex` / `ebnf`,
// llama.cpp's `grammar`; all compiled (lib/structured) to the GBNF the native sampler enforces.
// Invariant: compileConstraint returns a grammar the native parser accepts or throws a StructuredOutputError
// naming what was wrong; it never drops a constraint it was given.
import { compileChoice, compileGbnf, compileJsonObject, compileJsonSchema, compileRegex, StructuredOutputError } from './structured/index.js';

export interface GrammarTrigger {
  text: string;
  atStart: boolean; // only when nothing but whitespace precedes it in the output
}

/** The grammar a request's output must match; `triggers` non-empty makes it lazy (free text until one appears). */
export interface OutputGrammar {
  kind: ConstraintKind;
  gbnf: string;
  triggers: GrammarTrigger[];
  /** A lazy grammar of a reasoning model: its triggers count only in the answer, after the thinking block (inBlock:
   * the output starts inside it; else the block is the output's own when it begins with startTag). */
  reasoning?: { startTag: string; endTag: string; inBlock: boolean };
}

export type ConstraintKind = 'json' | 'regex' | 'choice' | 'grammar' | 'json_object' | 'tools';

/** Parses a JSON Schema given as JSON text (SGLang's json_schema, vLLM's json) or passes an object through. */
function schemaValue(name: string, v: unknown): unknown {
  if (typeof v !== 'string') return v;
  try {
    return JSON.parse(v);
  } catch (e) {
    throw new StructuredOutputError(`${name} is not valid JSON: ${(e as Error).message}`);
  }
}

/** One constraint, as `kind` with its user value (`name`: the field as the user spelled it, for messages). */
export function compileConstraint(name: string, kind: Exclude<ConstraintKind, 'tools'>, value: unknown): OutputGrammar {
  try {
    return compileKind(name, kind, value);
  } catch (e) {
    if (e instanceof StructuredOutputError && !e.message.startsWith(name)) throw new StructuredOutputError(`${name}: ${e.message}`);
    throw e;
  }
}

function compileKind(name: string, kind: Exclude<ConstraintKind, 'tools'>, value: unknown): OutputGrammar {
  const grammar = (gbnf: string): OutputGrammar => ({ kind, gbnf, triggers: [] });
  switch (kind) {
    case 'json': {
      const schema = schemaValue(name, value);
      if (typeof schema !== 'object' && typeof schema !== 'boolean') {
        throw new StructuredOutputError(`${name} must be a JSON Schema (an object, or its JSON text)`);
      }
      return grammar(compileJsonSchema(schema));
    }
    case 'regex':
      if (typeof value !== 'string') throw new StructuredOutputError(`${name} must be a regular expression string`);
      return grammar(compileRegex(value));
    case 'choice':
      if (!Array.isArray(value)) throw new StructuredOutputError(`${name} must be an array of strings`);
      return grammar(compileChoice(value as string[]));
    case 'grammar':
      if (typeof value !== 'string') throw new StructuredOutputError(`${name} must be a GBNF / EBNF grammar string`);
      return grammar(compileGbnf(value));
    case 'json_object':
      if (value !== true) throw new StructuredOutputError(`${name} must be true`);
      return grammar(compileJsonObject());
  }
}

const STRUCTURED_KEYS: Record<string, Exclude<ConstraintKind, 'tools'>> = {
  json: 'json', regex: 'regex', choice: 'choice', grammar: 'grammar', json_object: 'json_object', jsonObject: 'json_object',
};

/** vLLM's StructuredOutputsParams: exactly one of json, regex, choice, grammar, json_object. */
export function compileStructuredOutputs(name: string, value: unknown): OutputGrammar {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new StructuredOutputError(`${name} must be an object with one of: json, regex, choice, grammar, json_object`);
  }
  const given = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined && v !== null && v !== false);
  for (const [k] of given) {
    if (!(k in STRUCTURED_KEYS)) {
      throw new StructuredOutputError(`${name}.${k} is not supported (supported: json, regex, choice, grammar, json_object)`);
    }
  }
  if (given.length !== 1) {
    throw new StructuredOutputError(`${name} must set exactly one of json, regex, choice, grammar, json_object (got ${given.length === 0 ? 'none' : given.map(([k]) => k).join(', ')})`);
  }
  const [k, v] = given[0];
  return compileConstraint(`${name}.${k}`, STRUCTURED_KEYS[k], v);
}

/** Top-level sampling-parameter spellings that are constraints, and what they hold. */
export const CONSTRAINT_FIELDS: Record<string, Exclude<ConstraintKind, 'tools'> | 'structured' | 'ollama_format'> = {
  structuredOutputs: 'structured', structured_outputs: 'structured',
  guidedJson: 'json', guided_json: 'json',
  guidedRegex: 'regex', guided_regex: 'regex',
  guidedChoice: 'choice', guided_choice: 'choice',
  guidedGrammar: 'grammar', guided_grammar: 'grammar',
  jsonSchema: 'json', json_schema: 'json',
  regex: 'regex',
  ebnf: 'grammar',
  grammar: 'grammar',
  // the HTTP routes' spellings (lib/server/response-format.ts, Ollama's format)
  'response_format.json_schema': 'json',
  'response_format.json_object': 'json_object',
  format: 'ollama_format',
};

/** The constraint of one top-level field (see CONSTRAINT_FIELDS). */
export function compileConstraintField(name: string, value: unknown): OutputGrammar {
  const kind = CONSTRAINT_FIELDS[name];
  if (kind === 'structured') return compileStructuredOutputs(name, value);
  if (kind === 'ollama_format') {  // Ollama: "json" (any JSON object) or a JSON Schema object
    if (value === 'json') return compileConstraint(name, 'json_object', true);
    if (typeof value === 'object' && !Array.isArray(value)) return compileConstraint(name, 'json', value);
    throw new StructuredOutputError(`${name} must be "json" or a JSON Schema object (got ${JSON.stringify(value)})`);
  }
  return compileConstraint(name, kind, value);
}

export { StructuredOutputError };
