// How an image becomes LFM2-VL encoder crops and prompt positions, as llama.cpp's mtmd does for the `lfm2`
// projector (docs/design/lfm2-vl.md, sections 4.4-4.9): whether it is tiled, the tile grid, the letterboxed
// "refined" image the tiles are cut from, each crop's size, patch grid and token count, and the token layout
// (marker tokens and embedding runs). Pure arithmetic on the image size; no pixels.
// Invariant: float math where llama.cpp uses float (Math.fround), double where it uses double, and its two
// rounding rules (should_tile: halves to even; the size rule: halves away from zero); every crop's sides are
// multiples of patchSize * scaleFactor, so tokens = (width / (P*s)) * (height / (P*s)).

export interface Lfm2VisionParams {
  patchSize: number; // P, clip.vision.patch_size (16)
  scaleFactor: number; // s, clip.vision.projector.scale_factor (2): pixel-unshuffle factor
  minPixels: number; // image_min_tokens * (P*s)^2 (64 tokens: 65536)
  maxPixels: number; // image_max_tokens * (P*s)^2 (256 tokens: 262144)
  tileSize: number; // 512
  minTiles: number; // 2
  maxTiles: number; // 10
}

export const LFM2_VISION_DEFAULTS: Lfm2VisionParams = {
  patchSize: 16, scaleFactor: 2, minPixels: 64 * 32 * 32, maxPixels: 256 * 32 * 32, tileSize: 512, minTiles: 2, maxTiles: 10,
};

export interface Lfm2Crop {
  width: number; // pixels fed to the encoder
  height: number;
  patchesX: number; // width / P
  patchesY: number;
  tokens: number; // embeddings after pixel unshuffle: (width / (P*s)) * (height / (P*s))
  marker: string | null; // the marker token before its embeddings (tiles: <|img_row_R_col_C|>; thumbnail: <|img_thumbnail|>)
  source: 'image' | 'tile' | 'thumbnail';
  tile?: { row: number; col: number }; // 0-based, tiles only: the crop at (col * tileSize, row * tileSize) of the refined image
}

export interface Lfm2ImagePlan {
  tiled: boolean;
  grid: { cols: number; rows: number } | null;
  /** Tiled: the original letterboxed (aspect kept, black bars centred) into cols*tile x rows*tile pixels. */
  refined: { width: number; height: number; pasteX: number; pasteY: number; pasteWidth: number; pasteHeight: number } | null;
  crops: Lfm2Crop[]; // encoder order = prompt order (tiles row-major, then the thumbnail)
  /** The prompt positions: marker token texts and runs of image embeddings (counts). */
  layout: (string | number)[];
  positions: number; // markers (one token each) + embeddings
}

const f = Math.fround;

/** llama.cpp's calc_size_preserved_ratio in float, align = P*s: the single-image or thumbnail size. */
export function lfm2ImageSize(w: number, h: number, p: Lfm2VisionParams = LFM2_VISION_DEFAULTS): { width: number; height: number } {
  const align = p.patchSize * p.scaleFactor;
  const roundBy = (x: number) => Math.round(f(x / align)) * align; // positive: Math.round = half away from zero
  const ceilBy = (x: number) => Math.ceil(f(x / align)) * align;
  const floorBy = (x: number) => Math.floor(f(x / align)) * align;
  let width = Math.max(align, roundBy(w));
  let height = Math.max(align, roundBy(h));
  if (width * height > p.maxPixels) {
    const beta = f(Math.sqrt(f(f(h * w) / p.maxPixels)));
    height = Math.max(align, floorBy(f(h / beta)));
    width = Math.max(align, floorBy(f(w / beta)));
  } else if (width * height < p.minPixels) {
    const beta = f(Math.sqrt(f(p.minPixels / f(h * w))));
    height = ceilBy(f(h * beta));
    width = ceilBy(f(w * beta));
  }
  return { width, height };
}

/** Round half to even (C's nearbyint in the default rounding mode). */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** llama.cpp's should_tile: the image, rounded to the alignment in double, is over twice the pixel budget. */
export function lfm2ShouldTile(w: number, h: number, p: Lfm2VisionParams = LFM2_VISION_DEFAULTS): boolean {
  const align = p.patchSize * p.scaleFactor;
  const rb = (x: number) => roundHalfEven(x / align) * align;
  const hBar = Math.max(p.patchSize, rb(h));
  const wBar = Math.max(p.patchSize, rb(w));
  return hBar * wBar > p.maxPixels * 2.0;
}

