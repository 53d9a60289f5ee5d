// Renders a conversation with an Ollama template the way Ollama's server builds a prompt
// (ollama/ollama server/routes.go ChatHandler / GenerateHandler, server/prompt.go chatPrompt, openai/openai.go).
//
// Chat (renderOllamaTemplate), in Ollama's order:
// 1. messages are normalized as Ollama decodes them: roles lower-cased; content null -> ""; OpenAI content parts
//    become one message per part (text -> content, image -> a message carrying only the image), a message's
//    tool_calls going to the last of them; tool call arguments given as a JSON string are parsed; a tool message
//    without tool_name takes `name`, else the name of the call with its tool_call_id.
// 2. the Modelfile's MESSAGEs come first, then the request's messages; if the request's first message is not a
//    system message and the Modelfile has a SYSTEM, that SYSTEM is put in front of everything.
// 3. with `truncate`, the oldest messages are dropped until the prompt fits num_ctx: the smallest i such that
//    the system messages before i plus messages[i:] render within numCtx tokens (plus imageTokens per image), and
//    never the last message; those earlier system messages are kept.
// 4. with `imageMarker`, each image gets the marker of its number (counted over the kept messages): it replaces
//    the first "[img]" in the message's text, or all markers go in front of the text (Ollama: "[img-N]").
// 5. the template is executed by OllamaTemplate (ollama-template.ts: the .Messages path or the per-turn
//    .System/.Prompt/.Response path, collating consecutive same-role messages).
// Generate (renderOllamaGenerate): [system] + Modelfile MESSAGEs + the user prompt, rendered as a chat with an
// empty tool list; with a suffix, .Prompt and .Suffix only (fill-in-middle).
// Not done here: Ollama's filterThinkTags (it strips <think>...</think> from earlier assistant turns, for qwen3 and
// deepseek-r1 only), raw mode, the deprecated `context`, and models Ollama renders with a built-in RENDERER or
// the GGUF's own Jinja template instead of a Go template.
// Invariant: the same inputs give the prompt Ollama would give; bad input is a TemplateError naming the field.
import { TemplateError } from './go-template.js';
import { OllamaTemplate, type ThinkValue } from './ollama-template.js';
import { normalizeToolCall, type NormalizedMessage, type ToolCallInput } from './ollama-values.js';
import type { ModelfileMessage } from './parse.js';

/** A chat message as Ollama's /api/chat (content a string, images) or OpenAI's API (content parts) gives it. */
export interface ChatMessage {
  role: string;
  content?: string | null | ReadonlyArray<{ type: string; text?: string; image_url?: unknown; image?: unknown; input_audio?: unknown }>;
  thinking?: string;
  /** OpenAI-compatible spellings of `thinking`. */
  reasoning?: string;
  reasoning_content?: string;
  images?: readonly unknown[];
  /** ToolCallInput-shaped: { id?, function: { name, arguments (object or JSON string), index? } }. */
  tool_calls?: readonly (ToolCallInput | unknown)[] | null;
  tool_name?: string;
  name?: string;
  tool_call_id?: string;
}

export interface RenderOllamaOptions {
  /** The Modelfile's SYSTEM: used when the conversation does not start with a system message. */
  system?: string | null;
  /** The Modelfile's MESSAGEs: put before the conversation. */
  messages?: readonly ModelfileMessage[];
  tools?: readonly unknown[] | null;
  think?: ThinkValue;
  /** Marker text for image number n; without it images add nothing to the text. Ollama's is n => `[img-${n}]`. */
  imageMarker?: (n: number) => string;
  /** Drop the oldest messages until the prompt fits, as Ollama does (step 3). */
  truncate?: { numCtx: number; countTokens: (prompt: string) => number; imageTokens?: number };
  /** Clock for currentDate / yesterdayDate. */
  now?: Date;
}

const cache = new Map<string, OllamaTemplate>();

/** The parsed template, cached by source (a handful of templates per process). */
export function ollamaTemplate(source: string): OllamaTemplate {
  let t = cache.get(source);
  if (!t) {
    t = new OllamaTemplate(source);
    if (cache.size >= 64) cache.delete(cache.keys().next().value!);
    cache.set(source, t);
  }
  return t;
}

const text = (v: unknown): string => (typeof v === 'string' ? v : '');

function blank(role: string): NormalizedMessage {
  return { role, content: '', thinking: '', images: [], toolCalls: [], toolName: '', toolCallId: '' };
}

