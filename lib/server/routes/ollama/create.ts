// POST /api/create (Ollama's JSON create API, runner mode): a named model of the store FROM another (a store name,
// or a hub reference pulled before), with template, system, parameters, messages and license over what that model
// already had (Ollama's inheritance: a parameter given here replaces the inherited one), as `spindle create` does.
// `modelfile` (Ollama's older API) is accepted too: its FROM / TEMPLATE / SYSTEM / PARAMETER / MESSAGE / LICENSE,
// under the JSON fields. Streamed (the default) as NDJSON { status } lines ending with { status: 'success' }.
// Invariants: everything is checked before the manifest is written (a bad field is a 400 naming it, an unknown FROM
// Ollama's 404), and nothing is written on a refusal; FROM never names a file of the server; nothing is pulled.
import type { FastifyInstance } from 'fastify';
import { DEPRECATED_PARAMETERS, ModelfileError, parseModelfile, PARAMETER_TYPES, type Modelfile } from '../../../modelfile/index.js';
import { parseParameterValue } from '../../../modelfile/parameters.js';
import { ModelRefError, parseModelRef } from '../../../models/ref.js';
import { localKey, type Manifest, type ModelStore } from '../../../models/store.js';
import { ApiError, badRequest } from '../../api-error.js';
import { findStoreModel } from '../../store-catalog.js';
import { SseStream } from '../../sse.js';
import { ollamaCreateSchema } from './schemas.js';

interface CreateBody {
  model?: string;
  name?: string;
  from?: string;
  modelfile?: string;
  template?: string;
  system?: string;
  parameters?: Record<string, unknown> | null;
  messages?: { role: string; content: string }[] | null;
  license?: string | string[] | null;
  stream?: boolean | null;
  quantize?: string | null;
  files?: Record<string, unknown> | null;
  adapters?: Record<string, unknown> | null;
}

type Parameters = NonNullable<Manifest['parameters']>;

/** One JSON parameter value checked against its Ollama type (numbers and booleans as JSON, or as their text). */
function parameterValue(name: string, v: unknown): number | string | string[] | boolean {
  const type = PARAMETER_TYPES[name];
  const where = `parameters.${name}`;
  if (type === 'string[]') {
    if (typeof v === 'string') return [v];
    if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
    throw badRequest(`${where} must be a string or an array of strings`, where);
  }
  if (type === 'bool' && typeof v === 'boolean') return v;
  if (type !== 'bool' && typeof v === 'number' && Number.isFinite(v) && (type === 'float' || Number.isSafeInteger(v))) return v;
  if (typeof v === 'string') {
    const parsed = parseParameterValue(type, v);
    if ('value' in parsed) return parsed.value;
    throw badRequest(`${where}: ${JSON.stringify(v)} ${parsed.problem}`, where);
  }
  throw badRequest(`${where} must be ${type === 'bool' ? 'a boolean' : type === 'int' ? 'an integer' : 'a number'} (got ${JSON.stringify(v)})`, where);
}

function checkParameters(input: Record<string, unknown>): Parameters {
  const out: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(input)) {
    if (DEPRECATED_PARAMETERS.has(name)) continue; // Ollama drops them too
    if (!PARAMETER_TYPES[name]) {
      throw badRequest(`parameters: unknown parameter ${JSON.stringify(name)}; known parameters: ${Object.keys(PARAMETER_TYPES).join(', ')}`, `parameters.${name}`);
    }
    if (v !== null && v !== undefined) out[name] = parameterValue(name, v);
  }
  return out as Parameters;
}

function checkMessages(messages: { role: string; content: string }[]): { role: string; content: string }[] {
  messages.forEach((m, i) => {
    if (!['system', 'user', 'assistant'].includes(m.role)) throw badRequest(`messages[${i}].role must be system, user or assistant (got ${JSON.stringify(m.role)})`, `messages[${i}].role`);
  });
  return messages.map((m) => ({ role: m.role, content: m.content }));
}

