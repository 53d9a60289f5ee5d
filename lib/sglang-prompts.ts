// SGLang's GenerateReqInput prompts, shared by Engine.generate (offline) and the server's POST /generate: `text`
// (a string or a batch) or `input_ids` (ids or a batch of them), with `image_data` aligned to them, made into the
// prompts the engine takes (token ids, or ids with images).
// Invariants: a text prompt is tokenized as LLM.generate does (BOS where the model asks for it, never a second one
// after a rendered template); with images, each `<image>` (or `<__media__>`) in the text stands for the next image
// and a text without one gets its images first; with input_ids the ids hold one -1 per image embedding.
import type { CorePrompt, EngineCore } from './engine-core.js';
import type { ImageInputOptions, ImageSource } from './vision/image-input.js';
import { markRawPrompt } from './vision/multimodal-prompt.js';

const isImage = (x: unknown): x is ImageSource => typeof x === 'string' || x instanceof Uint8Array;

/** A `text` / `input_ids` value that is not one of the shapes promptInputs takes; `param` names the field. */
export class PromptInputError extends TypeError {
  constructor(message: string, readonly param: string) {
    super(message);
  }
}

/**
 * SGLang's prompt fields read: `text` (a string or a batch of them) or `ids` (token ids, or a batch of such lists),
 * exactly one of them, each id an integer; whether the input was a batch. `names` are the fields as the caller's users
 * spell them (errors name them).
 */
export function promptInputs(text: unknown, ids: unknown, names: { text: string; ids: string }):
  { input: { text: string[] } | { ids: number[][] }; batch: boolean } {
  const hasText = text !== undefined && text !== null;
  if (hasText === (ids !== undefined && ids !== null)) throw new PromptInputError(`give exactly one of ${names.text} or ${names.ids}`, hasText ? names.ids : names.text);
  if (hasText) {
    const list = (Array.isArray(text) ? text : [text]) as unknown[];
    if (!list.every((x) => typeof x === 'string')) throw new PromptInputError(`${names.text} must be a string or an array of strings`, names.text);
    return { input: { text: list as string[] }, batch: Array.isArray(text) };
  }
  if (!Array.isArray(ids)) throw new PromptInputError(`${names.ids} must be an array of token ids (or of such arrays)`, names.ids);
  const batch = Array.isArray(ids[0]);
  const rows = (batch ? ids : [ids]) as unknown[];
  rows.forEach((row, i) => {
    if (!Array.isArray(row) || !row.every((x) => Number.isInteger(x))) {
      throw new PromptInputError(`${names.ids}[${i}] must be an array of integer token ids`, names.ids);
    }
  });
  return { input: { ids: rows as number[][] }, batch };
}

/**
 * image_data aligned with the prompts: one list of images per prompt. For one prompt: an image or a list of
 * images; for a batch: one entry (an image, a list, or null) per prompt. `what` names the field in errors.
 */
export function alignImages(data: unknown, count: number, batch: boolean, what = 'generate: imageData'): ImageSource[][] {
  if (data === undefined || data === null) return new Array<ImageSource[]>(count).fill([]);
  const bad = (): never => {
    throw new TypeError(`${what} must be an image (URL, data URL, path or bytes), a list of images, or for a batch one such entry (or null) per prompt`);
  };
  if (!batch) {
    if (isImage(data)) return [[data]];
    if (Array.isArray(data) && data.every(isImage)) return [data];
    return bad();
  }
  if (Array.isArray(data) && data.length === 0) return new Array<ImageSource[]>(count).fill([]); // SGLang: no images
  if (!Array.isArray(data) || data.length !== count) {
    throw new TypeError(`${what}: with a batch of ${count} prompts, give one entry per prompt`);
  }
  return data.map((d) => (d === null || d === undefined ? [] : isImage(d) ? [d] : Array.isArray(d) && d.every(isImage) ? d : bad()));
}

/** The prompts of `text` or `ids` (one of them; rows already checked to be integer lists) with their images. */
export async function sglangPrompts(core: EngineCore, input: { text: readonly string[] } | { ids: readonly (readonly number[])[] },
  images: readonly ImageSource[][], fetch: ImageInputOptions['fetch'], what: string): Promise<CorePrompt[]> {
  const { tokenizer } = await core.ready();
  const at = (i: number): string => (images.length > 1 ? `${what}[${i}]` : what);
  if ('text' in input) {
    return Promise.all(input.text.map(async (t, i) => {
      if (images[i].length === 0) return tokenizer.encodePrompt(t); // no second BOS after a rendered template
      return core.multimodalPrompt(markRawPrompt(t, images[i].length), images[i], at(i), false, fetch);
    }));
  }
  return Promise.all(input.ids.map(async (row, i) => (images[i].length === 0 ? row : core.multimodalPrompt(row, images[i], at(i), false, fetch))));
}
