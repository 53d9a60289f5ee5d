// Runs the app on a socket and shuts it down gracefully: startServer() listens; shutdown() stops taking
// requests (503), lets in-flight ones finish for up to the drain timeout, aborts the rest (their responses end
// with finish_reason 'abort'), then closes the app and joins the engine thread.
// With options.warmup (single-model mode), once listening it sends the warm-up request to its own socket
// (warmup.ts); the engine reports ready (/health 200) only after it.
// Invariant: shutdown() is idempotent and resolves (never rejects) once everything is closed.
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { buildApp, type AppOptions } from './app.js';
import { warmUp, warmupContent } from './warmup.js';

export const DRAIN_TIMEOUT_MS = 30_000;
const ABORT_FLUSH_MS = 5_000; // after aborting: time for the aborted responses to be written

export interface ServeOptions extends AppOptions {
  host?: string; // default 127.0.0.1
  port?: number; // default 8000; 0 = any free port
  drainTimeoutMs?: number;
}

export interface RunningServer {
  app: FastifyInstance;
  url: string; // http://host:port
  /** Graceful stop; `drained` says whether every request finished before the deadline. */
  shutdown(): Promise<{ drained: boolean }>;
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const app = await buildApp(options);
  const host = options.host ?? '127.0.0.1';
  try {
    await app.listen({ host, port: options.port ?? 8000 });
  } catch (e) {
    await app.close();
    throw e;
  }
  const address = app.server.address() as AddressInfo;
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  if (!app.runner && options.warmup) {
    const engine = app.engine;
    engine.startWarmup(async () => {
      const ready = await engine.core.ready();
      return warmUp(url, { model: engine.modelName, apiKey: options.apiKeys?.[0], content: warmupContent(ready),
        chat: ready.tokenizer.chatTemplate !== null });
    });
  }
  let stopping: Promise<{ drained: boolean }> | undefined;
  const shutdown = (): Promise<{ drained: boolean }> => {
    stopping ??= (async () => {
      const engine = app.runner ?? app.engine; // runner mode: every loaded engine
      engine.startClosing();
      const drained = await engine.waitIdle(options.drainTimeoutMs ?? DRAIN_TIMEOUT_MS);
      if (!drained) {
        await engine.close(); // aborts what is left; their responses finish with 'abort'
        await engine.waitIdle(ABORT_FLUSH_MS);
      }
      await app.close();
      return { drained };
    })();
    return stopping;
  };
  return { app, url, shutdown };
}

/** SIGTERM / SIGINT -> shutdown(); resolves with the exit code (0) once closed. A second signal exits at once. */
export function shutdownOnSignals(server: RunningServer, log: (line: string) => void): Promise<number> {
  return new Promise((resolve) => {
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (signalled) {
        log(`${signal} again: exiting now`);
        process.exit(1);
      }
      signalled = true;
      log(`${signal}: not taking new requests; draining in-flight ones`);
      void server.shutdown().then(({ drained }) => {
        log(drained ? 'all requests finished; stopped' : 'drain deadline reached: aborted the remaining requests; stopped');
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
        resolve(0);
      });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
