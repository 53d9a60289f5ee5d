// Chat messages -> prompt text through the model's Jinja chat template (GGUF tokenizer.chat_template),
// rendered with @huggingface/jinja the way transformers' apply_chat_template does.
// Images: with a media marker (a vision model), each image part becomes the marker in the message text, joined
// as llama.cpp's server joins parts (text parts with a newline, none before or after a marker), and
// imageSources() lists the images in the same order; without one, an image part is refused.
// Invariant: every failure is a ChatTemplateError whose message names the problem (bad role, unknown content
// part type, vision input on a text model, a template that does not parse or fails to render).
import { withMistralToolCallIds } from './mistral-tool-ids.js';
import { Template } from '@huggingface/jinja';

export type Role = 'system' | 'user' | 'assistant' | 'tool';

export interface TextPart {
  type: 'text';
  text: string;
}

export interface ImageUrlPart {
  type: 'image_url';
  image_url: { url: string; detail?: string } | string;
}

/** An image given directly (vLLM / transformers style): a URL, data URL, file path, or the bytes. */
export interface ImagePart {
  type: 'image';
  image: string | Uint8Array;
}

export type ContentPart = TextPart | ImageUrlPart | ImagePart;

export interface ChatMessage {
  role: Role;
  content?: string | ContentPart[] | null;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
  [extra: string]: unknown;
}

export interface RenderOptions {
  addGenerationPrompt?: boolean; // default true
  bosToken?: string | null;
  eosToken?: string | null;
  tools?: unknown[];
  /** Extra variables for the template (vLLM's chat_template_kwargs), e.g. { enable_thinking: false }. */
  chatTemplateKwargs?: Record<string, unknown>;
  /** The text that stands for each image (vision models); absent: image parts are refused. */
  mediaMarker?: string;
  /**
   * transformers' / vLLM's continue_final_message: the prompt ends right after the final message's text (no
   * end-of-turn after it), so the model continues that message (an assistant prefill). Not with addGenerationPrompt.
   */
  continueFinalMessage?: boolean;
}

export class ChatTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChatTemplateError';
  }
}

const ROLES: ReadonlySet<string> = new Set(['system', 'user', 'assistant', 'tool']);

/** The image of an image part (image_url: { url } or a string; image: a URL, path or bytes), checked. */
function partImage(part: Record<string, unknown>, at: string): string | Uint8Array {
  if (part.type === 'image') {
    const image = part.image;
    if (typeof image === 'string' || image instanceof Uint8Array) return image;
    throw new ChatTemplateError(`${at}.image must be a URL, a data URL, a file path or bytes`);
  }
  const iu = part.image_url;
  const url = typeof iu === 'string' ? iu : typeof iu === 'object' && iu !== null ? (iu as { url?: unknown }).url : undefined;
  if (typeof url !== 'string' || url.length === 0) throw new ChatTemplateError(`${at}.image_url.url must be a non-empty string`);
  return url;
}

function contentText(content: unknown, where: string, marker: string | undefined, images: (string | Uint8Array)[]): string | null {
  if (content === undefined || content === null) return null;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) {
    throw new ChatTemplateError(`${where}.content must be a string or an array of content parts`);
  }
  let text = '';
  let lastWasMarker = false;
  content.forEach((part: unknown, i) => {
    const at = `${where}.content[${i}]`;
    if (typeof part !== 'object' || part === null) throw new ChatTemplateError(`${at} must be an object`);
    const type = (part as { type?: unknown }).type;
    if (type === 'text') {
      const t = (part as { text?: unknown }).text;
      if (typeof t !== 'string') throw new ChatTemplateError(`${at}.text must be a string`);
      if (!lastWasMarker && text.length > 0) text += '\n';  // text parts join with a newline (vLLM, llama.cpp)
      text += t;
      lastWasMarker = false;
    } else if (type === 'image_url' || type === 'image') {
      if (marker === undefined) {
        throw new ChatTemplateError(
          `${at}: image inputs (content part type '${type}') are not supported: this model has no vision encoder`);
      }
      images.push(partImage(part as Record<string, unknown>, at));
      text += marker;  // no newline before or after an image (llama.cpp's server)
      lastWasMarker = true;
    } else {
      throw new ChatTemplateError(`${at}: unknown content part type '${String(type)}' (supported: 'text', 'image_url', 'image')`);
    }
  });
  return text;
}

