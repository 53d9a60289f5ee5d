// Images through the HTTP server on the generated LFM2-VL fixture, with the real clients: the `openai` client
// sends a data URL and an http URL (a local image server) with text before and after; the `ollama` client sends
// `images` to /api/chat and /api/generate; the same image gives the same greedy answer whichever way it came.
// Bad input is a 400 naming the problem and the server keeps serving: a corrupt image, an unsupported format,
// an image over the byte or pixel limit, an unreachable URL, a non-image content type, a refused address or
// domain, a local file without --allowed-local-media-path, and images for a text-only model.
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import sharp from 'sharp';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureVisionModel } from './helpers/fixtures.js';

const fx = await fixtureVisionModel('lfm2VlTiny');
const png = await sharp({ create: { width: 300, height: 200, channels: 3, background: { r: 10, g: 120, b: 240 } } })
  .composite([{ input: await sharp({ create: { width: 100, height: 80, channels: 3, background: { r: 250, g: 250, b: 0 } } }).png().toBuffer(), left: 40, top: 30 }])
  .png().toBuffer();
const dataUrl = `data:image/png;base64,${png.toString('base64')}`;
const bmp = Buffer.concat([Buffer.from('BM'), Buffer.alloc(60)]);
const hugePixels = await sharp({ create: { width: 8000, height: 7000, channels: 3, background: { r: 0, g: 0, b: 0 } } }).png({ compressionLevel: 9 }).toBuffer();

// A local image server: /a.png, /page.html (text/html), /big.png (over the byte limit declared up front).
const images = http.createServer((req, res) => {
  if (req.url === '/a.png') { res.writeHead(200, { 'content-type': 'image/png' }); res.end(png); return; }
  if (req.url === '/page.html') { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<html></html>'); return; }
  if (req.url === '/huge.png') { res.writeHead(200, { 'content-type': 'image/png' }); res.end(hugePixels); return; }
  res.writeHead(404); res.end();
});
await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
t.teardown(() => images.close());
const imageHost = `http://127.0.0.1:${(images.address() as AddressInfo).port}`;

const app = await buildApp({
  engine: normalizeEngineOptions({ model: fx.model, maxModelLen: 2048, threads: 2 }, 'serve'),
  servedModelNames: ['tiny-vl'],
});
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
const ollama = new Ollama({ host: base });
const greedy = { temperature: 0, max_tokens: 6 };

const ask = (url: string) => openai.chat.completions.create({
  model: 'tiny-vl', ...greedy,
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Before the image.' }, { type: 'image_url', image_url: { url } }, { type: 'text', text: 'After it: what is shown?' }] }],
});

t.test("the model's capabilities say 'vision' (/v1/models cards, Ollama's /api/show)", async (t) => {
  const list = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ capabilities: string[] }> };
  t.ok(list.data[0].capabilities.includes('vision'), `capabilities: ${list.data[0].capabilities}`);
  const show = await ollama.show({ model: 'tiny-vl' });
  t.ok(show.capabilities.includes('vision'));
  t.equal(show.capabilities[0], 'completion');
});

t.test('openai client: a data URL and an http URL give the same answer; usage counts the image positions', async (t) => {
  const a = await ask(dataUrl);
  const b = await ask(`${imageHost}/a.png`);
  t.ok(a.choices[0].message.content !== null);
  t.equal(b.choices[0].message.content, a.choices[0].message.content);
  t.ok(a.usage!.prompt_tokens > 64, 'prompt tokens include the image embeddings');
  const stream = await openai.chat.completions.create({
    model: 'tiny-vl', ...greedy, stream: true,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Before the image.' }, { type: 'image_url', image_url: { url: dataUrl } }, { type: 'text', text: 'After it: what is shown?' }] }],
  });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  t.equal(text, a.choices[0].message.content, 'streamed == not streamed');
});

t.test('ollama client: images on /api/chat and /api/generate', async (t) => {
  const r = await ollama.chat({ model: 'tiny-vl', messages: [{ role: 'user', content: 'What is this?', images: [png] }], options: { temperature: 0, num_predict: 6 } });
  t.ok(r.prompt_eval_count > 64);
  t.equal(r.done, true);
  const g = await ollama.generate({ model: 'tiny-vl', prompt: 'What is this?', images: [png.toString('base64')], options: { temperature: 0, num_predict: 6 } });
  t.equal(g.response, r.message.content, 'the same conversation through generate');
});

