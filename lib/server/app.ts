// buildApp(options): the whole HTTP server as a Fastify instance composed of plugins (errors, engine, metrics,
// cors, auth) and routes (v1, api, health, metrics, tokenize, and the web UI at / unless options.ui is false). It does not listen; serve.ts does (tests call inject() or listen).
// Two modes: one model (options.engine, served under servedModelNames), or runner mode (options.runner: requests
// name models of the store, loaded on demand by a ModelRunner; the Ollama management routes work).
// With a root path (--root-path, root-path.ts) every route also answers under that prefix; every request gets an id
// (request-id.ts), sent back in `x-request-id` and logged as `reqId` when a logger is given (--log-format json).
// Invariants: request bodies are JSON objects up to 2 MiB validated with coercion off (a string is never
// taken for a number); the app owns its engines and closes them in onClose.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { ApiError } from './api-error.js';
import { authPlugin } from './plugins/auth.js';
import { corsPlugin } from './plugins/cors.js';
import { enginePlugin, ServerEngine, type ServerEngineOptions } from './plugins/engine.js';
import { errorsPlugin } from './plugins/errors.js';
import { metricsPlugin } from './plugins/metrics.js';
import { ollamaBodyPlugin } from './plugins/ollama-body.js';
import { userStore, type ModelStore } from '../models/store.js';
import { requestId } from './request-id.js';
import { stripRootPath } from './root-path.js';
import { ModelRunner } from './runner.js';
import ollamaManageRoute from './routes/ollama/manage.js';
import ollamaBlobRoutes from './routes/ollama/blobs.js';
import ollamaPsRoute from './routes/ollama/ps.js';
import ollamaChatRoute from './routes/ollama/chat.js';
import ollamaGenerateRoute from './routes/ollama/generate.js';
import ollamaModelsRoute from './routes/ollama/models.js';
import metricsRoute from './routes/metrics.js';
import chatCompletionsRoute from './routes/v1/chat-completions.js';
import completionsRoute from './routes/v1/completions.js';
import embeddingsRoute from './routes/v1/embeddings.js';
import rerankRoutes from './routes/v1/rerank.js';
import responsesRoute from './routes/v1/responses.js';
import ollamaEmbedRoute from './routes/ollama/embed.js';
import modelsRoute from './routes/v1/models.js';
import loraAdapterRoutes from './routes/v1/lora-adapters.js';
import healthRoute from './routes/health.js';
import tokenizeRoute from './routes/tokenize.js';
import sglangRoutes from './routes/sglang.js';
import uiRoute from './routes/ui.js';

export const BODY_LIMIT = 40 * 1024 * 1024; // bytes: room for a data-URL image at the 20 MiB image limit
export const REQUEST_TIMEOUT_MS = 120_000; // receiving one request

export interface AppOptions extends ServerEngineOptions {
  /** --api-key (repeatable); empty: no auth. */
  apiKeys?: string[];
  /** --cors-origins; empty: CORS off. */
  corsOrigins?: string[];
  logger?: FastifyServerOptions['logger'];
  /** A pino logger for the request lines (`--log-format json`); give this or `logger`, not both. */
  loggerInstance?: FastifyBaseLogger;
  /** false (--disable-log-requests): no `incoming request` / `request completed` lines; errors are still logged. */
  logRequests?: boolean;
  /** --root-path, normalized by parseRootPath ('' or absent: none): every route also answers under it. */
  rootPath?: string;
  bodyLimit?: number; // bytes
  /** The web UI at `/` (default true; `spindle serve --no-ui`: false). */
  ui?: boolean;
  /** SGLang's --incremental-streaming-output: /generate stream frames carry what they add, not the whole answer. */
  incrementalStreamingOutput?: boolean;
  /**
   * Runner mode (`spindle serve --ollama`): requests name models of the store, loaded on first use; `engine` then
   * carries the flags' engine options (its model is ignored) and servedModelNames is ignored.
   */
  runner?: RunnerModeOptions;
}

