// SGLang's native HTTP API, for clients written against `python -m sglang.launch_server` (port 30000):
// - POST|PUT /generate: GenerateReqInput (generate-request.ts) -> `{ text, output_ids, meta_info }`, a list for a
//   batch or n > 1 (sample j of prompt i at i * n + j); `stream: true`: SSE frames `data: {...}` each carrying the
//   whole answer so far (SGLang's default; --incremental-streaming-output: what each adds; batches add `index`),
//   then `data: [DONE]`; an error after the stream
//   started is one `data: {"error": {"message"}}` frame before [DONE].
// - POST /abort_request `{ rid, abort_all }`: aborts running /generate requests by their rid (200 either way).
// - GET|POST /flush_cache: empties the prefix cache (SGLang's radix cache) when no request runs: 200 `Cache flushed.`,
//   else 400 saying why. POST /reset_prefix_cache is vLLM's name for it.
// - GET /get_model_info (/model_info), GET /get_server_info (/server_info), GET /health_generate, POST|PUT /encode.
// Runner mode: `model` (a body field, or ?model= on GETs) names the store model; /flush_cache flushes every loaded one
// and /health_generate checks the loaded ones (it never loads a model).
// Invariants: every request of a /generate is registered under its ids (each prompt's rid and, with n > 1, each
// sample's <rid>_<j>) until it settles, ids unique among running requests (so /abort_request finds exactly it), and
// aborted when the client goes away; admission, metrics and LoRA adapters are the OpenAI routes'; a stream frame is
// sent at most once per event-loop turn per output (deltas that came meanwhile are merged into it).
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { RequestHandle } from '../../engine-core.js';
import { embed } from '../../embeddings.js';
import { normalizeSamplingParams } from '../../sampling-params.js';
import { spindleVersion } from '../../version.js';
import { ApiError, badRequest } from '../api-error.js';
import { serverPooled } from '../embedding.js';
import { checkModel, Job, randomHex } from '../generation.js';
import { useModel, type ModelUse } from '../model-use.js';
import type { ServerEngine } from '../plugins/engine.js';
import { MAX_PROMPT_IDS, MAX_PROMPTS } from '../schemas.js';
import { SseStream } from '../sse.js';
import { SglangAnswer, WEIGHT_VERSION } from '../sglang/generate-output.js';
import { inputsOf, readGenerateRequest, type GenerateBody } from '../sglang/generate-request.js';

const HEALTH_TIMEOUT_MS = 20_000; // SGLang's HEALTH_CHECK_TIMEOUT

const INT32_MAX = 2 ** 31 - 1;
// input_ids: token ids (-1: an image embedding's place, with image_data), one list or a batch of them
const idRow = { type: 'array', maxItems: MAX_PROMPT_IDS, items: { type: 'integer', minimum: -1, maximum: INT32_MAX } };
const inputIds = { anyOf: [idRow, { type: 'array', maxItems: MAX_PROMPTS, items: idRow }, { type: 'null' }] };
const texts = { anyOf: [{ type: 'string' }, { type: 'array', maxItems: MAX_PROMPTS, items: { type: 'string' } }, { type: 'null' }] };
const perPrompt = (type: string) => ({ anyOf: [{ type }, { type: 'array', maxItems: MAX_PROMPTS, items: { type: [type, 'null'] } }, { type: 'null' }] });
const rid = { anyOf: [{ type: 'string', maxLength: 256 }, { type: 'array', maxItems: MAX_PROMPTS, items: { type: 'string', maxLength: 256 } }, { type: 'null' }] };

const generateSchema = {
  type: 'object',
  properties: {
    text: texts,
    input_ids: inputIds,
    sampling_params: { anyOf: [{ type: 'object' }, { type: 'array', maxItems: MAX_PROMPTS, items: { type: 'object' } }, { type: 'null' }] },
    return_logprob: perPrompt('boolean'),
    logprob_start_len: perPrompt('integer'),
    top_logprobs_num: perPrompt('integer'),
    return_text_in_logprobs: { type: ['boolean', 'null'] },
    stream: { type: ['boolean', 'null'] },
    lora_path: perPrompt('string'),
    rid,
    extra_key: { type: ['string', 'null'], maxLength: 1024 },
    cache_salt: { type: ['string', 'null'], maxLength: 1024 },
    model: { type: ['string', 'null'] },
  },
} as const;