t.test('bad images are 400s naming the problem; the server keeps serving', async (t) => {
  const cases: [string, RegExp][] = [
    ['data:image/png;base64,' + Buffer.from('definitely not a png').toString('base64'), /could not be read|could not be decoded/],
    ['data:image/bmp;base64,' + bmp.toString('base64'), /not supported|could not be read/],
    [`${imageHost}/page.html`, /text\/html/],
    [`${imageHost}/missing.png`, /404/],
    ['http://127.0.0.1:1/x.png', /could not|refused|unreachable/i],
    ['http://169.254.169.254/latest/meta-data', /link-local|metadata/],
    ['file:///etc/passwd', /allowed-local-media-path/],
    [`${imageHost}/huge.png`, /pixels/],
    ['ftp://example.com/a.png', /scheme/],
  ];
  for (const [url, re] of cases) {
    const err = await ask(url).then(() => null, (e: unknown) => e as { status: number; message: string });
    t.equal(err?.status, 400, `${url.slice(0, 40)}: 400`);
    t.match(err?.message ?? '', re, `${url.slice(0, 40)}: names the problem`);
  }
  const bad = await fetch(`${base}/api/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny-vl', messages: [{ role: 'user', content: 'x', images: ['@@@'] }], stream: false }) });
  t.equal(bad.status, 400);
  t.match(((await bad.json()) as { error: string }).error, /base64/);
  const ok = await ask(dataUrl);
  t.ok(ok.choices[0].message.content !== null, 'still serving');
});

t.test('an image over the byte limit, and a text-only model', async (t) => {
  const big = Buffer.alloc(21 * 1024 * 1024, 7);
  const err = await ask(`data:image/png;base64,${big.toString('base64')}`).then(() => null, (e: unknown) => e as { status: number; message: string });
  t.equal(err?.status, 400);
  t.match(err?.message ?? '', /bytes/);
  const dir = mkdtempSync(join(tmpdir(), 'spindle-text-only-'));
  const model = join(dir, 'text.gguf');
  copyFileSync(fx.model, model);
  writeFileSync(join(dir, 'README'), 'no mmproj here');
  const textApp = await buildApp({ engine: normalizeEngineOptions({ model, maxModelLen: 512, threads: 2 }, 'serve'), servedModelNames: ['text'] });
  t.teardown(() => textApp.close());
  const r = await textApp.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: 'text', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl } }] }] } });
  t.equal(r.statusCode, 400);
  t.match(r.json().error.message, /no vision encoder/);
  const o = await textApp.inject({ method: 'POST', url: '/api/chat', payload: { model: 'text', stream: false, messages: [{ role: 'user', content: 'x', images: [png.toString('base64')] }] } });
  t.equal(o.statusCode, 400);
  t.match(o.json().error, /text only/);
});

t.test("SGLang's /generate with image_data: a data URL or plain base64, its <image> markers; bad layouts are 400s", async (t) => {
  const gen = (payload: Record<string, unknown>) => app.inject({ method: 'POST', url: '/generate', payload });
  const params = { temperature: 0, max_new_tokens: 4 };
  const byUrl = await gen({ text: '<image>What colour is it?', image_data: dataUrl, sampling_params: params });
  t.equal(byUrl.statusCode, 200, byUrl.body.slice(0, 200));
  const byBase64 = await gen({ text: '<image>What colour is it?', image_data: png.toString('base64'), sampling_params: params });
  t.equal(byBase64.statusCode, 200, 'plain base64, as SGLang takes it');
  t.equal(JSON.parse(byBase64.body).text, JSON.parse(byUrl.body).text, 'the same image, the same answer');
  const prompt = JSON.parse(byUrl.body).meta_info.prompt_tokens as number;
  t.ok(prompt > 20, `the image's embeddings count as prompt tokens (${prompt})`);
  for (const [payload, re] of [
    [{ text: '<image> a <image> b', image_data: dataUrl }, /image/],
    [{ input_ids: [1, 2, 3], image_data: dataUrl }, /image/],
    [{ text: 'x', image_data: 'not-a-file.png' }, /image_data/],
  ] as [Record<string, unknown>, RegExp][]) {
    const r = await gen({ ...payload, sampling_params: params });
    t.equal(r.statusCode, 400, `${JSON.stringify(payload).slice(0, 60)}: ${r.body.slice(0, 160)}`);
    t.match(r.body, re);
    t.match(JSON.parse(r.body), { error: { param: 'image_data' } });
  }
});