export interface RunnerModeOptions {
  store?: ModelStore; // default: SPINDLE_HOME
  maxLoaded?: number; // --max-loaded-models, default 1
  keepAliveMs?: number; // --keep-alive, default 5 minutes; Infinity: forever
  /** Where /api/pull reads HF_ENDPOINT, HF_TOKEN and the Hugging Face cache settings (default process.env). */
  env?: NodeJS.ProcessEnv;
}

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const rootPath = options.rootPath ?? '';
  const app = Fastify({
    ...(options.loggerInstance ? { loggerInstance: options.loggerInstance } : { logger: options.logger ?? false }),
    ...(options.logRequests === false ? { logController: new LogController({ disableRequestLogging: true }) } : {}),
    genReqId: requestId,
    rewriteUrl: rootPath === '' ? undefined : (req) => stripRootPath(req.url ?? '/', rootPath),
    bodyLimit: options.bodyLimit ?? BODY_LIMIT,
    // runner mode takes model uploads (POST /api/blobs: gigabytes, minutes), which the whole-request limit would cut
    // off; those uploads get an idle limit of their own (blobs.ts), and headers keep Node's 60 s limit
    requestTimeout: options.runner ? 0 : REQUEST_TIMEOUT_MS,
    return503OnClosing: true,
    forceCloseConnections: true, // serve.ts drains requests first; then no client keeps close() waiting
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
  });
  const runner = options.runner ? new ModelRunner({
    engine: options.engine, maxLoaded: options.runner.maxLoaded, keepAliveMs: options.runner.keepAliveMs,
    maxQueuedRequests: options.maxQueuedRequests, toolCallParser: options.toolCallParser, reasoningParser: options.reasoningParser,
  }) : null;
  const engine = runner ? null : new ServerEngine(options);
  const store = options.runner ? options.runner.store ?? userStore() : null;
  const host = (runner ?? engine)!;
  app.addHook('onRequest', async (request, reply) => { reply.header('x-request-id', request.id); });
  await app.register(errorsPlugin);
  await app.register(ollamaBodyPlugin);
  await app.register(enginePlugin, { engine, runner, store, hubEnv: options.runner?.env ?? process.env });
  await app.register(metricsPlugin);
  await app.register(corsPlugin, { origins: options.corsOrigins ?? [] });
  await app.register(authPlugin, { apiKeys: options.apiKeys ?? [] });
  // while draining, new work is refused; health, metrics and the polling / cancelling of background responses (the
  // drain waits for those) still answer
  const drainable = (method: string, route: string | undefined): boolean =>
    (method === 'GET' && route === '/v1/responses/:id') || (method === 'POST' && route === '/v1/responses/:id/cancel');
  app.addHook('onRequest', async (request) => {
    if (host.state === 'closing' && request.url !== '/health' && request.url !== '/metrics' &&
      !drainable(request.method, request.routeOptions.url)) {
      throw new ApiError(503, 'the server is shutting down', { code: 'server_shutting_down' });
    }
  });
  await app.register(healthRoute);
  await app.register(modelsRoute);
  await app.register(loraAdapterRoutes);
  await app.register(chatCompletionsRoute);
  await app.register(completionsRoute);
  await app.register(embeddingsRoute);
  await app.register(rerankRoutes);
  await app.register(responsesRoute);
  await app.register(ollamaEmbedRoute);
  await app.register(tokenizeRoute);
  await app.register(sglangRoutes, { incrementalStreamingOutput: options.incrementalStreamingOutput });
  await app.register(metricsRoute);
  await app.register(ollamaGenerateRoute);
  await app.register(ollamaChatRoute);
  await app.register(ollamaModelsRoute);
  await app.register(ollamaPsRoute);
  await app.register(ollamaManageRoute);
  await app.register(ollamaBlobRoutes);
  if (options.ui !== false) await app.register(uiRoute, { rootPath });
  return app;
}
