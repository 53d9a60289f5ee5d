// The engine a request runs on. Single-model mode: the one engine, the request's model name checked by the
// route's rule. Runner mode: the store model the request names, loaded on demand by the ModelRunner at the
// request's context length (num_ctx) and kept for its keep_alive, leased until the response is sent or the client
// goes away, and past that until the work a route holds it for (ModelUse.hold: a background response) settles. Also what a store model's Modelfile PARAMETERs mean for a request: defaults under its own options.
// Invariants: every lease taken here is released exactly once, on the response's 'close' or, when later, once every
// hold has settled; a bad keep_alive or
// num_ctx is a 400 naming the field; a model the store lacks is Ollama's 404 (never pulled on demand).
import type { FastifyInstance, FastifyReply } from 'fastify';
import { limitRefusal } from '../native.js';
import { ApiError, badRequest } from './api-error.js';
import { KeepAliveError, parseKeepAlive } from './keep-alive.js';
import type { ServerEngine } from './plugins/engine.js';
import { MODELFILE_ADAPTER } from '../engine-core.js';
import type { GgufSampling } from '../gguf/file-info.js';
import type { OllamaOptions } from './routes/ollama/ollama.js';
import { findStoreModel, type StoreModel } from './store-catalog.js';

export interface ModelUse {
  engine: ServerEngine;
  name: string; // the name responses echo
  model: StoreModel | null; // runner mode: the store model (its manifest: template, system, parameters, messages)
  lora: string | null; // the LoRA adapter the request's model name selects (null: the base model)
  /** Keeps the model loaded until `work` settles, even after the response was sent (a background response). */
  hold(work: Promise<unknown>): void;
}

export interface UseOptions {
  /** Single-model mode: the route's check of the request's model name; returns the name to echo. */
  single(engine: ServerEngine): string;
  keepAlive?: unknown; // the request's keep_alive (Ollama routes)
  numCtx?: number | null; // the request's options.num_ctx (Ollama routes)
  /** The route generates, so a LoRA adapter's name selects the adapter; elsewhere (embeddings, scores) it is a 400. */
  adapters?: boolean;
}

/** A request's keep_alive in milliseconds (undefined: the server's default), or a 400. */
export function keepAliveOf(v: unknown): number | undefined {
  try {
    return parseKeepAlive(v);
  } catch (e) {
    if (e instanceof KeepAliveError) throw badRequest(e.message, 'keep_alive');
    throw e;
  }
}

/** Runner mode: the store model a request names (400 when it names none, Ollama's 404 when the store lacks it). */
export function requestedModel(app: FastifyInstance, requested: unknown): StoreModel {
  if (typeof requested !== 'string' || requested === '') throw new ApiError(400, 'model is required', { param: 'model', code: 'missing_required_parameter' });
  return findStoreModel(app.store!, requested);
}

export async function useModel(app: FastifyInstance, reply: FastifyReply, requested: unknown, opts: UseOptions): Promise<ModelUse> {
  const runner = app.runner;
  if (!runner) {
    const name = opts.single(app.engine);
    const lora = app.engine.loraFor(name);
    if (lora !== null && !opts.adapters) {
      throw badRequest(`the model '${name}' is a LoRA adapter; adapters apply to generation (chat, completions, responses, ` +
        `/api/chat, /api/generate), not here: name the base model '${app.engine.modelName}'`, 'model');
    }
    return { engine: app.engine, name, model: null, lora, hold: () => {} };
  }
  const keepAliveMs = keepAliveOf(opts.keepAlive);
  const model = requestedModel(app, requested);
  if (model.adapter && !opts.adapters) {
    throw badRequest(`the model '${model.name}' has a LoRA adapter (its Modelfile's ADAPTER), which applies to generation ` +
      '(chat, completions, responses, /api/chat, /api/generate), not here: name its base model', 'model');
  }
  const ctx = runner.contextFor(model, opts.numCtx);
  const refusal = limitRefusal('maxModelLen', ctx);
  if (refusal !== null) {
    throw badRequest(`${opts.numCtx != null ? 'options.' : `the Modelfile of ${model.name}: `}num_ctx must be ${refusal} (got ${ctx})`, 'options.num_ctx');
  }
  const lease = await runner.acquire(model, ctx, keepAliveMs);
  const raw = reply.raw;
  if (raw.destroyed) {
    lease.release();
    throw badRequest('the client closed the connection before the model was ready');
  }
  let holds = 0, closed = false, released = false;
  const releaseWhenFree = (): void => {
    if (!closed || holds > 0 || released) return;
    released = true;
    lease.release();
  };
  raw.once('close', () => { closed = true; releaseWhenFree(); });
  const hold = (work: Promise<unknown>): void => {
    if (released) throw new Error('useModel: hold() after the lease was released (the client went away first)');
    holds++;
    void work.then(() => {}, () => {}).finally(() => { holds--; releaseWhenFree(); });
  };
  // a Modelfile ADAPTER: the model's every request runs with it (its engine loaded it; runner.ts)
  return { engine: lease.engine, name: requested as string, model, lora: model.adapter ? MODELFILE_ADAPTER : null, hold };
}

