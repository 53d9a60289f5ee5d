// Embeddings: LLM.embed / Engine.encode against llama.cpp's embeddings of the same GGUF (node-llama-cpp's
// embedding context: the hidden state after the output norm, pooled by the file's pooling type, or the last
// token's when it has none), then the options (normalize, dimensions, pooling, truncate) and errors, then the HTTP
// routes with the real clients: OpenAI's /v1/embeddings through the `openai` package (which asks for base64) and
// the Vercel AI SDK's embedMany, Ollama's /api/embed and /api/embeddings through the `ollama` package.
// Tolerance: the raw pooled vectors (normalize: false) agree within 5e-3 of the vector's largest value and have
// cosine similarity > 0.99999 (measured on an AVX-512 machine, llama.cpp's other kernels: F16 weights 1.3e-3 to
// 2.0e-3 and cosine >= 0.999998, F32 4.0e-4 to 9.3e-4 and >= 0.9999992; the fixtures' gains amplify the ~1e-7
// per-op rounding differences, as in the logits conformance tests).
import t from 'tap';
import type { AddressInfo } from 'node:net';
import { getLlama } from 'node-llama-cpp';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { embedMany } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { LLM } from '../lib/llm.js';
import { Engine } from '../lib/engine.js';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { modelCapabilities } from '../lib/server/model-facts.js';
import { fixtureModel, PRESETS } from './helpers/fixtures.js';

const SMALL = { arch: 'llama', tokenizer: 'llama3', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', tiedEmbeddings: true, seed: 21 } as const;
const TEXTS = ['The quick brown fox jumps over the lazy dog.', 'Spindles wind thread.', 'a'];

const norm = (v: readonly number[]): number => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
const cosine = (a: readonly number[], b: readonly number[]): number => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));

const llama = await getLlama({ gpu: false, build: 'never' });

/** llama.cpp's embedding of each token-id input (the model file's pooling; last token without one). */
async function llamaCppEmbeddings(path: string, inputs: number[][]): Promise<number[][]> {
  const model = await llama.loadModel({ modelPath: path });
  try {
    const ctx = await model.createEmbeddingContext({ contextSize: 512, threads: 2 });
    const out: number[][] = [];
    for (const ids of inputs) out.push([...(await ctx.getEmbeddingFor(ids as never)).vector]);
    await ctx.dispose();
    return out;
  } finally {
    await model.dispose();
  }
}

