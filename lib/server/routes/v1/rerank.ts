// Scoring routes: POST /rerank, /v1/rerank, /v2/rerank (a query against documents, best first: Jina's and Cohere's
// shape as vLLM and llama.cpp's server answer it; TEI's when the body has `texts`) and POST /score, /v1/score
// (vLLM's: text_1 against text_2, one to one, one to many or pairwise). Scores come from lib/scoring.ts: a reranker's
// classifier head, else the cosine similarity of embeddings. Runner mode: `model` names a store model.
// Invariants: results carry the documents' indexes in the request; top_n keeps the best N; a bad body is a 400
// naming the field.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { scorePairs, scoringPairNames, scoringPairs } from '../../../scoring.js';
import { badRequest } from '../../api-error.js';
import { serverPooled } from '../../embedding.js';
import { checkModel, requestId } from '../../generation.js';
import { useModel } from '../../model-use.js';
import { rerankSchema, scoreSchema } from '../../schemas.js';

interface RerankBody {
  model?: string | null;
  query: string;
  documents?: (string | { text: string })[] | null;
  texts?: string[] | null; // TEI
  top_n?: number | null; // 0 or absent: every document (vLLM's default 0)
  return_documents?: boolean | null;
  return_text?: boolean | null; // TEI
}

interface ScoreBody {
  model?: string | null;
  text_1: string | string[];
  text_2: string | string[];
}

export default async function rerankRoutes(app: FastifyInstance): Promise<void> {
  const rerank = async (request: FastifyRequest, reply: FastifyReply) => {
    const body = request.body as RerankBody & { truncate_prompt_tokens?: unknown; max_tokens_per_doc?: unknown };
    for (const k of ['truncate_prompt_tokens', 'max_tokens_per_doc'] as const) {
      if (body[k] != null) throw badRequest(`${k} is not supported: send documents that fit the model's context with the query`, k, 'unsupported_parameter');
    }
    const tei = body.texts != null;
    if (tei && body.documents != null) throw badRequest('give documents or texts (TEI), not both', 'texts');
    const docs = (tei ? body.texts! : body.documents ?? []).map((d) => (typeof d === 'string' ? d : d.text));
    if (docs.length === 0) throw badRequest(`${tei ? 'texts' : 'documents'} must hold at least one document`, tei ? 'texts' : 'documents');
    const { engine, name: model } = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model) });
    const pairs = docs.map((d): [string, string] => [body.query, d]);
    const names = { first: () => 'query', second: (i: number) => `${tei ? 'texts' : 'documents'}[${i}]` };
    const r = await serverPooled(engine, reply, pairs.length, (signal) => scorePairs(engine.core, pairs, names, signal), app.metrics);
    const ranked = r.scores.map((score, index) => ({ index, score })).sort((a, b) => b.score - a.score || a.index - b.index)
      .slice(0, body.top_n ? body.top_n : docs.length);
    if (tei) return ranked.map(({ index, score }) => ({ index, score, ...(body.return_text ? { text: docs[index] } : {}) }));
    // documents back by default as Jina and vLLM answer; Cohere's v2 API (/v2/rerank) only when asked
    const withDocs = body.return_documents ?? request.url.split('?')[0] !== '/v2/rerank';
    return {
      id: requestId('rerank'), model, object: 'list',
      usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens },
      results: ranked.map(({ index, score }) => ({ index, relevance_score: score, ...(withDocs ? { document: { text: docs[index] } } : {}) })),
    };
  };
  for (const url of ['/rerank', '/v1/rerank', '/v2/rerank']) app.post(url, { schema: { body: rerankSchema } }, rerank);

  const score = async (request: FastifyRequest, reply: FastifyReply) => {
    const body = request.body as ScoreBody;
    const pairs = scoringPairs(body.text_1, body.text_2);
    const { engine, name: model } = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model) });
    const r = await serverPooled(engine, reply, pairs.length,
      (signal) => scorePairs(engine.core, pairs, scoringPairNames(body.text_1), signal), app.metrics);
    return {
      id: requestId('score'), object: 'list', created: Math.floor(Date.now() / 1000), model,
      data: r.scores.map((s, index) => ({ index, object: 'score', score: s })),
      usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens },
    };
  };
  for (const url of ['/score', '/v1/score']) app.post(url, { schema: { body: scoreSchema } }, score);
}
