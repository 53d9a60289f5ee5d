// buildApp(options): the whole HTTP server as a Fastify instance composed of plugins (errors, engine, metrics,
// cors, auth) and routes (v1, api, health, metrics, tokenize). It does not listen; serve.ts does (tests call inject() or listen).
// Invariants: request bodies are JSON objects up to 2 MiB validated with coercion off (a string is never
// taken for a number); the app owns its engine and closes it in onClose.
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { ApiError } from './api-error.js';
import { authPlugin } from './plugins/auth.js';
import { corsPlugin } from './plugins/cors.js';
import { enginePlugin, ServerEngine, type ServerEngineOptions } from './plugins/engine.js';
import { errorsPlugin } from './plugins/errors.js';
import { metricsPlugin } from './plugins/metrics.js';
import ollamaChatRoute from './routes/ollama/chat.js';
import ollamaGenerateRoute from './routes/ollama/generate.js';
import ollamaModelsRoute from './routes/ollama/models.js';
import metricsRoute from './routes/metrics.js';
import chatCompletionsRoute from './routes/v1/chat-completions.js';
import completionsRoute from './routes/v1/completions.js';
import modelsRoute from './routes/v1/models.js';
import healthRoute from './routes/health.js';
import tokenizeRoute from './routes/tokenize.js';

export const BODY_LIMIT = 40 * 1024 * 1024; // bytes: room for a data-URL image at the 20 MiB image limit
export const REQUEST_TIMEOUT_MS = 120_000; // receiving one request

export interface AppOptions extends ServerEngineOptions {
  /** --api-key (repeatable); empty: no auth. */
  apiKeys?: string[];
  /** --cors-origins; empty: CORS off. */
  corsOrigins?: string[];
  logger?: FastifyServerOptions['logger'];
  bodyLimit?: number; // bytes
}

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: options.bodyLimit ?? BODY_LIMIT,
    requestTimeout: REQUEST_TIMEOUT_MS,
    return503OnClosing: true,
    forceCloseConnections: true, // serve.ts drains requests first; then no client keeps close() waiting
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
  });
  const engine = new ServerEngine(options);
  await app.register(errorsPlugin);
  await app.register(enginePlugin, { engine });
  await app.register(metricsPlugin);
  await app.register(corsPlugin, { origins: options.corsOrigins ?? [] });
  await app.register(authPlugin, { apiKeys: options.apiKeys ?? [] });
  app.addHook('onRequest', async (request) => {
    if (engine.state === 'closing' && request.url !== '/health' && request.url !== '/metrics') {
      throw new ApiError(503, 'the server is shutting down', { code: 'server_shutting_down' });
    }
  });
  await app.register(healthRoute);
  await app.register(modelsRoute);
  await app.register(chatCompletionsRoute);
  await app.register(completionsRoute);
  await app.register(tokenizeRoute);
  await app.register(metricsRoute);
  await app.register(ollamaGenerateRoute);
  await app.register(ollamaChatRoute);
  await app.register(ollamaModelsRoute);
  return app;
}
