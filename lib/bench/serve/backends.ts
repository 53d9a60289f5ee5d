// The request backends by name: how to send, the default endpoint, and where the model list lives.
// Invariant: adding a backend is one entry here plus its send function.
import { sendOllama } from './backend-ollama.js';
import { sendOpenAiChat, sendOpenAiCompletions } from './backend-openai.js';
import { sendSglang } from './backend-sglang.js';
import type { Agents } from './http.js';
import type { BackendName, RequestInput, RequestOutput } from './types.js';

export interface Backend {
  defaultEndpoint: string;
  /** GET path listing the served models, and how to read the first one */
  modelsPath: string;
  firstModel(doc: unknown): string | undefined;
  send(input: RequestInput, agents: Agents): Promise<RequestOutput>;
}

const openAiFirstModel = (doc: unknown): string | undefined => {
  const data = (doc as { data?: { id?: unknown }[] } | null)?.data;
  const id = Array.isArray(data) && data.length > 0 ? data[0]?.id : undefined;
  return typeof id === 'string' ? id : undefined;
};

const ollamaFirstModel = (doc: unknown): string | undefined => {
  const models = (doc as { models?: { name?: unknown; model?: unknown }[] } | null)?.models;
  const m = Array.isArray(models) && models.length > 0 ? models[0] : undefined;
  const name = m?.name ?? m?.model;
  return typeof name === 'string' ? name : undefined;
};

export const BACKENDS: Record<BackendName, Backend> = {
  'openai-chat': { defaultEndpoint: '/v1/chat/completions', modelsPath: '/v1/models', firstModel: openAiFirstModel, send: sendOpenAiChat },
  openai: { defaultEndpoint: '/v1/completions', modelsPath: '/v1/models', firstModel: openAiFirstModel, send: sendOpenAiCompletions },
  ollama: { defaultEndpoint: '/api/generate', modelsPath: '/api/tags', firstModel: ollamaFirstModel, send: sendOllama },
  sglang: { defaultEndpoint: '/generate', modelsPath: '/v1/models', firstModel: openAiFirstModel, send: sendSglang },
};

export const BACKEND_NAMES = Object.keys(BACKENDS) as BackendName[];

/** Other benchmark clients' names for the same requests: SGLang's bench_serving (sglang-oai*, vllm-chat) and vLLM's default. */
export const BACKEND_ALIASES: Readonly<Record<string, BackendName>> = {
  'sglang-oai': 'openai', 'sglang-oai-chat': 'openai-chat', vllm: 'openai', 'vllm-chat': 'openai-chat',
};

/** The backend a --backend value names (itself or an alias), or undefined. */
export function backendNamed(name: string): BackendName | undefined {
  if ((BACKEND_NAMES as string[]).includes(name)) return name as BackendName;
  return Object.prototype.hasOwnProperty.call(BACKEND_ALIASES, name) ? BACKEND_ALIASES[name] : undefined;
}
