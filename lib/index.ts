// Public entry point of the `spindle` package.
export { LLM } from './llm.js';
export type { LLMOptions, RequestOutput, CompletionOutput, Logprob, PromptInput, GenerateOptions, ChatOptions, EmbedOptions, EmbeddingRequestOutput, ScoringRequestOutput, LoraRequestInput } from './llm.js';
export type { Pooling } from './embeddings.js';
export type { BeamSearchParamsInput, BeamSearchOutput, BeamSearchSequence } from './beam-search.js';
export { Engine } from './engine.js';
export type {
  EngineConstructorOptions, EngineGenerateInput, EngineResult, EngineChunk, EngineMetaInfo, EngineFinishReason,
} from './engine.js';
export { Tokenizer } from './tokenizer.js';
export type { EncodeOptions, DecodeOptions, ApplyChatTemplateOptions } from './tokenizer.js';
export { normalizeSamplingParams, SamplingParamsError } from './sampling-params.js';
export type { SamplingParams, SamplingParamsInput, NormalizeOptions } from './sampling-params.js';
export { renderChatTemplate, normalizeMessages, ChatTemplateError } from './chat/template.js';
export type { ChatMessage, ContentPart, TextPart, ImageUrlPart, Role, RenderOptions } from './chat/template.js';
export type { EngineOptionsInput, LoraModuleInput, LoraModule } from './engine-options.js';
export type { FinishReason, NativeModelInfo } from './native.js';
export { loadNative } from './native.js';
