// SGLang's native HTTP API, for clients written against `python -m sglang.launch_server` (port 30000):
// - POST|PUT /generate: GenerateReqInput (generate-request.ts) -> `{ text, output_ids, meta_info }`, a list for a
//   batch or n > 1 (sample j of prompt i at i * n + j); `stream: true`: SSE frames `data: {...}` each carrying the
//   whole answer so far (SGLang's default; batches add `index`), then `data: [DONE]`; an error after the stream
//   started is one `data: {"error": {"message"}}` frame before [DONE].
// - POST /abort_request `{ rid, abort_all }`: aborts running /generate requests by their rid (200 either way).
// - GET|POST /flush_cache: empties the prefix cache (SGLang's radix cache) when no request runs: 200 `Cache flushed.`,
//   else 400 saying why. POST /reset_prefix_cache is vLLM's name for it.
// - GET /get_model_info (/model_info), GET /get_server_info (/server_info), GET /health_generate, POST|PUT /encode.
// Runner mode: `model` (a body field, or ?model= on GETs) names the store model; /flush_cache flushes every loaded one.
// Invariants: every request of a /generate is registered under its rid until it settles (so /abort_request finds
// it) and aborted when the client goes away; admission, metrics and LoRA adapters are the OpenAI routes'.
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { RequestHandle } from '../../engine-core.js';
import { embed } from '../../embeddings.js';
import { normalizeSamplingParams } from '../../sampling-params.js';
import { spindleVersion } from '../../version.js';
import { ApiError, badRequest } from '../api-error.js';
import { serverPooled } from '../embedding.js';
import { checkModel, Job } from '../generation.js';
import { useModel, type ModelUse } from '../model-use.js';
import type { ServerEngine } from '../plugins/engine.js';
import { SseStream } from '../sse.js';
import { SglangAnswer, WEIGHT_VERSION, type SglangOutput } from '../sglang/generate-output.js';
import { readGenerateRequest, type GenerateBody, type GenerateRequest } from '../sglang/generate-request.js';

const HEALTH_TIMEOUT_MS = 20_000; // SGLang's HEALTH_CHECK_TIMEOUT

const generateSchema = {
  type: 'object',
  properties: {
    text: { anyOf: [{ type: 'string' }, { type: 'array', maxItems: 4096, items: { type: 'string' } }, { type: 'null' }] },
    input_ids: { anyOf: [{ type: 'array', maxItems: 1 << 20 }, { type: 'null' }] },
    sampling_params: { anyOf: [{ type: 'object' }, { type: 'array', items: { type: 'object' } }, { type: 'null' }] },
    return_logprob: { anyOf: [{ type: 'boolean' }, { type: 'array', items: { type: ['boolean', 'null'] } }, { type: 'null' }] },
    logprob_start_len: { anyOf: [{ type: 'integer' }, { type: 'array', items: { type: ['integer', 'null'] } }, { type: 'null' }] },
    top_logprobs_num: { anyOf: [{ type: 'integer' }, { type: 'array', items: { type: ['integer', 'null'] } }, { type: 'null' }] },
    return_text_in_logprobs: { type: ['boolean', 'null'] },
    stream: { type: ['boolean', 'null'] },
    lora_path: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: ['string', 'null'] } }, { type: 'null' }] },
    rid: { anyOf: [{ type: 'string', maxLength: 256 }, { type: 'array', items: { type: 'string', maxLength: 256 } }, { type: 'null' }] },
    model: { type: ['string', 'null'] },
  },
} as const;

const encodeSchema = {
  type: 'object',
  properties: {
    text: { anyOf: [{ type: 'string' }, { type: 'array', maxItems: 2048, items: { type: 'string' } }, { type: 'null' }] },
    input_ids: { anyOf: [{ type: 'array', maxItems: 1 << 20 }, { type: 'null' }] },
    rid: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }, { type: 'null' }] },
    model: { type: ['string', 'null'] },
  },
} as const;

/** /generate requests still running, by rid: their engine requests (all n samples of a prompt under its rid too). */
class RunningRids {
  readonly #byRid = new Map<string, RequestHandle[]>();