/** The images of `messages` in the order their markers appear in the rendered prompt. */
export function imageSources(messages: readonly ChatMessage[]): (string | Uint8Array)[] {
  const images: (string | Uint8Array)[] = [];
  normalizeMessages(messages, '\u0000', images);
  return images;
}

/** Checks roles and flattens content parts; returns plain objects for the template. */
export function normalizeMessages(messages: readonly ChatMessage[], marker?: string,
  images: (string | Uint8Array)[] = []): Record<string, unknown>[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new ChatTemplateError('messages must be a non-empty array of { role, content } objects');
  }
  return messages.map((m, i) => {
    const where = `messages[${i}]`;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new ChatTemplateError(`${where} must be an object`);
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      throw new ChatTemplateError(`${where}.role must be one of system, user, assistant, tool (got ${JSON.stringify(m.role)})`);
    }
    const content = contentText(m.content, where, marker, images);
    if (content === null && !(m.role === 'assistant' && Array.isArray(m.tool_calls))) {
      throw new ChatTemplateError(`${where}.content is missing`);
    }
    const out: Record<string, unknown> = { ...m, content: content ?? '' };
    // vLLM's current name of an assistant turn's reasoning, as templates read it (Qwen3's renders the reasoning
    // of the turns after the last user message, e.g. in a tool loop)
    if (typeof m.reasoning === 'string' && m.reasoning_content === undefined) out.reasoning_content = m.reasoning;
    if (Array.isArray(m.tool_calls)) out.tool_calls = m.tool_calls.map(templateToolCall);
    return out;
  });
}

/**
 * An assistant tool call as chat templates read it: OpenAI sends `function.arguments` as JSON text, templates
 * (Qwen, Llama 3.1, Hermes) expect the object, so JSON text of an object is parsed (vLLM does the same); any
 * other value is passed through unchanged.
 */
function templateToolCall(call: unknown): unknown {
  if (typeof call !== 'object' || call === null) return call;
  const c = call as Record<string, unknown>;
  const fn = c.function;
  if (typeof fn !== 'object' || fn === null) return call;
  const f = { ...(fn as Record<string, unknown>) };
  if (typeof f.arguments === 'string') {
    try {
      const parsed: unknown = JSON.parse(f.arguments);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) f.arguments = parsed;
    } catch {
      // not JSON: left as the client wrote it
    }
  }
  return { ...c, function: f };
}

const compiled = new Map<string, Template>();

function compile(source: string): Template {
  let t = compiled.get(source);
  if (!t) {
    try {
      t = new Template(source);
    } catch (e) {
      throw new ChatTemplateError(`the chat template could not be parsed: ${(e as Error).message}`);
    }
    if (compiled.size > 32) compiled.clear();
    compiled.set(source, t);
  }
  return t;
}

/** Renders `template` for `messages` (see RenderOptions). */
export function renderChatTemplate(template: string, messages: readonly ChatMessage[], options: RenderOptions = {}): string {
  if (typeof template !== 'string' || template.length === 0) {
    throw new ChatTemplateError('this model has no chat template (GGUF tokenizer.chat_template); use generate() with a raw prompt');
  }
  if (options.continueFinalMessage) {
    checkContinueOptions(options);
    return continueFinalMessage((m) => renderChatTemplate(template, m, { ...options, continueFinalMessage: false, addGenerationPrompt: false }), messages);
  }
  const context: Record<string, unknown> = {
    ...(options.chatTemplateKwargs ?? {}),
    // Mistral's templates take 9-character alphanumeric tool-call ids only (chat/mistral-tool-ids.ts)
    messages: normalizeMessages(template.includes('[TOOL_CALLS]') ? withMistralToolCallIds(messages) : messages, options.mediaMarker),
    add_generation_prompt: options.addGenerationPrompt ?? true,
    bos_token: options.bosToken ?? '',
    eos_token: options.eosToken ?? '',
  };
  if (options.tools !== undefined) {
    if (!Array.isArray(options.tools)) throw new ChatTemplateError('tools must be an array');
    context.tools = options.tools;
  }
  const t = compile(template);
  try {
    return t.render(context);
  } catch (e) {
    throw new ChatTemplateError(`the chat template failed to render: ${(e as Error).message}`);
  }
}