for (const c of [
  { label: 'llama3Tiny (F16, no pooling type: the last token)', spec: PRESETS.llama3Tiny, pooling: 'last' },
  { label: 'llama F32, pooling type mean', spec: { ...SMALL, poolingType: 'mean' }, pooling: 'mean' },
  { label: 'qwen3 F32, pooling type last (as Qwen3-Embedding)', spec: { ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', poolingType: 'last' }, pooling: 'last' },
  { label: 'lfm2 F32 (short convolutions + attention), pooling type mean', spec: { ...SMALL, arch: 'lfm2', nLayer: 3, poolingType: 'mean' }, pooling: 'mean' },
] as const) {
  t.test(`embeddings equal llama.cpp's: ${c.label}`, async (t) => {
    const path = await fixtureModel(c.spec);
    const llm = new LLM({ model: path, maxModelLen: 512, threads: 2 });
    t.teardown(() => llm.close());
    await llm.ready();
    const inputs = TEXTS.map((s) => llm.tokenizer.encode(s, { addSpecialTokens: true }));
    const ours = await llm.embed(inputs.map((ids) => ({ promptTokenIds: ids })), { normalize: false });
    const ref = await llamaCppEmbeddings(path, inputs);
    for (let i = 0; i < inputs.length; i++) {
      const a = ours[i].outputs.embedding, b = ref[i];
      t.equal(a.length, b.length, `input ${i}: n_embd values`);
      const scale = Math.max(...b.map(Math.abs));
      const worst = Math.max(...a.map((x, k) => Math.abs(x - b[k])));
      t.ok(worst <= 5e-3 * scale, `input ${i}: max |diff| ${worst.toExponential(2)} <= 5e-3 x ${scale.toFixed(3)}`);
      t.ok(cosine(a, b) > 0.99999, `input ${i}: cosine ${cosine(a, b)}`);
      t.same(ours[i].promptTokenIds, inputs[i]);
    }
    // the pooling the file asks for is what the default gave: asking for it changes nothing, another one does
    const asked = await llm.embed({ promptTokenIds: inputs[0] }, { normalize: false, pooling: c.pooling });
    t.same(asked[0].outputs.embedding, ours[0].outputs.embedding);
    const other = await llm.embed({ promptTokenIds: inputs[0] }, { normalize: false, pooling: c.pooling === 'mean' ? 'last' : 'mean' });
    t.notSame(other[0].outputs.embedding, ours[0].outputs.embedding);
  });
}

t.test('LLM.embed: normalized by default, dimensions, text tokenized with the special tokens, errors name the input', async (t) => {
  const path = await fixtureModel(SMALL);
  const llm = new LLM({ model: path, maxModelLen: 32, threads: 2 });
  t.teardown(() => llm.close());
  const [unit] = await llm.embed(TEXTS[0]);
  t.ok(Math.abs(norm(unit.outputs.embedding) - 1) < 1e-6, 'unit L2 norm');
  t.equal(unit.prompt, TEXTS[0]);
  t.same(unit.promptTokenIds, llm.tokenizer.encode(TEXTS[0], { addSpecialTokens: true }));
  t.equal(unit.promptTokenIds[0], llm.tokenizer.bosTokenId, 'BOS first, as the model asks');
  const [raw] = await llm.embed(TEXTS[0], { normalize: false });
  const n = norm(raw.outputs.embedding);
  t.ok(unit.outputs.embedding.every((x, i) => Math.abs(x - raw.outputs.embedding[i] / n) < 1e-6), 'normalized = raw / |raw|');
  const [cut] = await llm.embed(TEXTS[0], { dimensions: 8 });
  t.equal(cut.outputs.embedding.length, 8);
  t.ok(Math.abs(norm(cut.outputs.embedding) - 1) < 1e-6, 'cut, then normalized again');
  const batch = await llm.embed(TEXTS);
  t.same(batch[0].outputs.embedding, unit.outputs.embedding, 'a batch gives each input what it gets alone');

  await t.rejects(llm.embed(''), /prompts is empty/);
  await t.rejects(llm.embed(['ok', '']), /prompts\[1\] is empty/);
  await t.rejects(llm.embed({ promptTokenIds: [1, 999999999] }), /prompts\[1\]: 999999999 is not a token id/);
  await t.rejects(llm.embed(TEXTS[0], { dimensions: 65 }), /dimensions must be an integer in \[1, 64\]/);
  const long = Array.from({ length: 40 }, (_, i) => 1000 + i);
  await t.rejects(llm.embed({ promptTokenIds: long }), /prompts has 40 tokens; this model's context \(maxModelLen\) is 32 tokens/);
  const [truncated] = await llm.embed({ promptTokenIds: long }, { truncate: true });
  t.same(truncated.promptTokenIds, long.slice(0, 32), 'truncate keeps the first maxModelLen tokens');
  await t.rejects(llm.embed('x', { pool: 'mean' } as never), /embed: unknown option 'pool'/);
  await t.rejects(llm.embed('x', { pooling: 'none' as never }), /pooling must be one of mean, cls, last \(got "none"\)/);
  await t.rejects(llm.embed('x', { signal: AbortSignal.abort() }), /aborted/, 'an aborted signal: nothing is computed');
});

t.test('Engine.encode: SGLang shapes; the engine option pooling is the default', async (t) => {
  const path = await fixtureModel(SMALL);
  const engine = new Engine({ model: path, maxModelLen: 64, threads: 2, pooling: 'mean' });
  t.teardown(() => engine.shutdown());
  const one = await engine.encode(TEXTS[0]) as { embedding: number[]; metaInfo: { promptTokens: number } };
  t.ok(Math.abs(norm(one.embedding) - 1) < 1e-6);
  const ids = engine.tokenizer.encode(TEXTS[0], { addSpecialTokens: true });
  t.equal(one.metaInfo.promptTokens, ids.length);
  const many = await engine.encode({ inputIds: [ids, ids.slice(0, 3)] }) as { embedding: number[] }[];
  t.equal(many.length, 2);
  t.same(many[0].embedding, one.embedding, 'token ids and text give the same vector');
  const mean = await engine.encode({ prompt: TEXTS[0], pooling: 'mean' }) as { embedding: number[] };
  const last = await engine.encode({ prompt: TEXTS[0], pooling: 'last' }) as { embedding: number[] };
  t.same(mean.embedding, one.embedding, 'the engine option is the default');
  t.notSame(last.embedding, one.embedding);
  await t.rejects(engine.encode({ prompt: 'x', inputIds: [1] }), /give prompt \(text\) or inputIds/);
});

t.test('HTTP: /v1/embeddings with the openai client, /api/embed and /api/embeddings with the ollama client', async (t) => {
  const path = await fixtureModel(SMALL);
  const app = await buildApp({
    engine: normalizeEngineOptions({ model: path, maxModelLen: 64, threads: 2 }, 'serve'),
    servedModelNames: ['tiny'],
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const host = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const llm = new LLM({ model: path, maxModelLen: 64, threads: 2 });
  t.teardown(() => llm.close());
  const expected = (await llm.embed(TEXTS)).map((r) => r.outputs.embedding);

  const openai = new OpenAI({ baseURL: `${host}/v1`, apiKey: 'unused' });
  const r = await openai.embeddings.create({ model: 'tiny', input: TEXTS }); // base64 on the wire
  t.equal(r.object, 'list');
  t.equal(r.model, 'tiny');
  t.equal(r.data.length, TEXTS.length);
  r.data.forEach((d, i) => {
    t.equal(d.index, i);
    t.equal(d.object, 'embedding');
    t.ok(d.embedding.every((x, k) => Math.abs(x - expected[i][k]) < 1e-6), `input ${i}: the offline API's vector`);
  });
  const tokens = TEXTS.reduce((a, s) => a + llm.tokenizer.encode(s, { addSpecialTokens: true }).length, 0);
  t.same(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
  const floats = await openai.embeddings.create({ model: 'tiny', input: TEXTS[0], encoding_format: 'float', dimensions: 16 });
  t.equal(floats.data[0].embedding.length, 16);
  const ids = await openai.embeddings.create({ model: 'tiny', input: [llm.tokenizer.encode(TEXTS[1], { addSpecialTokens: true })], encoding_format: 'float' });
  t.ok(ids.data[0].embedding.every((x, k) => Math.abs(x - expected[1][k]) < 1e-6), 'token ids in');
  await t.rejects(openai.embeddings.create({ model: 'tiny', input: ['fine', ''] }), { status: 400, message: /input\[1\] is empty/ });
  await t.rejects(openai.embeddings.create({ model: 'tiny', input: 'x'.repeat(10), dimensions: 65 }), { status: 400, message: /dimensions must be/ });
  const long = Array.from({ length: 80 }, (_, i) => 1000 + i);
  await t.rejects(openai.embeddings.create({ model: 'tiny', input: long }), { status: 400, message: /input has 80 tokens; this model's context \(maxModelLen\) is 64/ });
  const bad = await fetch(`${host}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'x', encoding_format: 'int8' }) });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: { param: 'encoding_format' } });

  const sdk = createOpenAICompatible({ name: 'spindle', baseURL: `${host}/v1` });
  const viaSdk = await embedMany({ model: sdk.embeddingModel('tiny'), values: TEXTS });
  t.equal(viaSdk.embeddings.length, TEXTS.length);
  t.ok(viaSdk.embeddings[2].every((x, k) => Math.abs(x - expected[2][k]) < 1e-6), 'the Vercel AI SDK (embedMany) too');
  t.equal(viaSdk.usage.tokens, tokens);

  const ollama = new Ollama({ host });
  const e = await ollama.embed({ model: 'tiny', input: TEXTS });
  t.equal(e.model, 'tiny');
  t.equal(e.embeddings.length, TEXTS.length);
  t.ok(e.embeddings[0].every((x, k) => Math.abs(x - expected[0][k]) < 1e-6), 'normalized, as /v1/embeddings');
  t.equal(e.prompt_eval_count, tokens);
  t.ok(Number.isInteger(e.total_duration) && e.total_duration > 0, 'total_duration in nanoseconds');
  const truncated = await ollama.embed({ model: 'tiny', input: 'word '.repeat(100) });
  t.equal(truncated.prompt_eval_count, 64, 'truncate (default true) keeps the first num_ctx tokens');
  await t.rejects(ollama.embed({ model: 'tiny', input: 'word '.repeat(100), truncate: false }), /has 101 tokens|has \d+ tokens/);
  const withEmpty = await ollama.embed({ model: 'tiny', input: [TEXTS[0], ''] });
  t.equal(withEmpty.embeddings.length, 2, 'a list keeps its empty item (one embedding per item, as Ollama)');
  t.same(withEmpty.embeddings[0], e.embeddings[0]);
  const loadOnly = await ollama.embed({ model: 'tiny', input: '' });
  t.same(loadOnly.embeddings, [], 'an empty input only loads the model');
  const legacy = await ollama.embeddings({ model: 'tiny', prompt: TEXTS[0] });
  const raw = (await llm.embed(TEXTS[0], { normalize: false }))[0].outputs.embedding;
  t.ok(legacy.embedding.every((x, k) => Math.abs(x - raw[k]) < 1e-5), '/api/embeddings: not normalized, as Ollama');
  t.same((await ollama.embeddings({ model: 'tiny', prompt: '' })).embedding, []);
  const metrics = await (await fetch(`${host}/metrics`)).text();
  const success = /^spindle:request_success_total\{[^}]*finished_reason="stop"[^}]*\} (\d+)/m.exec(metrics);
  t.ok(success && Number(success[1]) >= 2 * TEXTS.length, `every embedded input counts as a finished request (${success?.[1]})`);
});

t.test("capabilities: 'embedding' instead of 'completion' for a file with a pooling type, as Ollama", async (t) => {
  t.same(modelCapabilities({ mmproj: null, chatTemplate: null, pooling: 'last' }), ['embedding']);
  t.same(modelCapabilities({ mmproj: null, chatTemplate: null, pooling: 'none' }), ['embedding']);
  t.same(modelCapabilities({ mmproj: null, chatTemplate: null, pooling: null }), ['completion']);
});
