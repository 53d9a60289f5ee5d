// OpenAI `tools` / `tool_choice` / `parallel_tool_calls` of a request, checked and normalized.
// Invariant: normalizeToolRequest returns only function tools with unique valid names and a parameters
// schema (an object schema; absent = any object), and a tool_choice naming one of them; anything else is a
// ToolRequestError naming the field and what is allowed.

export interface FunctionTool {
  name: string;
  description?: string;
  parameters: Record<string, unknown>; // JSON Schema of the arguments object
  strict: boolean;
  raw: Record<string, unknown>; // the tool as the client sent it (what the chat template renders)
}

export type ToolChoice = { mode: 'none' } | { mode: 'auto' } | { mode: 'required' } | { mode: 'named'; name: string };

export interface ToolRequest {
  tools: FunctionTool[];
  choice: ToolChoice;
  parallel: boolean; // more than one call in one answer
}

export class ToolRequestError extends Error {
  readonly param: string;
  constructor(param: string, message: string) {
    super(message);
    this.name = 'ToolRequestError';
    this.param = param;
  }
}

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function fail(param: string, message: string): never {
  throw new ToolRequestError(param, message);
}

function normalizeTool(t: unknown, i: number): FunctionTool {
  const at = `tools[${i}]`;
  if (typeof t !== 'object' || t === null || Array.isArray(t)) fail(at, `${at} must be an object { type: 'function', function: { name, parameters } }`);
  const tool = t as Record<string, unknown>;
  if (tool.type !== 'function') fail(`${at}.type`, `${at}.type must be 'function' (got ${JSON.stringify(tool.type)})`);
  const fn = tool.function;
  if (typeof fn !== 'object' || fn === null || Array.isArray(fn)) fail(`${at}.function`, `${at}.function must be an object { name, description, parameters }`);
  const f = fn as Record<string, unknown>;
  if (typeof f.name !== 'string' || f.name.length === 0) fail(`${at}.function.name`, `${at}.function.name is missing: every tool needs a name`);
  if (!NAME.test(f.name)) fail(`${at}.function.name`, `${at}.function.name must be 1 to 64 characters of a-z, A-Z, 0-9, _ and - (got ${JSON.stringify(f.name)})`);
  if (f.description !== undefined && f.description !== null && typeof f.description !== 'string') {
    fail(`${at}.function.description`, `${at}.function.description must be a string`);
  }
  let parameters: Record<string, unknown> = { type: 'object' };
  if (f.parameters !== undefined && f.parameters !== null) {
    if (typeof f.parameters !== 'object' || Array.isArray(f.parameters)) fail(`${at}.function.parameters`, `${at}.function.parameters must be a JSON Schema object`);
    parameters = f.parameters as Record<string, unknown>;
    if (parameters.type !== undefined && parameters.type !== 'object') {
      fail(`${at}.function.parameters`, `${at}.function.parameters must describe an object (type 'object'; got ${JSON.stringify(parameters.type)})`);
    }
  }
  return {
    name: f.name, description: typeof f.description === 'string' ? f.description : undefined,
    parameters, strict: f.strict === true, raw: tool,
  };
}

function normalizeChoice(choice: unknown, tools: FunctionTool[]): ToolChoice {
  if (choice === undefined || choice === null) return tools.length > 0 ? { mode: 'auto' } : { mode: 'none' };
  if (choice === 'none' || choice === 'auto' || choice === 'required') {
    if (choice !== 'none' && tools.length === 0) fail('tool_choice', `tool_choice '${choice}' needs tools`);
    return { mode: choice };
  }
  if (typeof choice === 'object' && !Array.isArray(choice)) {
    const c = choice as { type?: unknown; function?: { name?: unknown } };
    if (c.type === 'function' && typeof c.function?.name === 'string') {
      const name = c.function.name;
      if (!tools.some((t) => t.name === name)) {
        fail('tool_choice', `tool_choice names the function '${name}', which is not among the tools (${tools.map((t) => t.name).join(', ') || 'none given'})`);
      }
      return { mode: 'named', name };
    }
  }
  return fail('tool_choice', `tool_choice must be 'none', 'auto', 'required' or { type: 'function', function: { name } } (got ${JSON.stringify(choice)})`);
}

/** Checks the tool fields of a request (OpenAI shapes). */
export function normalizeToolRequest(tools: unknown, toolChoice: unknown, parallelToolCalls: unknown): ToolRequest {
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) fail('tools', 'tools must be an array of function tools');
  const list = ((tools ?? []) as unknown[]).map(normalizeTool);
  const seen = new Set<string>();
  list.forEach((t, i) => {
    if (seen.has(t.name)) fail(`tools[${i}].function.name`, `tools[${i}].function.name '${t.name}' is given twice: tool names must be unique`);
    seen.add(t.name);
  });
  if (parallelToolCalls !== undefined && parallelToolCalls !== null && typeof parallelToolCalls !== 'boolean') {
    fail('parallel_tool_calls', 'parallel_tool_calls must be a boolean');
  }
  return { tools: list, choice: normalizeChoice(toolChoice, list), parallel: parallelToolCalls !== false };
}
