// The prompt text of a chat turn in `spindle run`: a Modelfile's TEMPLATE (Ollama's Go template, rendered as
// Ollama's /api/chat does: lib/modelfile) when the model has one, else the model's own chat template (GGUF
// tokenizer.chat_template, Jinja); `think` (Ollama's) reaches either: .Think / .ThinkLevel / .IsThinkSet for a Go
// template, enable_thinking / reasoning_effort for a Jinja one (Qwen3's reads enable_thinking).
// Invariant: images appear as `mediaMarker` in the text, one per image, in message order.
import type { ChatMessage } from '../chat/template.js';
import { renderOllamaTemplate, type ThinkValue } from '../modelfile/index.js';
import { thinkTemplateVars } from '../reasoning/index.js';
import type { Manifest } from '../models/store.js';
import type { Tokenizer } from '../tokenizer.js';

export function renderPrompt(manifest: Manifest | null, tokenizer: Tokenizer, messages: ChatMessage[], mediaMarker: string | undefined,
  think?: ThinkValue): string {
  if (manifest?.template) {
    return renderOllamaTemplate(manifest.template, messages, { ...(mediaMarker ? { imageMarker: () => mediaMarker } : {}), think });
  }
  return tokenizer.applyChatTemplate(messages, {
    tokenize: false, addGenerationPrompt: true, mediaMarker, chatTemplateKwargs: think === undefined ? undefined : thinkTemplateVars(think),
  });
}
