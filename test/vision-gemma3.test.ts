// Gemma 3 vision (a "gemma3" mmproj beside a gemma3 text model) on the generated fixture gemma3VisionTiny: SigLIP
// at a fixed 64x64 (patch 8), embeddings average-pooled 2x2, RMS-normed and projected: 16 per image, which attend to
// each other both ways in the text model (a run longer than its sliding window of 8).
//  - the layout: "\n\n" <start_of_image> 16 embeddings <end_of_image> "\n\n" (Hugging Face's processor, Ollama) for
//    any image size (letterboxed into the square); images take no image_min / max_tokens;
//  - against llama.cpp at run time (@fugood/llama.node 1.7.15's mtmd, which decodes Gemma 3's image embeddings with
//    causal attention off): on llama.node's own layout (<start_of_image> embeddings <end_of_image>, given to Spindle
//    as token ids + the image), the log-probabilities of its top next tokens and its greedy continuation, for a 64x64
//    image (no resampling: llama.node resamples differently from current llama.cpp). Measured: max |diff| 7.8e-3
//    nats, every greedy token; with Spindle's image embeddings made causal for the experiment, 0.61 and 1.06 nats
//    and 1 / 0 of 8 greedy tokens, so the comparison depends on the bidirectional attention;
//  - chunked prefill never splits the embeddings (a chunk size of 4 gives the bits of a whole prompt), and a batch
//    of several requests gives each its own answer;
//  - the server: the openai client's image_url, Ollama's images on /api/chat and /api/generate.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { LLM } from '../lib/llm.js';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureVisionModel } from './helpers/fixtures.js';
import { MEDIA_MARKER, llamaNodeUnavailable, openLlamaNodeVision } from './helpers/llama-node.js';
import { compareTop, greedyAgreementNeeded } from './helpers/vision-compare.js';
import { patternPng, patternPngFile } from './helpers/vision-images.js';

// nats. The text layers alone agree with llama.cpp to ~2.5e-2 in the logits (forward-conformance-gemma3: its
// f16-table gelu); the encoder adds llama.cpp's f16 pixels / gelu table differences (~1e-3 of the embeddings' scale).
const LOGPROB_TOL = 0.08;
const PROMPT = `Describe ${MEDIA_MARKER} briefly.`;
const N_EMBD_TOKENS = 16;

