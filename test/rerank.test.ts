// Scoring and reranking (lib/scoring.ts): a reranker fixture in llama.cpp's Qwen3-Reranker shape (rank pooling, a
// [n_embd, 2] classifier head, the rerank prompt) scores pairs as llama.cpp's ranking context does on the same
// tokens (node-llama-cpp's LlamaRankingContext: softmax over the head's two labels, the first one's probability),
// within 2e-3 (F32 fixture); llm.score pairs one to one, one to many and pairwise; /v1/rerank (Jina / Cohere / vLLM
// shape, best first, top_n, documents as strings or { text }), /rerank, /v2/rerank, TEI's `texts`, /v1/score and
// /score answer with the same scores; an embedding model scores by the cosine of its embeddings, a chat model not
// at all; a malformed head is a load error; errors name the field.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { getLlama, type Token } from 'node-llama-cpp';
import { LLM } from '../lib/llm.js';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { headScore, rerankPromptIds } from '../lib/scoring.js';
import { writeRerankerModel } from './tooling/fixtures/index.js';
import { fixtureModel } from './helpers/fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'spindle-rerank-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const path = await writeRerankerModel(join(dir, 'reranker.gguf'),
  { weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, seed: 21, tiedEmbeddings: true });
const llm = new LLM({ model: path, maxModelLen: 512, threads: 2 });
t.teardown(() => llm.close());
await llm.ready();

const QUERY = 'What is the capital of France?';
const DOCS = ['Paris is the capital and largest city of France.', 'The mitochondria is the powerhouse of the cell.',
  'Berlin is the capital of Germany.', 'France is a country in Western Europe; its capital is Paris.'];

t.test("llm.score: the head's first-label probability, as llama.cpp's ranking context on the same tokens", async (t) => {
  const out = await llm.score(QUERY, DOCS);
  t.equal(out.length, DOCS.length, 'one query against many documents');
  t.ok(out.every((o) => o.outputs.score > 0 && o.outputs.score < 1), `scores in (0, 1): ${out.map((o) => o.outputs.score.toFixed(3)).join(', ')}`);
  t.same(out.map((o) => [o.text1, o.text2]), DOCS.map((d) => [QUERY, d]));
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' } as Parameters<typeof getLlama>[0]);
  const model = await llama.loadModel({ modelPath: path });
  const ctx = await model.createRankingContext({ contextSize: 512, threads: 1 });
  try {
    // the same token sequences in both engines: node-llama-cpp's own prompt for each pair
    const inputs = DOCS.map((d) => (ctx as unknown as { _getEvaluationInput(q: Token[], d: Token[]): Token[] })
      ._getEvaluationInput(model.tokenize(QUERY, false, 'trimLeadingSpace'), model.tokenize(d, false, 'trimLeadingSpace')));
    const ref = await Promise.all(inputs.map((ids) => (ctx as unknown as { _evaluateRankingForInput(i: Token[]): Promise<number> })._evaluateRankingForInput(ids)));
    const ours = await scoreIds(inputs.map((x) => [...x]));
    // Spindle's own prompt for a pair: the rerank template filled in, tokenized as llama.cpp tokenizes with special
    // tokens parsed (what llama.cpp's server sends its ranking context)
    const filled = llm.modelInfo.rerankTemplate!.replace('{query}', QUERY).replace('{document}', DOCS[0]);
    t.same(rerankPromptIds(llm.tokenizer, llm.modelInfo.rerankTemplate!, QUERY, DOCS[0]), [...model.tokenize(filled, true)],
      "the pair's prompt tokens equal llama.cpp's");
    const maxDiff = Math.max(...ours.map((s, i) => Math.abs(s - ref[i])));
    t.ok(maxDiff <= 2e-3, `max |score difference| over ${DOCS.length} pairs: ${maxDiff.toExponential(2)} (<= 2e-3); llama.cpp ${ref.map((x) => x.toFixed(4)).join(', ')}`);
  } finally {
    await ctx.dispose();
    await model.dispose();
  }
  const pairwise = await llm.score([QUERY, 'Who wrote Hamlet?'], [DOCS[0], 'Shakespeare wrote Hamlet.']);
  t.equal(pairwise.length, 2, 'two lists: pairwise');
  t.equal(pairwise[0].outputs.score, out[0].outputs.score, 'the same pair scores the same, batched differently');
  await t.rejects(llm.score(['a', 'b'], ['c', 'd', 'e']), /text1 has 2 texts and text2 3/);
});

/** Spindle's scores of prompts given as token ids (the head over each prompt's last hidden state). */
async function scoreIds(prompts: number[][]): Promise<number[]> {
  const out = await llm.embed(prompts.map((p) => ({ promptTokenIds: p })), { pooling: 'last', normalize: false });
  const info = llm.modelInfo;
  return out.map((o) => headScore(info.classifier!, o.outputs.embedding));
}

const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 512, threads: 2 }, 'serve'), servedModelNames: ['rr'] });
await app.listen({ host: '127.0.0.1', port: 0 });
t.teardown(() => app.close());
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const post = async (url: string, body: unknown) => {
  const r = await fetch(base + url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() as Record<string, unknown> & Array<Record<string, unknown>> };
};

