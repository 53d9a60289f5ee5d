// POST /api/pull (Ollama, runner mode): a hub reference (hf.co/<org>/<repo>[:<quant>] or <org>/<repo>[:<quant>])
// into the store with lib/models pullHub, or an Ollama name without a slash (llama3.2[:tag]) from Ollama's registry
// with pullOllama, as `spindle pull` does. Streamed (the default) as Ollama's NDJSON progress:
// { status: 'pulling manifest' }, { status: 'pulling <digest12>', digest: 'sha256:<hex>', total, completed } per
// file (at most every 100 ms, and at the end), { status: 'verifying sha256 digest' }, { status: 'writing manifest' },
// { status: 'success' }; `stream: false` answers { status: 'success' } once done.
// Invariants: a name that is neither is a 400 before anything starts; a failure after the stream
// started is one { error } line; the client going away aborts the download (resumable later).
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DownloadError, type Progress } from '../../../models/download.js';
import { HubError, hubConfig, listRepoFiles } from '../../../models/hub-client.js';
import { pullOllama } from '../../../models/ollama-registry.js';
import { pullHub } from '../../../models/pull.js';
import { ModelRefError, parseModelRef, pullTargetOf, type PullTarget } from '../../../models/ref.js';
import type { ModelStore } from '../../../models/store.js';
import { ApiError, badRequest } from '../../api-error.js';
import { SseStream } from '../../sse.js';
import { ollamaPullSchema } from './schemas.js';

const PROGRESS_EVERY_MS = 100;

/** The hub repository and quantization, or the Ollama name, a pull names; or a 400. */
function pullTarget(name: string): PullTarget {
  let r;
  try {
    r = parseModelRef(name);
  } catch (e) {
    if (e instanceof ModelRefError) throw badRequest(`model: ${e.message}`, 'model');
    throw e;
  }
  if (r.kind !== 'path') return pullTargetOf(r);
  throw badRequest(`model: '${name}' is a file path; this server pulls GGUF models from the Hugging Face hub ` +
    "(hf.co/<org>/<repo>[:<quant>] or <org>/<repo>[:<quant>]) and Ollama's registry (<name>[:<tag>])", 'model', 'invalid_value');
}

/** A pull failure as the HTTP answer it deserves (the hub's 404 stays a 404; network trouble is a 502). */
export function pullError(e: unknown): ApiError {
  if (e instanceof HubError) {
    const status = e.code === 'not_found' || e.code === 'no_file' ? 404 : e.code === 'gated' ? 403 : e.code === 'unauthorized' ? 401 : 502;
    return new ApiError(status, `pull: ${e.message}`, { code: `hub_${e.code}` });
  }
  if (e instanceof DownloadError) return new ApiError(e.code === 'disk_full' ? 507 : 502, `pull: ${e.message}`, { code: `download_${e.code}` });
  if (e instanceof ApiError) return e;
  return new ApiError(500, `pull: ${(e as Error).message}`);
}

/** Ollama-shaped progress lines for pullHub's events; the files' digests come from the hub's list, read alongside. */
function progressLines(send: (line: Record<string, unknown>) => void, digests: Map<string, string>): Progress {
  const last = new Map<string, number>(); // file -> time of its last line
  return ({ file, done, total, phase }) => {
    const sha = digests.get(file);
    const status = `pulling ${sha ? sha.slice(0, 12) : file}`;
    const head = { status, ...(sha ? { digest: `sha256:${sha}` } : {}), total };
    if (phase === 'verify') {
      send({ status: 'verifying sha256 digest' });
      return;
    }
    if (phase === 'done') {
      send({ ...head, completed: total });
      return;
    }
    const now = Date.now();
    if (done < total && now - (last.get(file) ?? 0) < PROGRESS_EVERY_MS) return;
    last.set(file, now);
    send({ ...head, completed: done });
  };
}

async function pull(app: FastifyInstance, store: ModelStore, reply: FastifyReply, name: string, stream: boolean): Promise<unknown> {
  const target = pullTarget(name);
  const cfg = hubConfig(app.hubEnv);
  const controller = new AbortController();
  reply.raw.once('close', () => { if (!reply.raw.writableFinished) controller.abort(); });
  const digests = new Map<string, string>();
  const run = (onProgress?: Progress) => target.kind === 'hub'
    ? pullHub(store, target.repo, target.quant, { cfg, env: app.hubEnv, onProgress, signal: controller.signal })
    : pullOllama(store, target.namespace, target.name, target.tag, {
      env: app.hubEnv, onProgress, signal: controller.signal, onFiles: (fs) => fs.forEach((f) => digests.set(f.file, f.sha256)),
    });
  if (!stream) {
    await run().catch((e: unknown) => { throw pullError(e); });
    return { status: 'success' };
  }
  const out = new SseStream(reply, { contentType: 'application/x-ndjson', keepAlive: false });
  out.line({ status: 'pulling manifest' });
  if (target.kind === 'hub') listRepoFiles(target.repo, cfg).then((files) => files.forEach((f) => { if (f.sha256) digests.set(f.path, f.sha256); }), () => {});
  try {
    await run(progressLines((line) => out.line(line), digests));
    out.line({ status: 'writing manifest' });
    out.line({ status: 'success' });
  } catch (e) {
    out.line({ error: pullError(e).message });
  }
  out.end(false);
  return undefined;
}

export function registerPull(app: FastifyInstance, runnerOnly: (route: string) => ModelStore): void {
  app.post('/api/pull', { schema: { body: ollamaPullSchema } }, async (request, reply) => {
    const store = runnerOnly('/api/pull');
    const body = request.body as { model?: string; name?: string; stream?: boolean | null };
    const name = body.model || body.name;
    if (!name) throw new ApiError(400, 'model is required', { param: 'model', code: 'missing_required_parameter' });
    return pull(app, store, reply, name, body.stream !== false);
  });
}
