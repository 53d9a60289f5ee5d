// POST /api/create (Ollama's JSON create API, runner mode): a named model of the store FROM another (a store name,
// or a hub reference pulled before), with template, system, parameters, messages and license over what that model
// already had (Ollama's inheritance: a parameter given here replaces the inherited one), as `spindle create` does.
// `modelfile` (Ollama's older API) is accepted too: its FROM / TEMPLATE / SYSTEM / PARAMETER / MESSAGE / LICENSE,
// under the JSON fields. `files` / `adapters` (what the `ollama create` CLI sends after uploading its files with
// POST /api/blobs): `{ "<file name>": "sha256:<hex>" }` naming blobs of the store: one GGUF model (and a vision
// projector), and one LoRA adapter. Streamed (the default) as NDJSON { status } lines ending with { status: 'success' }.
// Invariants: everything is checked before the manifest is written (a bad field is a 400 naming it, an unknown FROM
// Ollama's 404), and nothing is written on a refusal; FROM never names a file of the server; nothing is pulled.
import type { FastifyInstance } from 'fastify';
import { DEPRECATED_PARAMETERS, ModelfileError, parseModelfile, PARAMETER_TYPES, type Modelfile } from '../../../modelfile/index.js';
import { parseParameterValue } from '../../../modelfile/parameters.js';
import { ModelRefError, parseModelRef } from '../../../models/ref.js';
import { localKey, type Manifest, type ManifestFile, type ModelStore } from '../../../models/store.js';
import { readModelFileInfo } from '../../../gguf/file-info.js';
import { statSync } from 'node:fs';
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
  [other: string]: unknown;
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

/** Fields of Ollama's create request this server cannot honour: refused by name when they ask for anything. */
const REFUSED: Record<string, string> = {
  quantize: 'this server does not quantize models',
  draft_files: 'draft models are not kept with a store model (give --speculative-model to spindle serve instead)',
  renderer: 'custom renderers are not supported (the TEMPLATE or the GGUF chat template renders the prompt)',
  parser: 'custom output parsers are not supported (--tool-call-parser and --reasoning-parser are server flags)',
  requires: 'version requirements are not supported',
};

function refuseUnsupported(body: CreateBody): void {
  for (const [k, why] of Object.entries(REFUSED)) {
    const v = body[k];
    if (v === undefined || v === null || v === '' || (typeof v === 'object' && Object.keys(v as object).length === 0)) continue;
    throw badRequest(`${k}: ${why}`, k, 'unsupported_parameter');
  }
}

/** Ollama's blob digest ('sha256:<hex>', or the store's 'sha256-<hex>') as the store names it, or null. */
export function blobDigest(v: unknown): string | null {
  const m = typeof v === 'string' ? /^sha256[:-]([0-9a-fA-F]{64})$/.exec(v) : null;
  return m ? `sha256-${m[1].toLowerCase()}` : null;
}

interface Uploaded {
  model: ManifestFile | null;
  mmproj: ManifestFile | null;
  adapter: ManifestFile | null;
  arch: string | null; // the uploaded model's
  adapterArch: string | null; // the uploaded adapter's
}

/** One uploaded blob of `field` (a GGUF file of the store): its manifest entry and what its header says. */
function uploadedFile(store: ModelStore, field: string, file: string, digestIn: unknown): { entry: ManifestFile; arch: string; type: string | null } {
  const at = `${field}.${file}`;
  const digest = blobDigest(digestIn);
  if (digest === null) throw badRequest(`${at} must be a blob digest 'sha256:<64 hex digits>' (got ${JSON.stringify(digestIn)})`, at);
  const path = store.blobPath(digest);
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    throw badRequest(`${at}: blob ${digestIn} not found; upload it first (POST /api/blobs/${digestIn})`, at);
  }
  try {
    const info = readModelFileInfo(path);
    return { entry: { digest, size, file }, arch: info.arch, type: info.type };
  } catch (e) {
    throw badRequest(`${at}: not a GGUF file this server reads: ${(e as Error).message}`, at);
  }
}