t.test('rerank routes: best first with their indexes, top_n, documents back; TEI; score routes', async (t) => {
  const scores = (await llm.score(QUERY, DOCS)).map((o) => o.outputs.score);
  const order = scores.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]).map(([, i]) => i);
  for (const url of ['/v1/rerank', '/rerank', '/v2/rerank']) {
    const r = await post(url, { model: 'rr', query: QUERY, documents: DOCS, return_documents: true });
    t.equal(r.status, 200, url);
    const results = r.json.results as Array<{ index: number; relevance_score: number; document: { text: string } }>;
    t.same(results.map((x) => x.index), order, `${url}: best first`);
    t.same(results.map((x) => x.relevance_score), order.map((i) => scores[i]), 'the offline scores');
    t.same(results.map((x) => x.document.text), order.map((i) => DOCS[i]));
    t.match(r.json, { model: 'rr', usage: { total_tokens: Number } });
  }
  const top = await post('/v1/rerank', { query: QUERY, documents: DOCS.map((text) => ({ text })), top_n: 2, return_documents: false });
  t.same((top.json.results as unknown[]).length, 2, 'top_n');
  t.notOk('document' in (top.json.results as Record<string, unknown>[])[0], 'return_documents false');
  t.ok('document' in ((await post('/v1/rerank', { query: QUERY, documents: DOCS })).json.results as Record<string, unknown>[])[0],
    'documents back by default (Jina, vLLM)');
  t.notOk('document' in ((await post('/v2/rerank', { query: QUERY, documents: DOCS })).json.results as Record<string, unknown>[])[0],
    'not by default on /v2/rerank (Cohere v2)');
  t.equal(((await post('/v1/rerank', { query: QUERY, documents: DOCS, top_n: 0 })).json.results as unknown[]).length, DOCS.length, 'top_n 0: all');
  const tei = await post('/rerank', { query: QUERY, texts: DOCS, return_text: true });
  t.same(tei.json.map((x) => x.index), order, 'TEI: a plain array, best first');
  t.equal(tei.json[0].text, DOCS[order[0]]);
  const s = await post('/v1/score', { model: 'rr', text_1: QUERY, text_2: DOCS });
  t.same((s.json.data as Array<{ score: number }>).map((x) => x.score), scores, '/v1/score keeps the input order');
  t.match(s.json, { object: 'list', data: [{ index: 0, object: 'score' }], usage: { prompt_tokens: Number } });
  t.equal((await post('/score', { text_1: [QUERY], text_2: [DOCS[1]] })).json.data instanceof Array, true);
  const bad = [
    [{ query: QUERY, documents: [] }, /documents must hold at least one document/],
    [{ query: QUERY }, /documents must hold at least one document/],
    [{ documents: DOCS }, /query/],
    [{ query: QUERY, documents: DOCS, texts: DOCS }, /not both/],
    [{ query: QUERY, documents: DOCS, truncate_prompt_tokens: 8 }, /truncate_prompt_tokens is not supported/],
    [{ query: 'long '.repeat(600), documents: ['x'] }, /query has \d+ tokens; this model's context \(maxModelLen\) is 512/],
    [{ query: QUERY, documents: ['fine', 'long '.repeat(600)] }, /documents\[1\]: its prompt with query has \d+ tokens/],
  ] as const;
  for (const [body, message] of bad) {
    const r = await post('/v1/rerank', body);
    t.equal(r.status, 400, JSON.stringify(body));
    t.match((r.json.error as { message: string }).message, message);
  }
  const mismatch = await post('/v1/score', { text_1: ['a', 'b'], text_2: ['c'] });
  t.equal(mismatch.status, 400);
});

t.test('an embedding model scores by the cosine of its embeddings; a chat model does not score', async (t) => {
  const chat = new LLM({ model: await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true }), maxModelLen: 256, threads: 2 });
  await t.rejects(chat.score(QUERY, DOCS[0]), /this model does not score pairs: it is neither a reranker/);
  await chat.close();
  const plain = new LLM({ model: await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true, poolingType: 'mean' }), maxModelLen: 256, threads: 2 });
  try {
    const [s] = await plain.score(QUERY, DOCS[0]);
    const [a, b] = await plain.embed([QUERY, DOCS[0]]);
    const cos = a.outputs.embedding.reduce((x, v, i) => x + v * b.outputs.embedding[i], 0);
    t.ok(Math.abs(s.outputs.score - cos) < 1e-12, `cosine ${cos.toFixed(4)}`);
    const same = await plain.score(QUERY, QUERY);
    t.ok(Math.abs(same[0].outputs.score - 1) < 1e-6, 'a text against itself: 1');
    await t.rejects(plain.score(['a', ''], ['b', 'c']), /text1\[1\] is empty/, 'an empty text is named by its own index');
  } finally {
    await plain.close();
  }
});

t.test('a classifier head that does not fit the model is a load error naming it', async (t) => {
  const bad = await writeRerankerModel(join(dir, 'bad-head.gguf'),
    { weights: 'F32', nEmbd: 64, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 128, seed: 22, tiedEmbeddings: true }, 32);
  const broken = new LLM({ model: bad, maxModelLen: 64, threads: 1 });
  await t.rejects(broken.ready(), /cls\.output\.weight has shape \[32, 2\]; a classifier head must be \[n_embd = 64, 1\.\.64 labels\]/);
  await broken.close().catch(() => {});
});