/** The text of the final message: its content, or its last part when that is text ('' otherwise). */
export function finalMessageText(messages: readonly ChatMessage[]): string {
  const content = messages.at(-1)?.content;
  if (typeof content === 'string') return content;
  const last = Array.isArray(content) ? content.at(-1) : undefined;
  return last?.type === 'text' && typeof last.text === 'string' ? last.text : '';
}

// Appended to the final message's text to find where the template put its end: invisible separators around a name.
const FINAL_MARK = '\u2063spindle-final-message-end\u2063';

/** `messages` with `suffix` after the final message's text (its last part, which finalMessageText found to be text). */
function withFinalSuffix(messages: readonly ChatMessage[], suffix: string): ChatMessage[] {
  const out = [...messages];
  const last = out[out.length - 1];
  const content = last.content;
  out[out.length - 1] = typeof content === 'string' ? { ...last, content: content + suffix }
    : { ...last, content: [...content!.slice(0, -1), { type: 'text', text: (content!.at(-1) as TextPart).text + suffix }] };
  return out;
}

/** continue_final_message with add_generation_prompt true is a contradiction (transformers and vLLM refuse it). */
export function checkContinueOptions(o: { continueFinalMessage?: boolean; addGenerationPrompt?: boolean }): void {
  if (o.continueFinalMessage && o.addGenerationPrompt === true) {
    throw new ChatTemplateError('continue_final_message and add_generation_prompt cannot both be true: continue the final message, or start a new assistant message');
  }
}

/**
 * transformers' continue_final_message: the chat `render` gives (no generation prompt), cut right after the final
 * message's text, so the model continues that message. The end is found by rendering once more with a mark after the
 * text (never confused with the same words elsewhere in the prompt, such as an `assistant` header), and kept where
 * the real render has that very prefix; a template that trims the text's trailing whitespace gets the cut after the
 * trimmed text, as transformers cuts it. Otherwise (a template that drops the mark, or renders differently with it)
 * transformers' own search: the last place the text (or its trimmed form) appears. A final message with tool calls
 * cannot be continued (its calls would be cut off).
 */
export function continueFinalMessage(render: (messages: readonly ChatMessage[]) => string, messages: readonly ChatMessage[]): string {
  const text = finalMessageText(messages);
  if (text.trim() === '') throw new ChatTemplateError('continue_final_message: the final message has no text to continue (it must end with text)');
  const calls = messages.at(-1)?.tool_calls;
  if (Array.isArray(calls) && calls.length > 0) throw new ChatTemplateError('continue_final_message: the final message has tool calls; only its text could be continued');
  const plain = render(messages);
  const marked = render(withFinalSuffix(messages, FINAL_MARK));
  const at = marked.indexOf(FINAL_MARK);
  if (at >= 0 && marked.indexOf(FINAL_MARK, at + 1) < 0) {
    const cut = marked.slice(0, at);
    if (plain.startsWith(cut)) return cut;
    const trailing = text.length - text.trimEnd().length;
    const trimmed = cut.slice(0, cut.length - trailing);
    if (trailing > 0 && cut.endsWith(text) && plain.startsWith(trimmed)) return trimmed;
  }
  const end = plain.lastIndexOf(text);
  if (end >= 0) return plain.slice(0, end + text.length);
  const trimmed = text.trim();
  const loc = plain.lastIndexOf(trimmed);
  if (loc < 0) {
    throw new ChatTemplateError('continue_final_message: the final message does not appear in the rendered chat (the chat template changes its text)');
  }
  const lead = text.trimStart();
  return plain.slice(0, loc + (plain.startsWith(lead, loc) ? lead.length : trimmed.length));
}
