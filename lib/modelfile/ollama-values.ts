// What Ollama hands its templates: chat messages and tools as the Go values of ollama/ollama template/template.go
// (templateMessage, templateToolCall, templateTool, api.ToolProperty), built from JavaScript input.
// Invariant: field names, field order, nil-ness, printing and JSON are Ollama's: {{ .Function.Arguments }} and
// {{ .Function.Parameters.Properties }} print as JSON with sorted keys, {{ .Tools }} and {{ . }} of a tool print
// JSON, PropertyType prints "string" (or "[string null]"), JSON Schema keys Ollama's structs lack are dropped.
// One deliberate difference: {{ .Function }} and {{ .Function.Parameters }} print JSON here; current Ollama
// prints Go struct syntax there, a known bug (ollama/ollama#14601, fix in PR #18391) that breaks Qwen templates.
// Malformed input (a tool that is not an object, arguments that are not JSON) is a TemplateError naming the field.
import { goMarshal, goNamed, goStruct, JSONObject, TemplateError } from './go-template.js';
import { sortedKeys } from './go-template/values.js';

/** A tool call as Ollama's API or OpenAI's gives it (arguments an object, or a JSON string). */
export interface ToolCallInput {
  id?: string;
  type?: string;
  function: { name: string; arguments?: Record<string, unknown> | string | null; index?: number };
}

/** A message after normalization: what Ollama's api.Message holds. */
export interface NormalizedMessage {
  role: string;
  content: string;
  thinking: string;
  images: unknown[];
  toolCalls: { id: string; index: number; name: string; arguments: Record<string, unknown> | null }[];
  toolName: string;
  toolCallId: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export function normalizeToolCall(tc: unknown, where: string): NormalizedMessage['toolCalls'][number] {
  if (!isObject(tc) || !isObject(tc.function)) throw new TemplateError(`${where} must be an object with a "function" object`);
  const f = tc.function;
  let args: unknown = f.arguments ?? null;
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      throw new TemplateError(`${where}.function.arguments is not valid JSON (invalid tool call arguments)`);
    }
  }
  if (args !== null && !isObject(args)) throw new TemplateError(`${where}.function.arguments must be a JSON object`);
  return { id: str(tc.id), index: typeof f.index === 'number' ? f.index : 0, name: str(f.name), arguments: args as Record<string, unknown> | null };
}

/** templateArgs: a map printed as JSON; nil prints "{}" and marshals to null. */
function argsValue(args: Record<string, unknown> | null): Record<string, unknown> {
  if (args === null) return goNamed({}, { string: () => '{}', json: () => null });
  const map = { ...args };
  return goNamed(map, { string: () => goMarshal({ ...map }) ?? '' });
}

/** A Go struct with no json tags marshals its fields by name, in declaration order. */
function plainStruct<T extends Record<string, unknown>>(typeName: string, fields: T, json: (k: string, v: unknown) => unknown = (_, v) => v): T {
  return goStruct(typeName, fields, { json: () => new JSONObject(Object.entries(fields).map(([k, v]) => [k, json(k, v)])) });
}

/** *templateMessage for .Messages. Empty Images and ToolCalls are nil slices in Go (JSON null). */
export function templateMessage(m: NormalizedMessage): object {
  const toolCalls = m.toolCalls.map((tc) =>
    plainStruct('template.templateToolCall', {
      ID: tc.id,
      Function: plainStruct('template.templateToolCallFunction', { Index: tc.index, Name: tc.name, Arguments: argsValue(tc.arguments) }),
    }));
  const nilIfEmpty = (_: string, v: unknown) => (Array.isArray(v) && v.length === 0 ? null : v);
  return plainStruct('*template.templateMessage', {
    Role: m.role,
    Content: m.content,
    Thinking: m.thinking,
    Images: m.images,
    ToolCalls: toolCalls,
    ToolName: m.toolName,
    ToolCallID: m.toolCallId,
  }, nilIfEmpty);
}

const entries = (pairs: [string, unknown, boolean][]): JSONObject => new JSONObject(pairs.filter((p) => p[2]).map(([k, v]) => [k, v]));

function stringList(v: unknown, where: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new TemplateError(`${where} must be an array of strings`);
  return [...v];
}

/** api.PropertyType: a JSON Schema type, a string or a list of strings. */
function propertyType(v: unknown, where: string): string[] {
  const types = typeof v === 'string' ? [v] : stringList(v, `${where} (a string or an array of strings)`);
  return goNamed(types, {
    string: () => (types.length === 0 ? '' : types.length === 1 ? types[0]! : `[${types.join(' ')}]`),
    json: () => (types.length === 1 ? types[0] : [...types]),
  });
}

function enumValues(v: unknown, where: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new TemplateError(`${where} must be an array`);
  return [...v];
}

