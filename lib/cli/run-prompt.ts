// The prompt text of a chat turn in `spindle run`: the model's own chat template (GGUF tokenizer.chat_template,
// Jinja), or, for a model made from a Modelfile with a TEMPLATE, that Ollama Go template.
// Invariant: images appear as `mediaMarker` in the text, one per image part, in message order.
import type { ChatMessage } from '../chat/template.js';
import type { Manifest } from '../models/store.js';
import type { Tokenizer } from '../tokenizer.js';

export function renderPrompt(manifest: Manifest | null, tokenizer: Tokenizer, messages: ChatMessage[], mediaMarker: string | undefined): string {
  return tokenizer.applyChatTemplate(messages, { tokenize: false, addGenerationPrompt: true, mediaMarker });
}
