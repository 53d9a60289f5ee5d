// OpenAI's Responses API request, turned into what the chat route takes: `instructions` and `input` (a string,
// or items: messages with input_text / input_image / output_text parts, function_call and function_call_output
// items) become chat messages after the stored conversation of `previous_response_id`; Responses tools
// ({ type: 'function', name, parameters }) and tool_choice become chat tools; `text.format` becomes
// response_format.
// Invariant: an item or part this server cannot take is a 400 naming it (input[i] / input[i].content[j]), never
// dropped silently.
import type { ChatMessage, ContentPart } from '../../chat/template.js';
import { badRequest } from '../api-error.js';

export type ResponseItem = Record<string, unknown>;

const str = (v: unknown): v is string => typeof v === 'string';

/** One message item's content as chat content (a string stays a string). */
function contentOf(content: unknown, at: string): string | ContentPart[] {
  if (str(content)) return content;
  if (!Array.isArray(content)) throw badRequest(`${at}.content must be a string or a list of content parts`, `${at}.content`);
  return content.map((part, j): ContentPart => {
    const p = part as Record<string, unknown>;
    const where = `${at}.content[${j}]`;
    switch (p?.type) {
      case 'input_text':
      case 'output_text':
      case 'text':
        if (!str(p.text)) throw badRequest(`${where}.text must be a string`, where);
        return { type: 'text', text: p.text };
      case 'input_image': {
        const url = p.image_url;
        if (!str(url)) throw badRequest(`${where}: input_image needs image_url (a URL or data URL; file_id is not supported)`, where, 'unsupported_parameter');
        return { type: 'image_url', image_url: { url } };
      }
      case 'refusal':
        if (!str(p.refusal)) throw badRequest(`${where}.refusal must be a string`, where);
        return { type: 'text', text: p.refusal };
      default:
        throw badRequest(`${where}: content part type ${JSON.stringify(p?.type)} is not supported (input_text, input_image, output_text)`, where, 'unsupported_parameter');
    }
  });
}

const ROLES = new Set(['user', 'assistant', 'system', 'developer']);

/** The text of a reasoning item: its reasoning_text parts (this server's, vLLM's), else its summary texts. */
function reasoningText(item: ResponseItem): string {
  const parts = (key: string) => (Array.isArray(item[key]) ? item[key] as Record<string, unknown>[] : [])
    .map((p) => (str(p?.text) ? p.text : '')).join('');
  return parts('content') || parts('summary');
}

/**
 * Responses items -> chat messages: messages (developer is system), consecutive function_call items as one
 * assistant turn with tool_calls (joined to the assistant message just before them), function_call_output items
 * as tool messages; a reasoning item's text becomes the `reasoning_content` of the assistant turn that follows it
 * (as the chat route takes it; Qwen3's template renders it within a tool loop).
 */
export function itemsToMessages(items: readonly ResponseItem[], param = 'input'): ChatMessage[] {
  const out: ChatMessage[] = [];
  let reasoning = '';
  const assistant = (m: ChatMessage): ChatMessage => {
    if (reasoning) m.reasoning_content = reasoning;
    reasoning = '';
    return m;
  };
  items.forEach((item, i) => {
    const at = `${param}[${i}]`;
    const type = item.type ?? 'message';
    if (type === 'message') {
      const role = item.role;
      if (!str(role) || !ROLES.has(role)) throw badRequest(`${at}.role must be user, assistant, system or developer`, `${at}.role`);
      const message: ChatMessage = { role: role === 'developer' ? 'system' : role as ChatMessage['role'], content: contentOf(item.content, at) };
      out.push(role === 'assistant' ? assistant(message) : message);
    } else if (type === 'function_call') {
      if (!str(item.call_id) || !str(item.name) || !str(item.arguments)) {
        throw badRequest(`${at}: a function_call item needs call_id, name and arguments (strings)`, at);
      }
      const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
      const last = out[out.length - 1];
      if (last?.role === 'assistant' && !reasoning) {  // the turn's text (or an earlier call of the same turn)
        last.tool_calls = [...(last.tool_calls ?? []), call];
      } else {
        out.push(assistant({ role: 'assistant', content: null, tool_calls: [call] }));
      }
    } else if (type === 'function_call_output') {
      if (!str(item.call_id)) throw badRequest(`${at}: a function_call_output item needs call_id`, at);
      const output = str(item.output) ? item.output : JSON.stringify(item.output ?? '');
      out.push({ role: 'tool', tool_call_id: item.call_id, content: output });
    } else if (type === 'reasoning') {
      reasoning += reasoningText(item);
    } else {
      throw badRequest(`${at}: item type ${JSON.stringify(type)} is not supported (message, function_call, function_call_output)`, at, 'unsupported_parameter');
    }
  });
  return out;
}

/** The request's input as items (a string is one user message). */
export function inputItems(input: unknown): ResponseItem[] {
  if (str(input)) return [{ type: 'message', role: 'user', content: input }];
  if (!Array.isArray(input)) throw badRequest('input must be a string or a list of items', 'input');
  return input.map((x, i) => {
    if (typeof x !== 'object' || x === null || Array.isArray(x)) throw badRequest(`input[${i}] must be an object`, `input[${i}]`);
    return x as ResponseItem;
  });
}

/** Responses function tools -> chat tools ({ type: 'function', function: { name, description, parameters, strict } }). */
export function chatToolsOf(tools: unknown): unknown[] | undefined {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) throw badRequest('tools must be a list', 'tools');
  return tools.map((t, i) => {
    const tool = t as Record<string, unknown>;
    if (tool?.type !== 'function') {
      throw badRequest(`tools[${i}]: tool type ${JSON.stringify(tool?.type)} is not supported (function tools only)`, `tools[${i}]`, 'unsupported_parameter');
    }
    const fn: Record<string, unknown> = { name: tool.name };
    for (const k of ['description', 'parameters', 'strict']) if (tool[k] !== undefined && tool[k] !== null) fn[k] = tool[k];
    return { type: 'function', function: fn };
  });
}

/** tool_choice: 'auto' | 'none' | 'required' | { type: 'function', name } -> the chat form. */
export function chatToolChoiceOf(choice: unknown): unknown {
  if (choice === undefined || choice === null || str(choice)) return choice;
  const c = choice as Record<string, unknown>;
  if (c.type === 'function' && str(c.name)) return { type: 'function', function: { name: c.name } };
  throw badRequest("tool_choice must be 'auto', 'none', 'required' or { type: 'function', name }", 'tool_choice');
}

/** text.format -> chat's response_format. */
export function responseFormatOf(text: unknown): unknown {
  const format = (text as { format?: unknown } | null | undefined)?.format as Record<string, unknown> | undefined;
  if (format === undefined || format === null) return undefined;
  if (format.type === 'json_schema') {
    return { type: 'json_schema', json_schema: { name: format.name, schema: format.schema, strict: format.strict } };
  }
  return format;
}