const encodeSchema = { type: 'object', properties: { text: texts, input_ids: inputIds, rid, model: { type: ['string', 'null'] } } } as const;

/** /generate requests still running, by id: their engine requests (a prompt's rid holds all its n samples). */
class RunningRids {
  readonly #byId = new Map<string, RequestHandle[]>();

  /** Ids of `ids` a running request holds. */
  taken(ids: readonly string[]): string[] { return ids.filter((id) => this.#byId.has(id)); }

  /** Registers every entry (ids checked free by taken(), synchronously before); each leaves when its requests settle. */
  add(entries: readonly [string, RequestHandle[]][]): void {
    for (const [id, handles] of entries) {
      this.#byId.set(id, handles);
      void Promise.allSettled(handles.map((h) => h.result)).then(() => { if (this.#byId.get(id) === handles) this.#byId.delete(id); });
    }
  }

  abort(id: string | null): void {
    const lists = id === null ? [...this.#byId.values()] : [this.#byId.get(id) ?? []];
    for (const list of lists) for (const h of list) h.abort();
  }
}

/** The engine a request runs on (its `model` in runner mode; any name in single-model mode, as SGLang ignores it). */
function use(app: FastifyInstance, reply: FastifyReply, model: unknown, adapters: boolean): Promise<ModelUse> {
  return useModel(app, reply, model, { single: (e) => checkModel(e, model), adapters });
}

async function generate(app: FastifyInstance, body: GenerateBody, reply: FastifyReply, running: RunningRids,
  incremental: boolean): Promise<unknown> {
  const u = await use(app, reply, body.model, true);
  const { tokenizer, info } = await u.engine.ready();
  const req = await readGenerateRequest(body, u.engine.core, info.maxModelLen, tokenizer.vocabSize);
  const taken = running.taken(req.n > 1 ? [...req.rids, ...req.ids] : req.rids);
  if (taken.length > 0) throw badRequest(`rid: '${taken[0]}' is the id of a request still running`, 'rid');
  const target = { ...(req.loras ? { promptLoras: req.loras.map((l) => l ?? u.lora) } : { lora: u.lora }), cacheSalt: req.cacheSalt };
  const job = new Job(u.engine, req.prompts, req.params, app.metrics, target);
  job.bindToReply(reply);
  const answers = job.requests.map((r, k) => new SglangAnswer({
    rid: req.ids[k], promptIds: req.promptIds[r.prompt], logprobs: req.logprobs[r.prompt], noStopTrim: req.noStopTrim[r.prompt],
    zeroTokens: req.zeroTokens[r.prompt], tokenizer,
  }));
  running.add([
    ...req.rids.map((rid, p): [string, RequestHandle[]] => [rid, job.requests.filter((r) => r.prompt === p).map((r) => r.handle)]),
    ...(req.n > 1 ? job.requests.map((r, k): [string, RequestHandle[]] => [req.ids[k], [r.handle]]) : []),
  ]);
  if (!req.stream) {
    const results = await job.results();
    results.forEach((r, k) => answers[k].setResult(r));
    reply.type('application/json; charset=utf-8');
    return req.batch ? `[${answers.map((a) => a.json()).join(',')}]` : answers[0].json();
  }
  const sse = new SseStream(reply);
  const frame = (k: number): void => sse.sendJson(answers[k].json(req.batch ? k : undefined, incremental));
  try {
    await Promise.all(job.requests.map(async (r, k) => {
      let queued = false; // a frame waits for the next turn of the event loop, taking the deltas that come meanwhile
      for await (const d of job.deltas(r)) {
        answers[k].add(d, r.handle.cachedTokens, (performance.now() - job.started) / 1000);
        if (!queued && !answers[k].finished) {
          queued = true;
          setImmediate(() => { queued = false; if (!answers[k].finished) frame(k); });
        }
      }
      if (answers[k].finished) frame(k);
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
    random_seed: o.seed,
    chat_template: o.chatTemplate,
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

/** The engines a server-wide operation reaches: the one, or (runner mode) each loaded one not unloading. */
function servedEngines(app: FastifyInstance): ServerEngine[] {
  if (!app.runner) return [app.engine];
  return app.runner.entries.filter((e) => e.engine !== null && e.unloading === null).map((e) => e.engine!);
}

/** Flushes the prefix cache of every engine; the reasons of those that did not flush. */
async function flushAll(app: FastifyInstance): Promise<string[]> {
  const results = await Promise.all(servedEngines(app).map(async (e) => {
    try {
      await e.ready();
      return await e.core.flushCache();
    } catch (err) {
      return { flushed: false, blocks: 0, reason: (err as Error).message }; // closing or failed: nothing to flush
    }
  }));
  return results.filter((r) => !r.flushed).map((r) => r.reason!);
}

/**
 * SGLang's /health_generate for one engine: healthy when it makes progress within 20 s (any engine step, as SGLang
 * counts any output); an idle engine gets one greedy token to make (one probe at a time per engine; outside admission
 * and metrics); a failed forward pass or a model not ready is unhealthy at once.
 */
const probes = new WeakMap<ServerEngine, Promise<boolean>>();
function probe(engine: ServerEngine): Promise<boolean> {
  if (engine.state !== 'ready' || engine.failedSteps > 0) return Promise.resolve(false);
  let p = probes.get(engine);
  if (!p) {
    p = runProbe(engine).finally(() => probes.delete(engine));
    probes.set(engine, p);
  }
  return p;
}

async function runProbe(engine: ServerEngine): Promise<boolean> {
  const stats = (): { steps: number; busy: number } => {
    const s = engine.statsOrNull();
    return { steps: s?.steps ?? 0, busy: (s?.running ?? 0) + (s?.waiting ?? 0) };
  };
  const before = stats();
  const info = engine.core.readyValue?.info;
  const submission = before.busy === 0 && info
    ? engine.core.submitMany([[info.bosId >= 0 ? info.bosId : 0]], [normalizeSamplingParams({ temperature: 0, maxTokens: 1, ignoreEos: true })], { stream: false })
    : null;
  const deadline = performance.now() + HEALTH_TIMEOUT_MS;
  try {
    while (performance.now() < deadline) {
      if (engine.failedSteps > 0) return false;
      if (stats().steps > before.steps) return true;
      await new Promise((r) => setTimeout(r, 20));
    }
    return false;
  } finally {
    submission?.abort();
  }
}

export interface SglangRouteOptions {
  /** SGLang's --incremental-streaming-output: stream frames carry what they add, not the whole answer so far. */
  incrementalStreamingOutput?: boolean;
}

export default async function sglangRoutes(app: FastifyInstance, opts: SglangRouteOptions): Promise<void> {
  const running = new RunningRids();
  const incremental = opts.incrementalStreamingOutput === true;
  const generateRoute = { schema: { body: generateSchema } };
  app.post('/generate', generateRoute, (request, reply) => generate(app, request.body as GenerateBody, reply, running, incremental));
  app.put('/generate', generateRoute, (request, reply) => generate(app, request.body as GenerateBody, reply, running, incremental));

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

  // SGLang's health check through the engine (probe); runner mode: every loaded model (none loaded: the server is up)
  app.get('/health_generate', async (_request, reply) => {
    const engines = servedEngines(app);
    const ok = (await Promise.all(engines.map(probe))).every(Boolean);
    return reply.code(ok ? 200 : 503).send();
  });

  // SGLang's embeddings: `{ text | input_ids }` -> `{ embedding, meta_info: { id, prompt_tokens } }`, a list for a list.
  const encode = async (request: { body: unknown }, reply: FastifyReply): Promise<unknown> => {
    const body = request.body as { text?: unknown; input_ids?: unknown; rid?: string | string[] | null; model?: string | null };
    const { input, batch } = inputsOf(body);
    const inputs: (string | number[])[] = 'text' in input ? input.text : input.ids;
    const rids = body.rid == null ? inputs.map(() => randomHex(16)) : Array.isArray(body.rid) ? body.rid : [body.rid];
    if (rids.length !== inputs.length) throw badRequest(`rid has ${rids.length} entries for ${inputs.length} inputs`, 'rid');
    const { engine } = await use(app, reply, body.model, false);
    const r = await serverPooled(engine, reply, inputs.length, (signal) => embed(engine.core, inputs, { signal }, 'text' in input ? 'text' : 'input_ids'), app.metrics);
    const out = r.embeddings.map((embedding, i) => ({ embedding, meta_info: { id: rids[i], prompt_tokens: r.promptTokenIds[i].length } }));
    return batch ? out : out[0];
  };
  app.post('/encode', { schema: { body: encodeSchema } }, encode);
  app.put('/encode', { schema: { body: encodeSchema } }, encode);
}