function parsedModelfile(text: string | undefined): Modelfile | null {
  if (text === undefined || text.trim() === '') return null;
  try {
    return parseModelfile(text);
  } catch (e) {
    if (e instanceof ModelfileError) throw badRequest(`modelfile: ${e.message}`, 'modelfile');
    throw e;
  }
}

function refuseUnsupported(body: CreateBody): void {
  if (body.quantize) throw badRequest('quantize: this server does not quantize models', 'quantize', 'unsupported_parameter');
  if (body.files && Object.keys(body.files).length > 0) {
    throw badRequest('files: uploaded blobs are not supported; create FROM a model of the store (spindle create takes local .gguf files)', 'files', 'unsupported_parameter');
  }
  if (body.adapters && Object.keys(body.adapters).length > 0) {
    throw badRequest('adapters: uploaded adapter blobs are not supported; `spindle create` takes a Modelfile ADAPTER (a local ' +
      'LoRA adapter file), and a model created FROM one keeps its adapter', 'adapters', 'unsupported_parameter');
  }
}

/** The manifest the request describes, checked whole. */
function manifestOf(store: ModelStore, body: CreateBody, name: string): Manifest {
  refuseUnsupported(body);
  const mf = parsedModelfile(body.modelfile);
  if (mf?.adapters.length) {
    throw badRequest('modelfile: ADAPTER names a file, and this server reads no file a request names; `spindle create` ' +
      'takes a Modelfile ADAPTER, and a model created FROM one keeps its adapter', 'modelfile', 'unsupported_parameter');
  }
  const from = body.from || mf?.from;
  if (!from) throw new ApiError(400, 'from is required (the model to build on: a store name, or a hub reference pulled before)', { param: 'from', code: 'missing_required_parameter' });
  const base = findStoreModel(store, from, 'from').manifest;
  const messages = body.messages?.length ? checkMessages(body.messages) : mf?.messages.length ? mf.messages : base.messages ?? [];
  const license = typeof body.license === 'string' ? [body.license] : body.license?.length ? body.license : mf?.license.length ? mf.license : base.license ?? [];
  return {
    schemaVersion: 1, name, createdAt: new Date().toISOString(), source: `FROM ${from}`, model: base.model, mmproj: base.mmproj, adapter: base.adapter ?? null,
    template: body.template ?? mf?.template ?? base.template ?? null,
    system: body.system ?? mf?.system ?? base.system ?? null,
    parameters: { ...(base.parameters ?? {}), ...(mf?.parameters as Parameters | undefined), ...checkParameters(body.parameters ?? {}) },
    messages, license,
  };
}

export function registerCreate(app: FastifyInstance, runnerOnly: (route: string) => ModelStore): void {
  app.post('/api/create', { schema: { body: ollamaCreateSchema } }, async (request, reply) => {
    const store = runnerOnly('/api/create');
    const body = request.body as CreateBody;
    const requested = body.model || body.name;
    if (!requested) throw new ApiError(400, 'model is required (the name to create)', { param: 'model', code: 'missing_required_parameter' });
    let target;
    try {
      target = parseModelRef(requested);
    } catch (e) {
      if (e instanceof ModelRefError) throw badRequest(`model: ${e.message}`, 'model');
      throw e;
    }
    if (target.kind !== 'name') throw badRequest(`model: '${requested}' is not a valid model name (<name>[:<tag>] or <namespace>/<name>[:<tag>])`, 'model');
    const name = `${target.namespace ? `${target.namespace}/` : ''}${target.name}:${target.tag}`;
    const manifest = manifestOf(store, body, name);
    store.write(localKey(target.namespace, target.name, target.tag), manifest);
    if (body.stream === false) return { status: 'success' };
    const out = new SseStream(reply, { contentType: 'application/x-ndjson', keepAlive: false });
    const layer = 'digest' in manifest.model ? manifest.model.digest.replace('sha256-', 'sha256:') : manifest.model.file;
    for (const status of [`using existing layer ${layer}`, 'writing manifest', 'success']) out.line({ status });
    out.end(false);
    return undefined;
  });
}
