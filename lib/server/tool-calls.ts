// Tool calling for the chat routes: the request's tools checked, the parser chosen (--tool-call-parser or
// detected from the chat template), the grammar that keeps calls valid, and the model output turned back into
// OpenAI tool calls, whole or as streamed deltas (first delta of a call: index, id, type, function name and
// empty arguments; then argument fragments; reasoning.ts's OutputSplitter feeds them).
// Invariant: with tools and tool_choice other than none, a request either gets a parser and a grammar or a
// 400 naming why not; streamed deltas of a choice assemble to exactly its non-streamed message.
import type { OutputGrammar } from '../constraints.js';
import type { SamplingParams } from '../sampling-params.js';
import { toolCallGrammar } from '../tool-calls/grammar.js';
import { normalizeToolRequest, ToolRequestError, type ToolRequest } from '../tool-calls/request.js';
import { detectToolCallParser, getToolCallParser, TOOL_CALL_PARSER_NAMES, type ParsedToolCall, type ToolCallParser } from '../tools/index.js';
import { badRequest } from './api-error.js';
import { randomHex } from './generation.js';
import { reasoningFields, type OutputEvent } from './reasoning.js';
import type { ServerEngine } from './plugins/engine.js';

export interface ChatTools {
  request: ToolRequest;
  parser: ToolCallParser | null; // null when tool_choice is none (output is plain content)
  grammar: OutputGrammar | null;
  templateTools: Record<string, unknown>[] | undefined; // what the chat template renders (undefined: no tools)
}

/** The tool side of a chat request; null when it has no tools. */
export function chatTools(engine: ServerEngine, chatTemplate: string | null, tools: unknown, toolChoice: unknown,
  parallel: unknown): ChatTools | null {
  let request: ToolRequest;
  try {
    request = normalizeToolRequest(tools, toolChoice, parallel);
  } catch (e) {
    if (e instanceof ToolRequestError) throw badRequest(e.message, e.param);
    throw e;
  }
  if (request.tools.length === 0) return null;
  const templateTools = request.tools.map((t) => t.raw);
  if (request.choice.mode === 'none') return { request, parser: null, grammar: null, templateTools };
  const name = engine.toolCallParser ?? (chatTemplate ? detectToolCallParser(chatTemplate) : null);
  if (name === null) {
    throw badRequest('tools: this model\'s chat template shows no known tool-call format; start the server with ' +
      `--tool-call-parser (one of ${TOOL_CALL_PARSER_NAMES.join(', ')})`, 'tools', 'unsupported_parameter');
  }
  const parser = getToolCallParser(name);
  return { request, parser, grammar: toolCallGrammar(parser.name, request), templateTools };
}

/**
 * Puts the tools' grammar (tool_choice other than none) on the request's sampling params; `constraint` names the
 * request's own output constraint, which cannot be combined with it (a 400 naming tool_choice), or is the route's
 * own error for that case (Ollama's names `format`).
 */
export function useToolGrammar(params: SamplingParams, tools: ChatTools | null, constraint: string | (() => Error)): void {
  if (!tools?.grammar) return;
  if (params.grammar) {
    if (typeof constraint === 'function') throw constraint();
    throw badRequest(`tools with tool_choice '${tools.request.choice.mode}' and ${constraint} cannot both constrain the output; give one ` +
      '(or tool_choice: \'none\')', 'tool_choice');
  }
  params.grammar = tools.grammar;
  // their call delimiters are (or may be) control tokens: the parser must see them in the text
  if (tools.parser?.name === 'lfm2' || tools.parser?.name === 'mistral') params.skipSpecialTokens = false;
}

function callId(): string {
  return `call_${randomHex(12)}`;
}

export interface OpenAiToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export function openAiToolCalls(calls: ParsedToolCall[]): OpenAiToolCall[] {
  return calls.map((c) => ({ id: callId(), type: 'function', function: { name: c.name, arguments: c.arguments } }));
}

/**
 * finish_reason of a choice: 'tool_calls' when it made calls and stopped on its own, except that a forced
 * named function answers 'stop' as OpenAI and vLLM do.
 */
export function toolFinishReason(reason: string, calls: number, tools: ChatTools): string {
  return calls > 0 && reason === 'stop' && tools.request.choice.mode !== 'named' ? 'tool_calls' : reason;
}

/** One choice's output events -> OpenAI chat deltas (reasoning, content and tool_calls). */
export class ChatDeltas {
  #calls = 0;

  get calls(): number { return this.#calls; }

  deltas(events: OutputEvent[]): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const e of events) {
      if (e.type === 'reasoning') {
        out.push(reasoningFields(e.text));
      } else if (e.type === 'content') {
        out.push({ content: e.text });
      } else if (e.type === 'tool_call') {
        this.#calls = Math.max(this.#calls, e.index + 1);
        out.push({ tool_calls: [{ index: e.index, id: callId(), type: 'function', function: { name: e.name, arguments: '' } }] });
      } else if (e.fragment.length > 0) {
        out.push({ tool_calls: [{ index: e.index, function: { arguments: e.fragment } }] });
      }
    }
    return out;
  }
}