  has(rid: string): boolean { return this.#byRid.has(rid); }

  add(rid: string, handles: RequestHandle[]): void {
    this.#byRid.set(rid, handles);
    void Promise.allSettled(handles.map((h) => h.result)).then(() => { if (this.#byRid.get(rid) === handles) this.#byRid.delete(rid); });
  }

  abort(rid: string | null): void {
    const lists = rid === null ? [...this.#byRid.values()] : [this.#byRid.get(rid) ?? []];
    for (const list of lists) for (const h of list) h.abort();
  }
}

/** The engine a request runs on (its `model` in runner mode; any name in single-model mode, as SGLang ignores it). */
function use(app: FastifyInstance, reply: FastifyReply, model: unknown, adapters: boolean): Promise<ModelUse> {
  return useModel(app, reply, model, { single: (e) => checkModel(e, model), adapters });
}

/** The output ids of request k of a job: sample j of prompt i has the prompt's rid, with `_j` after it when n > 1. */
function ridOf(req: GenerateRequest, prompt: number, sample: number): string {
  return req.n > 1 ? `${req.rids[prompt]}_${sample}` : req.rids[prompt];
}

async function generate(app: FastifyInstance, body: GenerateBody, reply: FastifyReply, running: RunningRids): Promise<unknown> {
  const u = await use(app, reply, body.model, true);
  const { tokenizer, info } = await u.engine.ready();
  const req = await readGenerateRequest(body, u.engine.core, info.maxModelLen, tokenizer.vocabSize, (rid) => running.has(rid));
  const target = req.loras ? { promptLoras: req.loras.map((l) => l ?? u.lora) } : { lora: u.lora };
  const job = new Job(u.engine, req.prompts, req.params, app.metrics, target);
  job.bindToReply(reply);
  const answers = job.requests.map((r) => {
    const sample = r.index - r.prompt * req.n;
    return new SglangAnswer(ridOf(req, r.prompt, sample), req.promptIds[r.prompt], req.logprobs[r.prompt], req.noStopTrim[r.prompt], tokenizer);
  });
  req.rids.forEach((rid, p) => running.add(rid, job.requests.filter((r) => r.prompt === p).map((r) => r.handle)));
  if (req.n > 1) job.requests.forEach((r, k) => running.add(answers[k].rid, [r.handle]));
  if (!req.stream) {
    const results = await job.results();
    results.forEach((r, k) => answers[k].setResult(r));
    const out = answers.map((a) => a.toJSON());
    return req.batch ? out : out[0];
  }
  const sse = new SseStream(reply);
  try {
    await Promise.all(job.requests.map(async (r, k) => {
      for await (const d of job.deltas(r)) {
        answers[k].add(d, r.handle.cachedTokens, (performance.now() - job.started) / 1000);
        const frame: SglangOutput = answers[k].toJSON();
        if (req.batch) frame.index = k;
        sse.send(frame);
      }
    }));
  } catch (e) {
    job.abort();
    sse.send({ error: { message: (e as Error).message } });
  }
  sse.end();
  return reply;
}

/** The served engine of a GET (runner mode: ?model=). */
async function engineFor(app: FastifyInstance, reply: FastifyReply, model: unknown): Promise<ServerEngine> {
  return (await use(app, reply, model, false)).engine;
}

/** GET /get_server_info: the server's settings under SGLang's ServerArgs names, and the engine's state. */
function serverInfo(engine: ServerEngine): Record<string, unknown> {
  const o = engine.core.options;
  const info = engine.core.readyValue?.info;
  const s = engine.statsOrNull();
  const spec = o.speculativeConfig;
  return {
    model_path: engine.core.modelPath,
    tokenizer_path: engine.core.modelPath,
    served_model_name: engine.modelName,
    context_length: info?.maxModelLen ?? null,
    max_running_requests: o.maxNumSeqs,
    max_total_num_tokens: s ? s.kvBlocksTotal * s.kvBlockSize : null,
    max_prefill_tokens: info?.maxNumBatchedTokens ?? null,
    chunked_prefill_size: o.chunkedPrefillSize ?? info?.maxNumBatchedTokens ?? null,
    disable_radix_cache: !o.enablePrefixCaching,
    device: info?.device ?? null,
    dtype: o.dtype,
    kv_cache_dtype: info?.kvCacheDtype ?? null,
    speculative_algorithm: spec?.method === 'ngram' ? 'NGRAM' : spec?.method === 'draft_model' ? 'STANDALONE' : null,
    speculative_num_draft_tokens: spec ? spec.numSpeculativeTokens ?? 16 : null,
    speculative_draft_model_path: spec?.model ?? null,
    lora_paths: engine.core.loraModules.map((m) => `${m.name}=${m.path}`),
    tool_call_parser: engine.toolCallParser,
    reasoning_parser: engine.reasoningParser?.name ?? null,
    weight_version: WEIGHT_VERSION,
    version: spindleVersion(),
    internal_states: [{
      num_running_reqs: s?.running ?? 0,
      num_waiting_reqs: s?.waiting ?? 0,
      token_usage: s && s.kvBlocksTotal > 0 ? s.kvBlocksUsed / s.kvBlocksTotal : 0,
      // SGLang's: tokens each verification step accepted, its bonus token included
      ...(s && s.specDrafts > 0 ? { avg_spec_accept_length: (s.specAcceptedTokens + s.specDrafts) / s.specDrafts } : {}),
    }],
  };
}

/** Flushes the prefix cache of every engine (the one, or each loaded one in runner mode); the reasons of those that did not. */
async function flushAll(app: FastifyInstance): Promise<string[]> {
  const engines = app.runner ? app.runner.entries.map((e) => e.engine!).filter(Boolean) : [app.engine];
  const results = await Promise.all(engines.map(async (e) => {
    await e.ready();
    return e.core.flushCache();
  }));
  return results.filter((r) => !r.flushed).map((r) => r.reason!);
}

export default async function sglangRoutes(app: FastifyInstance): Promise<void> {
  const running = new RunningRids();
  const generateRoute = { schema: { body: generateSchema } };
  app.post('/generate', generateRoute, (request, reply) => generate(app, request.body as GenerateBody, reply, running));
  app.put('/generate', generateRoute, (request, reply) => generate(app, request.body as GenerateBody, reply, running));

  app.post('/abort_request', async (request, reply) => {
    const body = (request.body ?? {}) as { rid?: unknown; abort_all?: unknown };
    if (body.abort_all === true) running.abort(null);
    else if (typeof body.rid === 'string') running.abort(body.rid);
    else throw badRequest('give rid (a request id of /generate) or abort_all: true', 'rid');
    return reply.code(200).send();
  });

  const flush = async (_request: unknown, reply: FastifyReply): Promise<FastifyReply> => {
    const refused = await flushAll(app);
    reply.type('text/plain; charset=utf-8');
    if (refused.length > 0) return reply.code(400).send(`Cache not flushed: ${refused.join('; ')}.\n`);
    return reply.code(200).send('Cache flushed.\n');
  };
  app.get('/flush_cache', flush);
  app.post('/flush_cache', flush);
  app.post('/reset_prefix_cache', async (_request, reply) => {
    const refused = await flushAll(app);
    if (refused.length > 0) throw new ApiError(400, refused.join('; '), { code: 'prefix_cache_in_use' });
    return reply.code(200).send();
  });

  const modelInfo = async (request: { query: unknown }, reply: FastifyReply): Promise<unknown> => {
    const engine = await engineFor(app, reply, (request.query as { model?: string }).model);
    const { info } = await engine.ready();
    return {
      model_path: engine.core.modelPath,
      tokenizer_path: engine.core.modelPath,
      is_generation: info.pooling === null || info.pooling === 'none', // a file with a pooling type is an embedding model
      preferred_sampling_params: null,
      weight_version: WEIGHT_VERSION,
      has_image_understanding: info.mmproj !== null,
      has_audio_understanding: false,
    };
  };
  app.get('/get_model_info', modelInfo);
  app.get('/model_info', modelInfo);
  const serverInfoRoute = async (request: { query: unknown }, reply: FastifyReply): Promise<unknown> => {
    const engine = await engineFor(app, reply, (request.query as { model?: string }).model);
    await engine.ready();
    return serverInfo(engine);
  };
  app.get('/get_server_info', serverInfoRoute);
  app.get('/server_info', serverInfoRoute);

  // One greedy token from the engine within 20 s: 200, else 503 (SGLang's /health_generate; outside admission and metrics).
  app.get('/health_generate', async (request, reply) => {
    const engine = await engineFor(app, reply, (request.query as { model?: string }).model);
    if (engine.state !== 'ready') return reply.code(503).send();
    const { info } = await engine.ready();
    const params = normalizeSamplingParams({ temperature: 0, maxTokens: 1, ignoreEos: true });
    const submission = engine.core.submitMany([[info.bosId >= 0 ? info.bosId : 0]], [params], { stream: false });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), HEALTH_TIMEOUT_MS); });
    try {
      const ok = await Promise.race([submission.results().then(() => true, () => false), timeout]);
      return reply.code(ok ? 200 : 503).send();
    } finally {
      clearTimeout(timer);
      submission.abort();
    }
  });

  // SGLang's embeddings: `{ text | input_ids }` -> `{ embedding, meta_info: { id, prompt_tokens } }`, a list for a list.
  const encode = async (request: { body: unknown }, reply: FastifyReply): Promise<unknown> => {
    const body = request.body as { text?: string | string[] | null; input_ids?: number[] | number[][] | null; rid?: string | string[] | null; model?: string | null };
    const hasText = body.text != null;
    if (hasText === (body.input_ids != null)) throw badRequest('give exactly one of text or input_ids', 'text');
    const batch = hasText ? Array.isArray(body.text) : Array.isArray((body.input_ids as unknown[])[0]);
    const inputs: (string | number[])[] = hasText ? (batch ? body.text as string[] : [body.text as string])
      : batch ? body.input_ids as number[][] : [body.input_ids as number[]];
    const rids = body.rid == null ? inputs.map(() => null) : Array.isArray(body.rid) ? body.rid : [body.rid];
    if (rids.length !== inputs.length) throw badRequest(`rid has ${rids.length} entries for ${inputs.length} inputs`, 'rid');
    const { engine } = await use(app, reply, body.model, false);
    const r = await serverPooled(engine, reply, inputs.length, (signal) => embed(engine.core, inputs, { signal }, hasText ? 'text' : 'input_ids'), app.metrics);
    const out = r.embeddings.map((embedding, i) => ({
      embedding, meta_info: { id: rids[i] ?? `${Date.now().toString(16)}${i}`, prompt_tokens: r.promptTokenIds[i].length },
    }));
    return batch ? out : out[0];
  };
  app.post('/encode', { schema: { body: encodeSchema } }, encode);
  app.put('/encode', { schema: { body: encodeSchema } }, encode);
}