/** `files` (a model, and a vision projector) and `adapters` (one LoRA adapter), uploaded with POST /api/blobs. */
function uploads(store: ModelStore, body: CreateBody): Uploaded {
  const out: Uploaded = { model: null, mmproj: null, adapter: null, arch: null, adapterArch: null };
  for (const [file, digest] of Object.entries(body.files ?? {})) {
    const f = uploadedFile(store, 'files', file, digest);
    if (f.type === 'adapter') throw badRequest(`files.${file} is a LoRA adapter; give it in adapters`, `files.${file}`);
    const projector = f.type === 'mmproj' || f.type === 'projector' || f.arch === 'clip';
    if (projector ? out.mmproj : out.model) {
      throw badRequest(`files: one ${projector ? 'vision projector' : 'model file'} at most (split GGUF files are not supported)`, 'files');
    }
    if (projector) out.mmproj = f.entry;
    else { out.model = f.entry; out.arch = f.arch; }
  }
  if (out.mmproj && !out.model) throw badRequest('files: a vision projector needs its model file beside it', 'files');
  const adapters = Object.entries(body.adapters ?? {});
  if (adapters.length > 1) throw badRequest(`adapters: a model takes one LoRA adapter (got ${adapters.length})`, 'adapters');
  for (const [file, digest] of adapters) {
    const f = uploadedFile(store, 'adapters', file, digest);
    if (f.type !== 'adapter') {
      throw badRequest(`adapters.${file} is not a LoRA adapter (general.type ${f.type === null ? 'absent' : `'${f.type}'`}); convert one with llama.cpp's convert_lora_to_gguf.py`, `adapters.${file}`);
    }
    out.adapter = f.entry;
    out.adapterArch = f.arch;
  }
  return out;
}

/** The manifest the request describes, checked whole. */
function manifestOf(store: ModelStore, body: CreateBody, name: string): Manifest {
  refuseUnsupported(body);
  const mf = parsedModelfile(body.modelfile);
  if (mf?.adapters.length) {
    throw badRequest('modelfile: ADAPTER names a file, and this server reads no file a request names; upload the adapter ' +
      '(POST /api/blobs) and give it in adapters, as the ollama CLI does', 'modelfile', 'unsupported_parameter');
  }
  const up = uploads(store, body);
  const from = body.from || mf?.from;
  if (from && up.model) throw badRequest('give from (a store model) or files with a model, not both', 'files');
  if (!from && !up.model) {
    throw new ApiError(400, 'from is required (the model to build on: a store name, or a hub reference pulled before), or files with an uploaded model', { param: 'from', code: 'missing_required_parameter' });
  }
  // uploaded files make a new model (its own template and settings unless given here); else FROM's, inherited
  const base: Partial<Manifest> = up.model ? {} : findStoreModel(store, from!, 'from').manifest;
  const model = up.model ?? base.model!;
  if (up.adapter) {
    if (base.adapter) throw badRequest(`adapters: FROM ${from} has a LoRA adapter already; a model takes one`, 'adapters');
    // the model as it loads (a split store model: through its named links)
    const arch = up.arch ?? readModelFileInfo(up.model ? store.filePath(model) : store.modelPath({ ...base, model } as Manifest)).arch;
    if (up.adapterArch !== arch) throw badRequest(`adapters: the LoRA adapter was made for architecture '${up.adapterArch}', the model is '${arch}'`, 'adapters');
  }
  const messages = body.messages?.length ? checkMessages(body.messages) : mf?.messages.length ? mf.messages : base.messages ?? [];
  const license = typeof body.license === 'string' ? [body.license] : body.license?.length ? body.license : mf?.license.length ? mf.license : base.license ?? [];
  return {
    schemaVersion: 1, name, createdAt: new Date().toISOString(), source: up.model ? `uploaded ${up.model.file}` : `FROM ${from}`,
    model, ...(up.model || !base.parts ? {} : { parts: base.parts }), mmproj: up.model ? up.mmproj : base.mmproj ?? null, adapter: up.adapter ?? base.adapter ?? null,
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
