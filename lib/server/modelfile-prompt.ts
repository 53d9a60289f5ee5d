// A store model's Modelfile applied to a prompt as Ollama's server applies it (runner mode): with a TEMPLATE, the
// conversation is rendered by that Go template (lib/modelfile: the Modelfile's SYSTEM and MESSAGEs included, as
// Ollama's /api/chat and /api/generate build prompts); without one, the model's own Jinja chat template renders
// the same list: the MESSAGEs, then the request's messages, with the SYSTEM first when the request brings no
// system message of its own (/api/generate: its `system`, else the SYSTEM).
// Invariant: images become `marker` in the text, one per image in message order (imageSources' order); a template
// that fails on the request's data is a 400 naming the problem.
import { checkContinueOptions, continueFinalMessage, type ChatMessage } from '../chat/template.js';
import { renderOllamaGenerate, renderOllamaTemplate, TemplateError, type ModelfileMessage, type ThinkValue } from '../modelfile/index.js';
import type { Manifest } from '../models/store.js';
import type { ApplyChatTemplateOptions, Tokenizer } from '../tokenizer.js';
import { badRequest } from './api-error.js';

export type ChatOptions = Omit<ApplyChatTemplateOptions, 'tokenize' | 'mediaMarker'>;

/** The Modelfile's MESSAGEs and SYSTEM around the request's messages (the Jinja path; Ollama's order). */
export function modelfileMessages(messages: readonly ChatMessage[], m: Manifest): ChatMessage[] {
  const out: ChatMessage[] = [...(m.messages ?? []).map((x) => ({ role: x.role as ChatMessage['role'], content: x.content })), ...messages];
  if (m.system && messages[0]?.role !== 'system') out.unshift({ role: 'system', content: m.system });
  return out;
}

/** The Go templates' `think` value (.Think, .ThinkLevel, .IsThinkSet) from the chat template variables thinkKwargs
 * and thinkingKwargs make: enable_thinking false -> false, a reasoning_effort level, enable_thinking true -> true. */
export function ollamaThink(kwargs: Record<string, unknown> | undefined): ThinkValue | undefined {
  if (!kwargs) return undefined;
  if (kwargs.enable_thinking === false) return false;
  const effort = kwargs.reasoning_effort;
  if (effort === 'low' || effort === 'medium' || effort === 'high' || effort === 'max') return effort;
  return kwargs.enable_thinking === true || typeof effort === 'string' ? true : undefined;
}

function rendered(f: () => string, param: string): string {
  try {
    return f();
  } catch (e) {
    if (e instanceof TemplateError) throw badRequest(`${param}: the model's template failed: ${e.message}`, param);
    throw e;
  }
}

/** A chat's prompt text for a store model (Go TEMPLATE, else Jinja over the Modelfile's messages). */
export function modelfileChatText(tokenizer: Tokenizer, messages: readonly ChatMessage[], options: ChatOptions,
  m: Manifest, marker: string | undefined, param: string): string {
  if (m.template) {
    const template = m.template;
    const render = (list: readonly ChatMessage[]): string => rendered(() => renderOllamaTemplate(template, list, {
      system: m.system, messages: (m.messages ?? []) as ModelfileMessage[], tools: options.tools ?? null,
      imageMarker: marker ? () => marker : undefined, think: ollamaThink(options.chatTemplateKwargs),
    }), param);
    checkContinueOptions(options);
    return options.continueFinalMessage ? continueFinalMessage(render, messages) : render(messages);
  }
  return tokenizer.applyChatTemplate(modelfileMessages(messages, m), { ...options, tokenize: false, mediaMarker: marker });
}

/** /api/generate's prompt text for a store model with a TEMPLATE: [system] + MESSAGEs + the prompt (with its images). */
export function modelfileGenerateText(m: Manifest & { template: string }, prompt: string, system: string | null,
  images: readonly string[], marker: string | undefined, suffix?: string, think?: ThinkValue): string {
  return rendered(() => renderOllamaGenerate(m.template, prompt, {
    system: system || m.system, messages: (m.messages ?? []) as ModelfileMessage[], images,
    imageMarker: marker ? () => marker : undefined, suffix, think,
  }), 'prompt');
}
