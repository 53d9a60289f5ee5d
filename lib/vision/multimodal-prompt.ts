// Prompt text with image markers + decoded images -> the engine's prompt: token ids with each image's layout
// (marker tokens and -1 per embedding, from the engine's imageLayout) spliced in where its marker was, and the
// images with their positions. llama.cpp's mtmd_tokenize does the same with its media marker.
// Invariant: the text between markers is tokenized exactly as the text alone would be (BOS only before the
// first piece, where the model wants it); the number of markers equals the number of images, or it throws.
import type { NativeImage } from '../native.js';
import type { Tokenizer } from '../tokenizer.js';
import type { RgbImage } from './decode.js';

/** The marker a rendered chat template holds for each image; random per process, so user text cannot forge one. */
export const MEDIA_MARKER = `<__media_${Math.random().toString(36).slice(2, 10)}__>`;

/**
 * Where images go in a raw prompt (Engine.generate, LLM.generate): each `<image>` (the Hugging Face processors'
 * image token text) or `<__media__>` (llama.cpp's default marker) stands for the next image; a prompt with
 * none gets its images before the text.
 */
export const RAW_IMAGE_MARKERS: readonly string[] = ['<image>', '<__media__>'];

/** A raw prompt with its public image markers (RAW_IMAGE_MARKERS) turned into MEDIA_MARKER. */
export function markRawPrompt(text: string, imageCount: number): string {
  const pattern = new RegExp(RAW_IMAGE_MARKERS.map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  const marked = text.replace(pattern, MEDIA_MARKER);
  if (marked === text && imageCount > 0) return MEDIA_MARKER.repeat(imageCount) + text;
  return marked;
}

export interface MultimodalPrompt {
  tokenIds: number[];
  images: NativeImage[];
}

/** rendered: the text is a rendered chat template (it writes BOS itself); else a raw prompt (encodePrompt). */
export function spliceImages(text: string, images: readonly RgbImage[], tokenizer: Tokenizer,
  layoutOf: (width: number, height: number) => Int32Array, rendered: boolean, marker: string = MEDIA_MARKER): MultimodalPrompt {
  const pieces = text.split(marker);
  if (pieces.length - 1 !== images.length) {
    throw new RangeError(`the prompt has ${pieces.length - 1} image markers but ${images.length} images were given`);
  }
  const tokenIds: number[] = rendered
    ? tokenizer.encode(pieces[0], { addSpecialTokens: false, parseSpecial: true })
    : tokenizer.encodePrompt(pieces[0]);
  const out: NativeImage[] = [];
  images.forEach((im, i) => {
    const layout = layoutOf(im.width, im.height);
    out.push({ data: im.data, width: im.width, height: im.height, position: tokenIds.length });
    for (const id of layout) tokenIds.push(id);
    const piece = pieces[i + 1];
    if (piece.length > 0) tokenIds.push(...tokenizer.encode(piece, { addSpecialTokens: false, parseSpecial: true }));
  });
  return { tokenIds, images: out };
}

/**
 * A prompt of token ids that already holds image placeholders (-1, one per embedding, as vLLM's
 * multi_modal_data prompts hold theirs) + the images: image k owns the next run of as many placeholders as it has
 * embeddings. The markers around them are the caller's (imageLayout gives the canonical ones).
 */
export function placeImages(ids: readonly number[], images: readonly RgbImage[],
  layoutOf: (width: number, height: number) => Int32Array): MultimodalPrompt {
  const out: NativeImage[] = [];
  let at = 0;
  images.forEach((im, k) => {
    let need = 0;
    for (const id of layoutOf(im.width, im.height)) need += id === -1 ? 1 : 0;
    while (at < ids.length && ids[at] !== -1) at++;
    const position = at;
    for (; need > 0 && at < ids.length; at++) if (ids[at] === -1) need--;
    if (need > 0) throw new RangeError(`image ${k} (${im.width}x${im.height}) needs more placeholders (-1) than the prompt has left`);
    out.push({ data: im.data, width: im.width, height: im.height, position });
  });
  return { tokenIds: [...ids], images: out };
}