/** api.ToolProperty. Its nested `properties` keep their order (Ollama's ordered map); keys Ollama lacks are dropped. */
function toolProperty(p: unknown, where: string): object {
  if (!isObject(p)) throw new TemplateError(`${where} must be an object`);
  const anyOf = p.anyOf === undefined || p.anyOf === null ? [] : Array.isArray(p.anyOf) ? p.anyOf.map((x, i) => toolProperty(x, `${where}.anyOf[${i}]`)) : null;
  if (anyOf === null) throw new TemplateError(`${where}.anyOf must be an array`);
  let properties: object | null = null;
  if (p.properties !== undefined && p.properties !== null) {
    if (!isObject(p.properties)) throw new TemplateError(`${where}.properties must be an object`);
    const nested = Object.entries(p.properties).map(([k, v]) => [k, toolProperty(v, `${where}.properties.${k}`)] as const);
    properties = goStruct('*api.ToolPropertiesMap', {}, { json: () => new JSONObject(nested), string: () => goMarshal(new JSONObject(nested)) ?? '' });
  }
  const fields = {
    AnyOf: anyOf,
    Type: propertyType(p.type, `${where}.type`),
    Items: p.items ?? null,
    Description: str(p.description),
    Enum: enumValues(p.enum, `${where}.enum`),
    Properties: properties,
    Required: stringList(p.required, `${where}.required`),
  };
  const json = () => entries([
    ['anyOf', fields.AnyOf, fields.AnyOf.length > 0],
    ['type', fields.Type, fields.Type.length > 0],
    ['items', fields.Items, fields.Items !== null],
    ['description', fields.Description, fields.Description !== ''],
    ['enum', fields.Enum, fields.Enum.length > 0],
    ['properties', fields.Properties, fields.Properties !== null],
    ['required', fields.Required, fields.Required.length > 0],
  ]);
  return goStruct('api.ToolProperty', fields, { json });
}

/** templateProperties: name -> ToolProperty, a Go map (sorted), printed as JSON; nil prints "{}". */
function propertiesValue(v: unknown, where: string): Record<string, unknown> {
  if (v === undefined || v === null) return goNamed({}, { string: () => '{}', json: () => null });
  if (!isObject(v)) throw new TemplateError(`${where} must be an object`);
  const map: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(v)) map[k] = toolProperty(p, `${where}.${k}`);
  const sorted = () => new JSONObject(sortedKeys(map).map((k) => [k, map[k]]));
  return goNamed(map, { string: () => goMarshal(sorted()) ?? '', json: sorted });
}

function toolValue(t: unknown, i: number): object {
  const where = `tools[${i}]`;
  if (!isObject(t)) throw new TemplateError(`${where} must be an object`);
  const f = t.function ?? {};
  if (!isObject(f)) throw new TemplateError(`${where}.function must be an object`);
  const p = f.parameters ?? {};
  if (!isObject(p)) throw new TemplateError(`${where}.function.parameters must be an object`);
  const params = {
    Type: str(p.type),
    Defs: p.$defs ?? null,
    Items: p.items ?? null,
    Required: stringList(p.required, `${where}.function.parameters.required`),
    Properties: propertiesValue(p.properties, `${where}.function.parameters.properties`),
  };
  const paramsJSON = () => entries([
    ['type', params.Type, true], ['$defs', params.Defs, params.Defs !== null], ['items', params.Items, params.Items !== null],
    ['required', params.Required, params.Required.length > 0], ['properties', params.Properties, true],
  ]);
  const Parameters = goStruct('template.templateToolFunctionParameters', params, { json: paramsJSON, string: () => goMarshal(paramsJSON()) ?? '' });
  const fn = { Name: str(f.name), Description: str(f.description), Parameters };
  const fnJSON = () => entries([['name', fn.Name, true], ['description', fn.Description, true], ['parameters', Parameters, true]]);
  const Function = goStruct('template.templateToolFunction', fn, { json: fnJSON, string: () => goMarshal(fnJSON()) ?? '' });
  const tool = { Type: str(t.type), Items: t.items ?? null, Function };
  const toolJSON = () => entries([['type', tool.Type, true], ['items', tool.Items, tool.Items !== null], ['function', Function, true]]);
  return goStruct('template.templateTool', tool, { json: toolJSON, string: () => goMarshal(toolJSON()) ?? '' });
}

/** templateTools for .Tools: nil (no tools given) prints "null"; otherwise the tools, printed as a JSON array. */
export function toolsValue(tools: readonly unknown[] | null | undefined): unknown[] {
  if (tools === undefined || tools === null) return goNamed([], { string: () => 'null', json: () => null });
  if (!Array.isArray(tools)) throw new TemplateError('tools must be an array');
  const list = tools.map(toolValue);
  return goNamed(list, { string: () => goMarshal([...list]) ?? '' });
}
