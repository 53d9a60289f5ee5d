// The prompt text of a chat turn in `spindle run`: a Modelfile's TEMPLATE (Ollama's Go template, rendered as
// Ollama's /api/chat does: lib/modelfile) when the model has one, else the model's own chat template (GGUF
// tokenizer.chat_template, Jinja).
// Invariant: images appear as `mediaMarker` in the text, one per image, in message order.
import type { ChatMessage } from '../chat/template.js';
import { renderOllamaTemplate } from '../modelfile/index.js';
import type { Manifest } from '../models/store.js';
import type { Tokenizer } from '../tokenizer.js';

export function renderPrompt(manifest: Manifest | null, tokenizer: Tokenizer, messages: ChatMessage[], mediaMarker: string | undefined): string {
  if (manifest?.template) {
    return renderOllamaTemplate(manifest.template, messages, mediaMarker ? { imageMarker: () => mediaMarker } : {});
  }
  return tokenizer.applyChatTemplate(messages, { tokenize: false, addGenerationPrompt: true, mediaMarker });
}