// Modelfile PARAMETERs the engine takes at load time (the runner applies num_ctx); never sampling defaults.
const LOAD_TIME = new Set(['num_ctx', 'num_batch', 'num_gpu', 'main_gpu', 'use_mmap', 'num_thread', 'num_keep', 'draft_num_predict']);

/** GGUF general.sampling.* (EngineCore.modelSampling) as the request fields they default, in the API's names. */
export function modelSamplingFields(s: GgufSampling): Record<string, number> {
  const out: Record<string, number> = {};
  if (s.temperature !== undefined) out.temperature = s.temperature;
  if (s.topP !== undefined) out.top_p = s.topP;
  if (s.topK !== undefined) out.top_k = s.topK;
  if (s.minP !== undefined) out.min_p = s.minP;
  if (s.repetitionPenalty !== undefined) out.repetition_penalty = s.repetitionPenalty;
  return out;
}

/**
 * Ollama `options`: the model's Modelfile PARAMETERs under the request's own (Ollama's precedence). Runner mode
 * (a store model): num_ctx is not passed on, the runner loaded the engine at it (capped at the trained context, as
 * Ollama caps it), so it is never refused against the loaded context.
 */
export function withModelOptions(model: StoreModel | null, options: OllamaOptions | null | undefined): OllamaOptions | null | undefined {
  if (model === null) return options;
  const out: OllamaOptions = {};
  for (const [k, v] of Object.entries(model.manifest.parameters ?? {})) if (!LOAD_TIME.has(k)) out[k] = v;
  for (const [k, v] of Object.entries(options ?? {})) if (v !== null && v !== undefined && k !== 'num_ctx') out[k] = v;
  return out;
}

// Modelfile PARAMETER -> the OpenAI-side sampling field it defaults.
const OPENAI_FIELDS: Record<string, string> = {
  temperature: 'temperature', top_p: 'top_p', top_k: 'top_k', min_p: 'min_p', repeat_penalty: 'repetition_penalty',
  repeat_last_n: 'repeat_last_n', presence_penalty: 'presence_penalty', frequency_penalty: 'frequency_penalty',
  seed: 'seed', stop: 'stop', num_predict: 'max_tokens',
};

/**
 * The /v1 routes' sampling defaults: the model maker's recommended sampling (the GGUF's general.sampling.*, as vLLM
 * applies generation_config.json; none with --generation-config vllm), then the store model's Modelfile PARAMETERs
 * over them (runner mode). A field the request gives wins over both (samplingFrom).
 */
export function openAiDefaults(use: Pick<ModelUse, 'engine' | 'model'>): Record<string, unknown> {
  const out: Record<string, unknown> = modelSamplingFields(use.engine.core.modelSampling());
  for (const [k, v] of Object.entries(use.model?.manifest.parameters ?? {})) {
    const field = OPENAI_FIELDS[k];
    if (!field) continue;
    if ((k === 'num_predict' || k === 'seed') && typeof v === 'number' && v < 0) continue; // Ollama: -1 = unlimited / random
    if (k === 'num_predict' && v === 0) continue;
    out[field] = v;
  }
  return out;
}