const fx = await fixtureVisionModel('gemma3VisionTiny');
const dir = mkdtempSync(join(tmpdir(), 'spindle-gemma3-vision-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const llm = new LLM({ model: fx.model, maxModelLen: 1024 });
t.teardown(() => llm.close());
await llm.ready();
const tok = llm.tokenizer;
const [before, after] = PROMPT.split(MEDIA_MARKER);
const id = (text: string): number => {
  const ids = tok.encode(text, { addSpecialTokens: false, parseSpecial: true });
  if (ids.length !== 1) throw new Error(`${JSON.stringify(text)} is ${ids.length} tokens`);
  return ids[0];
};

const png = (w: number, h: number, seed = w + h): Promise<string> => patternPngFile(dir, w, h, seed);

t.test('the layout: "\\n\\n" <start_of_image> 16 embeddings <end_of_image> "\\n\\n", whatever the size', async (t) => {
  const canonical = [id('\n\n'), id('<start_of_image>'), ...Array<number>(N_EMBD_TOKENS).fill(-1), id('<end_of_image>'), id('\n\n')];
  for (const [w, h] of [[64, 64], [100, 40], [7, 300], [1000, 1000]]) t.same(llm.imageLayout(w, h), canonical, `${w}x${h}`);
  t.equal(llm.modelInfo.mmproj, fx.mmproj, 'the mmproj beside the model was found');
  const image = await png(100, 40);
  const [out] = await llm.generate({ prompt: PROMPT, multiModalData: { image } }, { temperature: 0, maxTokens: 2, ignoreEos: true });
  t.same(out.promptTokenIds, [...tok.encodePrompt(before), ...canonical, ...tok.encode(after, { addSpecialTokens: false })],
    'a raw prompt puts it where the marker was');
  const limited = new LLM({ model: fx.model, imageMaxTokens: 64 });
  t.teardown(() => limited.close());
  await t.rejects(limited.ready(), /a gemma3 image is always 16 tokens/, 'image token limits are refused by name (they are lfm2 rules)');
  const small = new LLM({ model: fx.model, maxNumBatchedTokens: 8 });
  t.teardown(() => small.close());
  await t.rejects(small.ready(), /maxNumBatchedTokens 8 is below an image's 16 embeddings/, 'a step budget smaller than an image is refused at load');
});

t.test('a chat with an image part: Gemma 3\'s template around the image layout', async (t) => {
  const png64 = await patternPng(48, 80, 7);
  const url = `data:image/png;base64,${png64.toString('base64')}`;
  const [out] = await llm.chat([{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'What is it?' }] }],
    { temperature: 0, maxTokens: 3, ignoreEos: true });
  const ids = out.promptTokenIds;
  const at = ids.indexOf(-1);
  t.equal(ids.filter((x) => x === -1).length, N_EMBD_TOKENS, 'one image: 16 placeholders');
  t.same(ids.slice(at - 2, at), [id('\n\n'), id('<start_of_image>')], 'after "\\n\\n" <start_of_image>');
  t.same(ids.slice(at + N_EMBD_TOKENS, at + N_EMBD_TOKENS + 2), [id('<end_of_image>'), id('\n\n')], 'then <end_of_image> "\\n\\n"');
  t.match(tok.decode(ids.slice(0, at - 2), { skipSpecialTokens: false }), /<start_of_turn>user\n$/, 'inside the user turn of the file\'s template');
  t.equal(out.outputs[0].tokenIds.length, 3);
});

t.test('chunked prefill keeps the embeddings in one step: the same bits as a whole prompt; batches keep each answer', async (t) => {
  const chunked = new LLM({ model: fx.model, maxModelLen: 1024, chunkedPrefillSize: 4, maxNumBatchedTokens: 24 });
  t.teardown(() => chunked.close());
  const images = [await png(64, 64, 1), await png(90, 50, 2), await png(64, 64, 3)];
  const params = { temperature: 0, maxTokens: 6, ignoreEos: true, logprobs: 5 };
  const whole = [];
  for (const image of images) whole.push((await llm.generate({ prompt: PROMPT, multiModalData: { image } }, params))[0].outputs[0]);
  const batch = await chunked.generate(images.map((image) => ({ prompt: PROMPT, multiModalData: { image } })), params);
  for (let i = 0; i < images.length; i++) {
    t.same(batch[i].outputs[0].tokenIds, whole[i].tokenIds, `image ${i}: the same tokens`);
    t.same(batch[i].outputs[0].logprobs, whole[i].logprobs, `image ${i}: the same logprobs, bit for bit`);
  }
  t.notSame(whole[0].logprobs, whole[2].logprobs, 'different images give different answers');
});

t.test('through the server: the openai client\'s image_url and Ollama\'s images give the answers LLM.chat gives', async (t) => {
  const app = await buildApp({ engine: normalizeEngineOptions({ model: fx.model, maxModelLen: 1024, threads: 2 }, 'serve'), servedModelNames: ['g3'] });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const image = await patternPng(80, 48, 11);
  const url = `data:image/png;base64,${image.toString('base64')}`;
  const content = [{ type: 'text' as const, text: 'What is it?' }, { type: 'image_url' as const, image_url: { url } }];
  const [offline] = await llm.chat([{ role: 'user', content }], { temperature: 0, maxTokens: 4, ignoreEos: true });
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const r = await openai.chat.completions.create({ model: 'g3', messages: [{ role: 'user', content }], temperature: 0, max_tokens: 4 });
  t.equal(r.choices[0].message.content, offline.outputs[0].text, 'the same greedy answer');
  t.equal(r.usage?.prompt_tokens, offline.promptTokenIds.length, `usage counts the image's ${N_EMBD_TOKENS + 4} positions`);
  const ollama = new Ollama({ host: base });
  const c = await ollama.chat({ model: 'g3', messages: [{ role: 'user', content: 'What is it?', images: [image] }], options: { temperature: 0, num_predict: 4 } });
  t.ok(c.done && c.prompt_eval_count! > N_EMBD_TOKENS, `/api/chat: ${c.prompt_eval_count} prompt tokens with the image`);
  const g = await ollama.generate({ model: 'g3', prompt: 'What is it?', images: [image], options: { temperature: 0, num_predict: 4 } });
  t.ok(g.done && g.prompt_eval_count! > N_EMBD_TOKENS, `/api/generate: ${g.prompt_eval_count} prompt tokens with the image`);
});

const unavailable = await llamaNodeUnavailable();

t.test('against llama.node 1.7.15 at run time (64x64: no resampling)', { skip: unavailable ?? false }, async (t) => {
  const ln = await openLlamaNodeVision(fx.model, fx.mmproj, { threads: 2 });
  t.teardown(() => ln.close());
  for (const seed of [5, 9]) {
    const image = await png(64, 64, seed);
    const layout = await ln.layoutOf(PROMPT, [image]);
    t.equal(layout.filter((x) => x === -1).length, N_EMBD_TOKENS, `seed ${seed}: llama.node makes ${N_EMBD_TOKENS} embeddings`);
    const at = layout.indexOf(-1);
    t.same([layout[at - 1], layout[at + N_EMBD_TOKENS]], [id('<start_of_image>'), id('<end_of_image>')], 'between its image markers');
    const top = await ln.nextTokenTopK(PROMPT, [image], 8);
    const [out] = await llm.generate({ promptTokenIds: layout, multiModalData: { image } }, { temperature: 0, maxTokens: 8, ignoreEos: true, logprobs: 20 });
    const lps = out.outputs[0].logprobs!;
    compareTop(t, lps[0], top.filter((x) => x.id !== null).map((x) => [x.id!, x.logprob]), `seed ${seed}: next token on llama.node's layout`, LOGPROB_TOL, 6);
    const g = await ln.greedy(PROMPT, [image], 8);
    const ids = out.outputs[0].tokenIds;
    let agree = 0;
    while (agree < g.tokens.length && ids[agree] === g.tokens[agree]) agree++;
    const need = greedyAgreementNeeded(lps, g.tokens.length);
    t.ok(agree >= need, `seed ${seed}: greedy ${agree} of ${g.tokens.length} tokens agree (${need} required before a near-tie)`);
  }
});
