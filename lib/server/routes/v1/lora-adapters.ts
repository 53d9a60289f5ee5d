// vLLM's runtime LoRA updating: POST /v1/load_lora_adapter `{ lora_name, lora_path }` loads an adapter (llama.cpp's
// GGUF format) into the running engine under that name, POST /v1/unload_lora_adapter `{ lora_name }` drops one
// (requests already running finish with it). On only with allowRuntimeLoraUpdating (VLLM_ALLOW_RUNTIME_LORA_UPDATING
// or SPINDLE_ALLOW_RUNTIME_LORA_UPDATING); answers as vLLM: a plain-text success line, errors as JSON.
// Invariant: a name is loaded at most once, never under a served model's name; a failed load changes nothing.
import type { FastifyInstance } from 'fastify';
import { LoraUpdateError } from '../../../engine-core.js';
import { ApiError, badRequest } from '../../api-error.js';

interface LoadBody { lora_name?: unknown; lora_path?: unknown; load_inplace?: unknown }

function enabled(app: FastifyInstance): void {
  if (app.runner) throw badRequest('runtime LoRA updating serves one model; runner mode (--ollama) takes adapters from Modelfiles (ADAPTER)');
  if (!app.engine.allowRuntimeLoraUpdating) {
    throw new ApiError(404, 'runtime LoRA updating is off: set VLLM_ALLOW_RUNTIME_LORA_UPDATING=true (or SPINDLE_ALLOW_RUNTIME_LORA_UPDATING) ' +
      'when starting the server', { code: 'not_found' });
  }
}

function nameOf(body: LoadBody): string {
  if (typeof body.lora_name !== 'string' || body.lora_name === '') throw badRequest("lora_name must be the adapter's name", 'lora_name');
  return body.lora_name;
}

async function run(change: () => Promise<void>): Promise<void> {
  try {
    await change();
  } catch (e) {
    if (e instanceof LoraUpdateError) {
      throw new ApiError(e.status, e.message, { code: e.status === 404 ? 'not_found' : e.status === 503 ? 'model_unavailable' : 'invalid_value' });
    }
    throw e;
  }
}

export default async function loraAdapterRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: LoadBody }>('/v1/load_lora_adapter', async (request, reply) => {
    enabled(app);
    const body = (request.body ?? {}) as LoadBody;
    if (typeof body.lora_name !== 'string' || typeof body.lora_path !== 'string' || body.lora_name === '' || body.lora_path === '') {
      throw badRequest("Both 'lora_name' and 'lora_path' must be provided.", body.lora_name ? 'lora_path' : 'lora_name');
    }
    const name = body.lora_name;
    if (!/^[A-Za-z0-9_.:/@-]{1,256}$/.test(name) || name.includes('@')) {
      throw badRequest(`lora_name '${name}' must be 1 to 256 letters, digits or _ . : / -`, 'lora_name');
    }
    if (app.engine.servedModelNames.includes(name)) throw badRequest(`lora_name '${name}' is a served model name`, 'lora_name');
    if (body.load_inplace === true) throw badRequest('load_inplace is not supported: unload the adapter, then load it again', 'load_inplace');
    await run(() => app.engine.core.loadLora(name, body.lora_path as string));
    reply.type('text/plain; charset=utf-8');
    return `Success: LoRA adapter '${name}' added successfully.`;
  });
  app.post<{ Body: LoadBody }>('/v1/unload_lora_adapter', async (request, reply) => {
    enabled(app);
    const name = nameOf((request.body ?? {}) as LoadBody);
    await run(() => app.engine.core.unloadLora(name));
    reply.type('text/plain; charset=utf-8');
    return `Success: LoRA adapter '${name}' removed successfully.`;
  });
}
