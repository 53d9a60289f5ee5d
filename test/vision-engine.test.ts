// Images through the offline APIs on the generated LFM2-VL fixture: the prompt layout (markers and one -1 per
// image embedding, from the engine's plan), LLM.chat batches mixing text-only and image conversations, batch
// and chunking invariance with images (an image request gives the same greedy tokens alone, batched, and with
// its prompt prefilled in small chunks, and is encoded exactly once), Engine.generate imageData (Buffer, path,
// data URL, `<image>` markers), an mmproj found beside the model, and the errors (a corrupt image, a count
// mismatch, images for a text-only model).
import t from 'tap';
import { mkdtempSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { LLM } from '../lib/llm.js';
import { Engine } from '../lib/engine.js';
import { fixtureVisionModel } from './helpers/fixtures.js';

const fx = await fixtureVisionModel('lfm2VlTiny');
const ids = fx.imageTokenIds;

/** A deterministic test picture: gradients and a few blocks (distinct per seed). */
async function picture(width: number, height: number, seed: number, format: 'png' | 'jpeg' = 'png'): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      raw[i] = (x * 255 / width + seed * 40) & 255;
      raw[i + 1] = (y * 255 / height + seed * 90) & 255;
      raw[i + 2] = ((x >> 5) + (y >> 5) + seed) % 2 ? 220 : 30;
    }
  }
  const img = sharp(raw, { raw: { width, height, channels: 3 } });
  return format === 'png' ? img.png().toBuffer() : img.jpeg({ quality: 90 }).toBuffer();
}

const dataUrl = (b: Buffer, mime = 'image/png'): string => `data:${mime};base64,${b.toString('base64')}`;
const greedy = { temperature: 0, maxTokens: 6, ignoreEos: true };

const small = await picture(256, 256, 1);
const wide = await picture(800, 600, 2, 'jpeg');
const tiled = await picture(1200, 900, 3);

const llm = new LLM({ model: fx.model, maxModelLen: 4096 });
t.teardown(() => llm.close());
await llm.ready();

t.test('the mmproj beside the model is found; the layout has the markers and one -1 per embedding', async (t) => {
  t.equal(llm.modelInfo.mmproj, fx.mmproj);
  const [out] = await llm.chat([{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(small) } }, { type: 'text', text: 'Describe.' }] }], greedy);
  const p = out.promptTokenIds;
  const start = p.indexOf(ids['<|image_start|>']);
  t.ok(start >= 0, 'image_start present');
  t.same(p.slice(start + 1, start + 65), new Array(64).fill(-1), '256x256: 64 embeddings');
  t.equal(p[start + 65], ids['<|image_end|>']);
  t.equal(p.filter((x) => x === -1).length, 64);
  t.equal(out.outputs[0].tokenIds.length, 6);
});

t.test('a 1200x900 image tiles into 3x2 + thumbnail (1779 positions)', async (t) => {
  const [out] = await llm.chat([{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(tiled) } }, { type: 'text', text: 'What?' }] }], greedy);
  const p = out.promptTokenIds;
  const start = p.indexOf(ids['<|image_start|>']);
  const end = p.indexOf(ids['<|image_end|>']);
  t.equal(end - start + 1, 1779);
  t.equal(p.filter((x) => x === -1).length, 6 * 256 + 234);
  for (const m of ['<|img_row_1_col_1|>', '<|img_row_2_col_3|>', '<|img_thumbnail|>']) t.ok(p.includes(ids[m]), m);
});

t.test('batch invariance and chunked prefill with images; each image encoded once', async (t) => {
  const conv = (url: string, text: string) => [{ role: 'user' as const, content: [{ type: 'text' as const, text }, { type: 'image_url' as const, image_url: { url } }] }];
  const before = llm.stats().imagesEncoded;
  const [alone] = await llm.chat(conv(dataUrl(wide, 'image/jpeg'), 'Look at this.'), greedy);
  t.equal(llm.stats().imagesEncoded - before, 1);
  const batch = await llm.chat([
    [{ role: 'user', content: 'Only text here.' }],
    conv(dataUrl(small), 'Another one.'),
    conv(dataUrl(wide, 'image/jpeg'), 'Look at this.'),
    [{ role: 'user', content: 'More text.' }],
  ], greedy);
  t.same(batch[2].outputs[0].tokenIds, alone.outputs[0].tokenIds, 'same tokens batched with text-only and image requests');
  t.same(batch[2].promptTokenIds, alone.promptTokenIds);
  t.not(batch[1].outputs[0].tokenIds.join(), '', 'the other image request ran');
  const chunked = new LLM({ model: fx.model, maxModelLen: 4096, chunkedPrefillSize: 16, maxNumBatchedTokens: 64 });
  t.teardown(() => chunked.close());
  const [c] = await chunked.chat(conv(dataUrl(wide, 'image/jpeg'), 'Look at this.'), greedy);
  t.same(c.outputs[0].tokenIds, alone.outputs[0].tokenIds, 'same tokens when the prompt is prefilled 16 tokens at a time');
  t.equal(chunked.stats().imagesEncoded, 1, 'encoded once across its chunks');
});

