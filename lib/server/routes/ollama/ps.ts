// GET /api/ps (Ollama): the models loaded now, as `ollama ps` reads them: name, model, size (bytes of the model
// files), digest, details, expires_at (when keep-alive unloads it; far in the future when kept forever; in the past
// while it is being unloaded), size_vram (its size when it runs on a GPU, else 0) and context_length.
// Single-model mode: the one model, loaded for the server's life (nothing while it loads or after it failed).
// Invariant: lists only engines whose model has finished loading; reads no file but GGUF headers (cached).
import type { FastifyInstance } from 'fastify';
import type { ServerEngine } from '../../plugins/engine.js';
import type { RunnerEntry } from '../../runner.js';
import { fileFacts, ollamaDetails } from '../../model-facts.js';
import { modelFacts, tagged } from './models.js';

const FOREVER_MS = 292 * 365.25 * 86_400_000; // what Ollama shows for "never unloads": about 292 years ahead

function expiresAt(e: RunnerEntry, now: number): number {
  if (e.unloadingSince !== null) return e.unloadingSince;
  if (e.expiresAt !== null) return e.expiresAt;
  return now + (e.keepAliveMs === Infinity ? FOREVER_MS : e.keepAliveMs); // in use: counts from its end
}

function details(path: string): Record<string, unknown> {
  try {
    return ollamaDetails(fileFacts(path).info);
  } catch {
    return { format: 'gguf', family: 'unknown', parameter_size: 'unknown', quantization_level: 'unknown' };
  }
}

function runnerModels(entries: RunnerEntry[]): Record<string, unknown>[] {
  const now = Date.now();
  return entries.map((e) => {
    const device = e.engine?.core.readyValue?.info.device ?? 'cpu';
    return {
      name: e.model.name, model: e.model.name, size: e.model.size, digest: e.model.digest, details: details(e.model.file),
      expires_at: new Date(expiresAt(e, now)).toISOString(), size_vram: device === 'cuda' ? e.model.size : 0, context_length: e.ctx,
    };
  });
}

async function singleModel(engine: ServerEngine): Promise<Record<string, unknown>[]> {
  const ready = engine.core.readyValue;
  if (engine.state !== 'ready' || !ready) return [];
  const f = await modelFacts(engine);
  const name = tagged(engine.modelName);
  return [{
    name, model: name, size: f.size, digest: f.digest, details: ollamaDetails(f.file),
    expires_at: new Date(Date.now() + FOREVER_MS).toISOString(), size_vram: ready.info.device === 'cuda' ? f.size : 0,
    context_length: ready.info.maxModelLen,
  }];
}

export default async function ollamaPsRoute(app: FastifyInstance): Promise<void> {
  app.get('/api/ps', async () => ({ models: app.runner ? runnerModels(app.runner.entries) : await singleModel(app.engine) }));
}
