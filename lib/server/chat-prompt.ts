// Chat messages -> the engine's prompt for every chat route (/v1/chat/completions, /api/chat, /api/generate):
// the chat template rendered (in runner mode a store model's Modelfile TEMPLATE / SYSTEM / MESSAGEs:
// modelfile-prompt.ts), with a media marker per image when the model takes images, tokenized, and the images
// fetched and decoded within the server's media limits (--allowed-local-media-path, --allowed-media-domains, no
// link-local or metadata addresses).
// Invariant: anything the client got wrong (an image that cannot be fetched or decoded, an image for a text-only
// model) is a 400 ApiError naming the image and the problem.
import { finalMessageText, imageSources, type ChatMessage } from '../chat/template.js';
import type { CorePrompt } from '../engine-core.js';
import type { ApplyChatTemplateOptions, Tokenizer } from '../tokenizer.js';
import { ImageInputError, type ImageSource } from '../vision/image-input.js';
import { MEDIA_MARKER } from '../vision/multimodal-prompt.js';
import type { Manifest } from '../models/store.js';
import { badRequest } from './api-error.js';
import { modelfileChatText } from './modelfile-prompt.js';
import type { ServerEngine } from './plugins/engine.js';

export interface ChatPrompt {
  ids: number[]; // the prompt's token ids (-1 at image embeddings)
  prompt: CorePrompt; // what the engine is given
  images: number; // images in the prompt
  text: string; // the rendered prompt text (images as media markers)
}

/** Images of a prompt, fetched within the server's limits; a failure is a 400 naming the image. */
export async function serverImagesPrompt(engine: ServerEngine, text: string, sources: readonly ImageSource[],
  rendered: boolean, param: string): Promise<ChatPrompt> {
  if (!engine.core.acceptsImages) {
    throw badRequest(`${param}: this model takes text only (it has no vision projector; start the server with --mmproj)`, param, 'unsupported_parameter');
  }
  try {
    const mm = await engine.core.multimodalPrompt(text, sources, `${param} image`, rendered);
    return { ids: mm.tokenIds, prompt: mm, images: mm.images.length, text };
  } catch (e) {
    if (e instanceof ImageInputError) throw badRequest(e.message, param, e.code);
    if (e instanceof RangeError) throw badRequest(e.message, param);
    throw e;
  }
}

/** Rendered prompt text (images as media markers, `sources` in their order) -> the engine's prompt. */
export async function renderedPrompt(engine: ServerEngine, tokenizer: Tokenizer, text: string, sources: readonly ImageSource[],
  param: string): Promise<ChatPrompt> {
  if (sources.length === 0) {
    const ids = tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: true });
    return { ids, prompt: ids, images: 0, text };
  }
  return serverImagesPrompt(engine, text, sources, true, param);
}

/** Messages through the model's chat template, or (a store model, runner mode) through its Modelfile's. */
export async function chatPrompt(engine: ServerEngine, tokenizer: Tokenizer, messages: readonly ChatMessage[],
  options: Omit<ApplyChatTemplateOptions, 'tokenize' | 'mediaMarker'>, param = 'messages', modelfile: Manifest | null = null): Promise<ChatPrompt> {
  const vision = engine.core.acceptsImages;
  const marker = vision ? MEDIA_MARKER : undefined;
  const text = modelfile ? modelfileChatText(tokenizer, messages, options, modelfile, marker, param)
    : tokenizer.applyChatTemplate(messages, { ...options, tokenize: false, mediaMarker: marker });
  return renderedPrompt(engine, tokenizer, text, vision ? imageSources(messages) : [], param);
}

/** vLLM's add_generation_prompt and continue_final_message from a request (the generation prompt: true by default,
 * false when continuing), and the continued text the reasoning split starts from (null when not continuing). */
export function turnOptions(body: { add_generation_prompt?: boolean | null; continue_final_message?: boolean | null },
  messages: readonly ChatMessage[]): { addGenerationPrompt: boolean | undefined; continueFinalMessage: boolean; continued: string | null } {
  const continueFinalMessage = body.continue_final_message === true;
  return {
    addGenerationPrompt: body.add_generation_prompt ?? undefined, continueFinalMessage,
    continued: continueFinalMessage ? finalMessageText(messages) : null,
  };
}