/** Step 1 for one message (may give several). `all` is the whole input, for tool names by call id. */
function normalize(m: ChatMessage, i: number, all: readonly ChatMessage[]): NormalizedMessage[] {
  const where = `messages[${i}]`;
  if (typeof m !== 'object' || m === null || typeof m.role !== 'string') throw new TemplateError(`${where}.role must be a string`);
  const role = m.role.toLowerCase();
  if (m.tool_calls !== undefined && m.tool_calls !== null && !Array.isArray(m.tool_calls)) throw new TemplateError(`${where}.tool_calls must be an array`);
  if (m.images !== undefined && m.images !== null && !Array.isArray(m.images)) throw new TemplateError(`${where}.images must be an array`);
  const toolCalls = (m.tool_calls ?? []).map((tc, j) => normalizeToolCall(tc, `${where}.tool_calls[${j}]`));
  let toolName = text(m.tool_name);
  if (!toolName && role === 'tool') toolName = text(m.name) || nameFromToolCallId(all, m.tool_call_id);
  const extra = { thinking: text(m.thinking ?? m.reasoning ?? m.reasoning_content), toolCalls, toolName, toolCallId: text(m.tool_call_id) };
  if (m.content === undefined || m.content === null || typeof m.content === 'string') {
    return [{ ...blank(role), content: m.content ?? '', images: [...(m.images ?? [])], ...extra }];
  }
  if (!Array.isArray(m.content)) throw new TemplateError(`${where}.content must be a string, null or an array of content parts`);
  const out = m.content.map((part, j): NormalizedMessage => {
    if (part?.type === 'text' && typeof part.text === 'string') return { ...blank(role), content: part.text };
    if (part?.type === 'image_url' || part?.type === 'image' || part?.type === 'input_audio') return { ...blank(role), images: [part] };
    throw new TemplateError(`${where}.content[${j}] must be a text, image_url, image or input_audio part`);
  });
  if (out.length > 0 && toolCalls.length > 0) Object.assign(out[out.length - 1]!, extra);
  return out;
}

function nameFromToolCallId(all: readonly ChatMessage[], id: string | undefined): string {
  if (!id) return '';
  for (let i = all.length - 1; i >= 0; i--) {
    for (const tc of all[i]!.tool_calls ?? []) {
      const call = tc as Partial<ToolCallInput> | null;
      if (call?.id === id) return text(call.function?.name);
    }
  }
  return '';
}

export function normalizeMessages(messages: readonly ChatMessage[]): NormalizedMessage[] {
  if (!Array.isArray(messages)) throw new TemplateError('messages must be an array');
  return messages.flatMap((m, i) => normalize(m, i, messages));
}

/** Step 4: Ollama's imageTaggedMessages from `start` on. */
function tagImages(msgs: NormalizedMessage[], start: number, marker: (n: number) => string): NormalizedMessage[] {
  let count = 0;
  return msgs.map((m, i) => {
    if (i < start || m.images.length === 0) return m;
    let prefix = '';
    let content = m.content;
    for (let k = 0; k < m.images.length; k++) {
      const tag = marker(count++);
      if (content.includes('[img]')) content = content.replace('[img]', () => tag);
      else prefix += tag;
    }
    return { ...m, content: prefix + content };
  });
}

/** Steps 3-5 over already merged messages (Ollama's chatPrompt). */
function chatPrompt(tmpl: OllamaTemplate, msgs: NormalizedMessage[], opts: RenderOllamaOptions, tools: readonly unknown[] | null): string {
  const exec = (messages: NormalizedMessage[]) => tmpl.execute({ messages, tools, think: opts.think, now: opts.now });
  let start = 0;
  let system: NormalizedMessage[] = [];
  const fit = opts.truncate;
  if (fit) {
    for (let i = 0; i < msgs.length; i++) {
      system = msgs.slice(0, i).filter((m) => m.role === 'system');
      const rest = msgs.slice(i);
      const images = fit.imageTokens ? fit.imageTokens * rest.reduce((n, m) => n + m.images.length, 0) : 0;
      if (fit.countTokens(exec([...system, ...rest])) + images <= fit.numCtx || i === msgs.length - 1) {
        start = i;
        break;
      }
    }
  }
  const tagged = opts.imageMarker ? tagImages(msgs, start, opts.imageMarker) : msgs;
  return exec([...system, ...tagged.slice(start)]);
}

/** A chat rendered with an Ollama template, as Ollama's /api/chat builds the prompt. */
export function renderOllamaTemplate(template: string, messages: readonly ChatMessage[], opts: RenderOllamaOptions = {}): string {
  const tmpl = ollamaTemplate(template);
  const request = normalizeMessages(messages);
  const model = normalizeMessages((opts.messages ?? []).map((m) => ({ role: m.role, content: m.content })));
  const msgs = [...model, ...request];
  if (opts.system && request[0]?.role !== 'system') msgs.unshift({ ...blank('system'), content: opts.system });
  return chatPrompt(tmpl, msgs, opts, opts.tools ?? null);
}

export interface RenderGenerateOptions extends Omit<RenderOllamaOptions, 'tools'> {
  /** The request's system prompt, else the Modelfile's SYSTEM (Ollama: req.System || model SYSTEM). */
  system?: string | null;
  /** Fill-in-middle: the text after the cursor. */
  suffix?: string;
  /** Images attached to the prompt. */
  images?: readonly unknown[];
}

/** A single prompt rendered as Ollama's /api/generate builds it (no raw mode, no context). */
export function renderOllamaGenerate(template: string, prompt: string, opts: RenderGenerateOptions = {}): string {
  const tmpl = ollamaTemplate(template);
  if (opts.suffix) return tmpl.execute({ messages: [], prompt, suffix: opts.suffix, think: opts.think, now: opts.now });
  const msgs: NormalizedMessage[] = [];
  if (opts.system) msgs.push({ ...blank('system'), content: opts.system });
  msgs.push(...normalizeMessages((opts.messages ?? []).map((m) => ({ role: m.role, content: m.content }))));
  msgs.push({ ...blank('user'), content: prompt, images: [...(opts.images ?? [])] });
  return chatPrompt(tmpl, msgs, opts, []);
}
