// Spindle's multimodal path against llama.cpp's on the generated LFM2-VL fixture, for an image smaller than the
// minimum token count (40x30, upscaled), a 256x256 one (as is), an 800x600 one (shrunk) and one large enough to
// tile (1200x900: 3x2 letterboxed tiles + thumbnail).
// 1. Against current llama.cpp (the source node-llama-cpp bundles; docs/design/lfm2-vl.md follows it): goldens
//    from its whole mtmd path (test/fixtures/vision/llama-mtmd-golden.cpp: preprocessing, clip encoder, text
//    model) on the same raw pixels: the same prompt layout (markers and image positions), image embeddings within
//    EMBD_TOL of their scale, the log-probabilities of its top-32 next tokens within LOGPROB_TOL, and the same
//    greedy continuation up to the first near-tie. llama.cpp rounds pixels to f16 for the patch embedding and
//    evaluates GELU through an f16 table (the encoder alone agrees to ~1e-3, vision-encoder-conformance.test.ts).
// 2. Against the runtime reference @fugood/llama.node 1.7.15 (test/helpers/llama-node.ts): its older llama.cpp
//    adds <|img_thumbnail|> before a single image and resamples differently, so logits are compared where the
//    pixels need no resampling (256x256), on llama.node's own layout given to Spindle as token ids + the image
//    (vLLM's multi_modal_data with prompt_token_ids). Layouts of tiled images: test/vision-llama-node.test.ts.
import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LLM } from '../lib/llm.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureVisionModel } from './helpers/fixtures.js';
import { MEDIA_MARKER, llamaNodeUnavailable, openLlamaNodeVision } from './helpers/llama-node.js';
import { compareTop, greedyAgreementNeeded } from './helpers/vision-compare.js';
import { GOLDEN_IMAGES, goldenSeed, patternPngFile, patternRgb } from './helpers/vision-images.js';

const EMBD_TOL = 3e-3; // of the largest |value| of the image's embeddings
// nats. Measured 1.4e-2 .. 5.3e-2: the text part alone agrees to 1e-3 in the logits (forward-conformance-lfm2), the
// image embeddings to ~1.5e-3 of their scale (llama.cpp's f16 pixels and GELU table), which this random-weight
// model (no trained robustness) carries into the logits after the image.
const LOGPROB_TOL = 0.08;
const PROMPT = `Describe ${MEDIA_MARKER} briefly.`;

const goldens = fileURLToPath(new URL('./fixtures/vision/', import.meta.url));
const manifest = JSON.parse(readFileSync(join(goldens, 'mtmd-lfm2-vl-tiny.manifest.json'), 'utf8')) as { model: { sha256: string }; mmproj: { sha256: string } };
const fx = await fixtureVisionModel('lfm2VlTiny');
const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
const dir = mkdtempSync(join(tmpdir(), 'spindle-vision-conf-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const llm = new LLM({ model: fx.model, maxModelLen: 4096 });
t.teardown(() => llm.close());
await llm.ready();
const tok = llm.tokenizer;
const [before, after] = PROMPT.split(MEDIA_MARKER);

const png = (w: number, h: number): Promise<string> => patternPngFile(dir, w, h, goldenSeed(w, h));

t.test('against current llama.cpp (goldens from its mtmd path)', async (t) => {
  t.equal(sha(fx.model), manifest.model.sha256, 'the fixture model is the one the goldens were made with (else regenerate them: README.md)');
  t.equal(sha(fx.mmproj), manifest.mmproj.sha256, 'the fixture mmproj likewise');
  for (const [w, h] of GOLDEN_IMAGES) {
    t.test(`${w}x${h}`, async (t) => {
      const g = JSON.parse(readFileSync(join(goldens, `mtmd-lfm2-vl-tiny-${w}x${h}.json`), 'utf8')) as { layout: number[]; top: [number, number][]; greedy: number[] };
      const ours = [...tok.encodePrompt(before), ...llm.imageLayout(w, h), ...tok.encode(after, { addSpecialTokens: false })];
      t.same(ours, g.layout, `the same prompt layout (${g.layout.filter((x) => x === -1).length} image embeddings)`);

      const ref = new Float32Array(Uint8Array.from(readFileSync(join(goldens, `mtmd-lfm2-vl-tiny-${w}x${h}.embd.f32`))).buffer);
      const mine = debugAddon().encodeImage(fx.mmproj, patternRgb(w, h, goldenSeed(w, h)), w, h, 2);
      t.equal(mine.length, ref.length, 'as many embedding values');
      let scale = 0, worst = 0;
      for (let i = 0; i < ref.length; i++) {
        scale = Math.max(scale, Math.abs(ref[i]));
        worst = Math.max(worst, Math.abs(ref[i] - mine[i]));
      }
      t.ok(worst <= EMBD_TOL * scale, `image embeddings: max |diff| ${worst.toExponential(2)} of max |value| ${scale.toFixed(3)}`);

      const image = await png(w, h);
      const [out] = await llm.generate({ prompt: PROMPT, multiModalData: { image } }, { temperature: 0, maxTokens: 8, ignoreEos: true, logprobs: 20 });
      t.same(out.promptTokenIds, g.layout, 'the text + image prompt goes through the same layout');
      const lps = out.outputs[0].logprobs!;
      compareTop(t, lps[0], g.top, 'next token after the image', LOGPROB_TOL, 12);
      const ids = out.outputs[0].tokenIds;
      let agree = 0;
      while (agree < g.greedy.length && ids[agree] === g.greedy[agree]) agree++;
      const need = greedyAgreementNeeded(lps, g.greedy.length);
      t.ok(agree >= need, `greedy: ${agree} of ${g.greedy.length} tokens agree (${need} required before a near-tie)`);
    });
  }
});

const unavailable = await llamaNodeUnavailable();

t.test('against llama.node 1.7.15 at run time (256x256: no resampling)', { skip: unavailable ?? false }, async (t) => {
  const ln = await openLlamaNodeVision(fx.model, fx.mmproj, { threads: 2 });
  t.teardown(() => ln.close());
  const image = await png(256, 256);
  const layout = await ln.layoutOf(PROMPT, [image]);
  t.equal(layout.filter((x) => x === -1).length, 64);
  const top = await ln.nextTokenTopK(PROMPT, [image], 8);
  const [out] = await llm.generate({ promptTokenIds: layout, multiModalData: { image } }, { temperature: 0, maxTokens: 8, ignoreEos: true, logprobs: 20 });
  const lps = out.outputs[0].logprobs!;
  compareTop(t, lps[0], top.filter((x) => x.id !== null).map((x) => [x.id!, x.logprob]), 'next token on llama.node\'s layout', LOGPROB_TOL, 12);
  const g = await ln.greedy(PROMPT, [image], 8);
  const ids = out.outputs[0].tokenIds;
  let agree = 0;
  while (agree < g.tokens.length && ids[agree] === g.tokens[agree]) agree++;
  const need = greedyAgreementNeeded(lps, g.tokens.length);
  t.ok(agree >= need, `greedy: ${agree} of ${g.tokens.length} tokens agree (${need} required before a near-tie)`);
});