t.test('Engine.generate takes imageData as a Buffer, a path or a data URL, with <image> markers', async (t) => {
  const engine = new Engine({ modelPath: fx.model, contextLength: 4096 });
  t.teardown(() => engine.shutdown());
  const dir = mkdtempSync(join(tmpdir(), 'spindle-vision-'));
  const file = join(dir, 'a.png');
  writeFileSync(file, small);
  const viaBuffer = await engine.generate({ prompt: 'Caption: <image> is', imageData: small, samplingParams: greedy }) as { outputIds: number[]; metaInfo: { promptTokens: number } };
  const viaPath = await engine.generate({ prompt: 'Caption: <image> is', imageData: file, samplingParams: greedy }) as { outputIds: number[] };
  const viaUrl = await engine.generate({ prompt: 'Caption: <image> is', imageData: [dataUrl(small)], samplingParams: greedy }) as { outputIds: number[] };
  t.same(viaPath.outputIds, viaBuffer.outputIds);
  t.same(viaUrl.outputIds, viaBuffer.outputIds);
  t.ok(viaBuffer.metaInfo.promptTokens > 66);
  const batch = await engine.generate({ prompt: ['<image><image> two', 'none'], imageData: [[small, wide], null], samplingParams: greedy }) as unknown[];
  t.equal(batch.length, 2);
  await t.rejects(engine.generate({ prompt: '<image> and <image>', imageData: small, samplingParams: greedy }), /2 image markers but 1 images/);
  await t.rejects(engine.generate({ prompt: 'x', imageData: Buffer.from('not an image at all'), samplingParams: greedy }), { name: 'ImageInputError', code: 'corrupt' });
  await t.rejects(engine.generate({ inputIds: [1, 2, 3], imageData: small, samplingParams: greedy }), /needs more placeholders/);
  // Token ids holding the placeholders (any markers around them): the same answer as the text prompt when the
  // ids are the text prompt's own.
  const layout = engine.imageLayout(256, 256);
  t.equal(layout.filter((x) => x === -1).length, 64);
  const text = await engine.generate({ prompt: 'Caption: <image> is', imageData: small, samplingParams: { ...greedy, maxTokens: 1 } }) as { outputIds: number[] };
  const tok = engine.tokenizer;
  const asIds = [...tok.encodePrompt('Caption: '), ...layout, ...tok.encode(' is', { addSpecialTokens: false })];
  const viaIds = await engine.generate({ inputIds: asIds, imageData: small, samplingParams: { ...greedy, maxTokens: 1 } }) as { outputIds: number[] };
  t.same(viaIds.outputIds, text.outputIds);
  await t.rejects(engine.generate({ inputIds: [...asIds, -1], imageData: small, samplingParams: greedy }), /holds 65 placeholders/);
});

t.test('a text-only model refuses images by name; mmproj: false turns vision off', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'spindle-vision-text-'));
  const model = join(dir, 'model.gguf');
  copyFileSync(fx.model, model);
  const text = new LLM({ model, maxModelLen: 512 });
  t.teardown(() => text.close());
  await text.ready();
  t.equal(text.modelInfo.mmproj, null);
  await t.rejects(text.chat([{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(small) } }] }], greedy), /no vision encoder/);
  const off = new LLM({ model: fx.model, maxModelLen: 512, mmproj: false });
  t.teardown(() => off.close());
  await off.ready();
  t.equal(off.modelInfo.mmproj, null);
  const engine = new Engine({ modelPath: model, contextLength: 512 });
  t.teardown(() => engine.shutdown());
  await t.rejects(engine.generate({ prompt: '<image>', imageData: small }), /does not take images/);
});