/** The tile grid (cols x rows) whose aspect ratio is closest to the image's; never 1x1. */
export function lfm2TileGrid(w: number, h: number, p: Lfm2VisionParams = LFM2_VISION_DEFAULTS): { cols: number; rows: number } {
  const seen = new Set<string>();
  const candidates: [number, number][] = [];
  for (let n = p.minTiles; n <= p.maxTiles; ++n) {
    for (let gw = 1; gw <= n; ++gw) {
      for (let gh = 1; gh <= n; ++gh) {
        const area = gw * gh;
        if (area < p.minTiles || area > p.maxTiles || seen.has(`${gw}x${gh}`)) continue;
        seen.add(`${gw}x${gh}`);
        candidates.push([gw, gh]);
      }
    }
  }
  // llama.cpp sorts by area with std::sort (unspecified order within an area); ties below need an exact float
  // tie of the ratio distance, which equal areas do not produce for the default limits.
  candidates.sort((a, b) => a[0] * a[1] - b[0] * b[1]);
  const ar = f(w / h);
  let best = candidates[0];
  let bestDiff = Infinity;
  for (const [gw, gh] of candidates) {
    const diff = f(Math.abs(f(ar - f(gw / gh))));
    if (diff < bestDiff) {
      bestDiff = diff;
      best = [gw, gh];
    } else if (diff === bestDiff && f(w * h) > 0.5 * p.tileSize * p.tileSize * gw * gh) {
      best = [gw, gh];
    }
  }
  return { cols: best[0], rows: best[1] };
}

function crop(width: number, height: number, p: Lfm2VisionParams, source: Lfm2Crop['source'], marker: string | null): Lfm2Crop {
  const align = p.patchSize * p.scaleFactor;
  return {
    width, height, patchesX: width / p.patchSize, patchesY: height / p.patchSize,
    tokens: (width / align) * (height / align), marker, source,
  };
}

/** The whole plan for a w x h image (pixels, after EXIF-free decoding as llama.cpp does). */
export function planLfm2Image(w: number, h: number, p: Lfm2VisionParams = LFM2_VISION_DEFAULTS): Lfm2ImagePlan {
  if (!(Number.isInteger(w) && Number.isInteger(h) && w > 0 && h > 0)) {
    throw new RangeError(`image size must be positive integers (got ${w}x${h})`);
  }
  const size = lfm2ImageSize(w, h, p);
  if (!lfm2ShouldTile(w, h, p)) {
    const c = crop(size.width, size.height, p, 'image', null);
    return { tiled: false, grid: null, refined: null, crops: [c], layout: ['<|image_start|>', c.tokens, '<|image_end|>'], positions: c.tokens + 2 };
  }
  const grid = lfm2TileGrid(w, h, p);
  const tw = grid.cols * p.tileSize, th = grid.rows * p.tileSize;
  const scale = Math.min(f(tw / w), f(th / h));
  const pw = Math.min(Math.ceil(f(w * scale)), tw), ph = Math.min(Math.ceil(f(h * scale)), th);
  const refined = { width: tw, height: th, pasteX: Math.trunc((tw - pw) / 2), pasteY: Math.trunc((th - ph) / 2), pasteWidth: pw, pasteHeight: ph };
  const crops: Lfm2Crop[] = [];
  const layout: (string | number)[] = ['<|image_start|>'];
  for (let row = 0; row < grid.rows; ++row) {
    for (let col = 0; col < grid.cols; ++col) {
      const marker = `<|img_row_${row + 1}_col_${col + 1}|>`;
      const c = { ...crop(p.tileSize, p.tileSize, p, 'tile', marker), tile: { row, col } };
      crops.push(c);
      layout.push(marker, c.tokens);
    }
  }
  const thumb = crop(size.width, size.height, p, 'thumbnail', '<|img_thumbnail|>');
  crops.push(thumb);
  layout.push('<|img_thumbnail|>', thumb.tokens, '<|image_end|>');
  const positions = layout.reduce<number>((n, x) => n + (typeof x === 'number' ? x : 1), 0);
  return { tiled: true, grid, refined, crops, layout, positions };
}
