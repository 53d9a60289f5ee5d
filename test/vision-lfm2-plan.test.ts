// The LFM2-VL image plan (the engine's, native/vision/lfm2_plan.cpp, through the addon) against the worked examples of docs/design/lfm2-vl.md (values llama.cpp's mtmd
// preprocessor gives, including tests/test-mtmd-impl.cpp's tiling cases): tiling threshold, tile grid,
// letterbox, thumbnail / single-image size, tokens per crop and the marker layout.
import t from 'tap';
import { lfm2ImageSize, lfm2ShouldTile, lfm2TileGrid, planLfm2Image } from '../lib/vision/lfm2-plan.js';

t.test('256x256: one image of 64 tokens between start and end markers', async (t) => {
  const p = planLfm2Image(256, 256);
  t.equal(p.tiled, false);
  t.match(p.crops, [{ width: 256, height: 256, tokens: 64, marker: null, source: 'image' }]);
  t.same(p.layout, ['<|image_start|>', 64, '<|image_end|>']);
  t.equal(p.positions, 66);
});

t.test('1200x900: 3x2 tiles letterboxed from 1366x1024, then a 576x416 thumbnail; 1779 positions', async (t) => {
  const p = planLfm2Image(1200, 900);
  t.equal(p.tiled, true);
  t.same(p.grid, { cols: 3, rows: 2 });
  t.same(p.refined, { width: 1536, height: 1024 });
  t.equal(p.crops.length, 7);
  for (const c of p.crops.slice(0, 6)) t.match(c, { width: 512, height: 512, tokens: 256, source: 'tile' });
  t.match(p.crops[6], { width: 576, height: 416, tokens: 234, marker: '<|img_thumbnail|>', source: 'thumbnail' });
  t.same(p.layout, [
    '<|image_start|>',
    '<|img_row_1_col_1|>', 256, '<|img_row_1_col_2|>', 256, '<|img_row_1_col_3|>', 256,
    '<|img_row_2_col_1|>', 256, '<|img_row_2_col_2|>', 256, '<|img_row_2_col_3|>', 256,
    '<|img_thumbnail|>', 234, '<|image_end|>',
  ]);
  t.equal(p.positions, 1779);
});

t.test('more sizes run through llama.cpp: single / tiled and the resulting sizes', async (t) => {
  t.same(lfm2ImageSize(400, 400), { width: 416, height: 416 });
  t.equal(planLfm2Image(400, 400).crops[0].tokens, 169);
  const a = planLfm2Image(1024, 977);
  t.same(a.grid, { cols: 2, rows: 2 });
  t.match(a.crops.at(-1), { width: 512, height: 480, tokens: 240 });
  t.same(a.refined, { width: 1024, height: 1024 });
  const b = planLfm2Image(2048, 512);
  t.same(b.grid, { cols: 4, rows: 1 });
  t.match(b.crops.at(-1), { width: 1024, height: 256, tokens: 256 });
  t.match(planLfm2Image(720, 720), { tiled: false, crops: [{ width: 512, height: 512, tokens: 256 }] });
  // tests/test-mtmd-impl.cpp: 704x704 single, 720x720 single (22.5 rounds to even), 736x736 tiled, 1024x977 tiled, 1056x384 single
  t.same([[704, 704], [720, 720], [736, 736], [1024, 977], [1056, 384]].map(([w, h]) => lfm2ShouldTile(w, h)), [false, false, true, true, false]);
});

t.test('grids are never 1x1 and stay within 10 tiles; very wide images get 10x1', async (t) => {
  t.same(lfm2TileGrid(5000, 400), { cols: 10, rows: 1 });
  t.same(lfm2TileGrid(400, 5000), { cols: 1, rows: 10 });
  for (const [w, h] of [[1000, 1000], [3000, 1000], [1000, 1700], [4000, 3000]]) {
    const g = lfm2TileGrid(w, h);
    t.ok(g.cols * g.rows >= 2 && g.cols * g.rows <= 10, `${w}x${h}: ${g.cols}x${g.rows}`);
  }
});

t.test('a small image is upscaled to the minimum; every crop is a multiple of 32 pixels', async (t) => {
  for (const [w, h] of [[10, 10], [100, 50], [33, 900], [3000, 40], [640, 480], [1920, 1080]]) {
    const p = planLfm2Image(w, h);
    for (const c of p.crops) {
      t.ok(c.width % 32 === 0 && c.height % 32 === 0 && c.tokens >= 1, `${w}x${h}: crop ${c.width}x${c.height}`);
      if (c.source !== 'tile') t.ok(c.width * c.height <= 262144 || c.width === 32 || c.height === 32, `${w}x${h}: within the pixel budget`);
    }
  }
  t.ok(planLfm2Image(10, 10).crops[0].tokens >= 64, 'at least the minimum token count');
  t.throws(() => planLfm2Image(0, 10), RangeError);
});
