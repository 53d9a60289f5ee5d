// How an image becomes LFM2-VL encoder crops and prompt positions (docs/design/lfm2-vl.md, sections 4.4-4.9):
// the engine's own plan (native/vision/lfm2_plan.h, llama.cpp's arithmetic), read through the addon, in the
// shapes tools and tests use: the tile grid, the crops in encoder order, and the token layout (marker texts and
// runs of image embeddings). Pure arithmetic on the image size; no pixels.
// Invariant: one implementation (C++); every crop's sides are multiples of patchSize * scaleFactor.
import { loadNative, type NativeLfm2Plan } from '../native.js';

export interface Lfm2VisionParams {
  patchSize: number; // P, clip.vision.patch_size (16)
  scaleFactor: number; // s, clip.vision.projector.scale_factor (2)
  minTokens: number; // image_min_tokens (64)
  maxTokens: number; // image_max_tokens (256)
  tileSize: number; // 512
  minTiles: number; // 2
  maxTiles: number; // 10
}

export const LFM2_VISION_DEFAULTS: Lfm2VisionParams = {
  patchSize: 16, scaleFactor: 2, minTokens: 64, maxTokens: 256, tileSize: 512, minTiles: 2, maxTiles: 10,
};

export interface Lfm2Crop {
  source: 'image' | 'tile' | 'thumbnail';
  width: number; // pixels fed to the encoder
  height: number;
  tokens: number; // embeddings after pixel unshuffle
  marker: string | null; // the marker token before its embeddings (tiles: <|img_row_R_col_C|>; thumbnail: <|img_thumbnail|>)
  tile?: { row: number; col: number }; // 0-based, tiles only
}

export interface Lfm2ImagePlan {
  tiled: boolean;
  grid: { cols: number; rows: number } | null;
  refined: { width: number; height: number } | null; // tiled: the letterboxed image the tiles are cut from
  crops: Lfm2Crop[]; // encoder order = prompt order (tiles row-major, then the thumbnail)
  layout: (string | number)[]; // marker texts and runs of image embeddings (counts)
  embeddings: number;
  positions: number; // markers (one token each) + embeddings
}

function nativePlan(w: number, h: number, p: Partial<Lfm2VisionParams>): NativeLfm2Plan {
  return loadNative().lfm2ImagePlan(w, h, p);
}

/** llama.cpp's calc_size_preserved_ratio: the single-image or thumbnail size. */
export function lfm2ImageSize(w: number, h: number, p: Partial<Lfm2VisionParams> = {}): { width: number; height: number } {
  return nativePlan(w, h, p).imageSize;
}

/** llama.cpp's should_tile. */
export function lfm2ShouldTile(w: number, h: number, p: Partial<Lfm2VisionParams> = {}): boolean {
  return nativePlan(w, h, p).tiled;
}

/** The tile grid (cols x rows) whose aspect ratio is closest to the image's (never 1x1), tiled or not. */
export function lfm2TileGrid(w: number, h: number, p: Partial<Lfm2VisionParams> = {}): { cols: number; rows: number } {
  return nativePlan(w, h, p).bestGrid;
}

/** The whole plan for a w x h image. Throws a RangeError on a size that is not a positive integer. */
export function planLfm2Image(w: number, h: number, p: Partial<Lfm2VisionParams> = {}): Lfm2ImagePlan {
  if (!(Number.isInteger(w) && Number.isInteger(h) && w > 0 && h > 0)) {
    throw new RangeError(`image size must be positive integers (got ${w}x${h})`);
  }
  const n = nativePlan(w, h, p);
  const crops: Lfm2Crop[] = n.crops.map((c) => ({
    source: c.source, width: c.width, height: c.height, tokens: c.tokens, marker: c.marker,
    ...(c.source === 'tile' ? { tile: { row: c.row, col: c.col } } : {}),
  }));
  const layout: (string | number)[] = ['<|image_start|>'];
  for (const c of crops) {
    if (c.marker !== null) layout.push(c.marker);
    layout.push(c.tokens);
  }
  layout.push('<|image_end|>');
  return {
    tiled: n.tiled,
    grid: n.tiled ? { cols: n.cols, rows: n.rows } : null,
    refined: n.tiled ? { width: n.refinedWidth, height: n.refinedHeight } : null,
    crops, layout, embeddings: n.embeddings, positions: n.positions,
  };
}
