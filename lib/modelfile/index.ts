// Ollama's Modelfile and its Go-template chat templates: parse and write Modelfiles, render conversations with
// their TEMPLATE the way Ollama does. Self-contained: nothing here loads a model or touches the engine.
// Invariant: this file only re-exports; each idea lives in its own file (see their headers for the rules).
export { parseModelfile, decodeModelfile, ModelfileError, type Modelfile, type ModelfileMessage, type ModelfileParameterValue } from './parse.js';
export { formatModelfile, type FormatOptions } from './format.js';
export { PARAMETER_TYPES, DEPRECATED_PARAMETERS, type ParameterType } from './parameters.js';
export {
  parseGoTemplate, GoTemplate, TemplateError, goStruct, goNamed, goMarshal, JSONObject,
  type GoTemplateOptions, type GoFunction, type CallContext,
} from './go-template.js';
export { OLLAMA_FUNCS, toTypeScriptType } from './ollama-funcs.js';
export { OllamaTemplate, collate, type OllamaValues, type ThinkValue } from './ollama-template.js';
export {
  renderOllamaTemplate, renderOllamaGenerate, ollamaTemplate, normalizeMessages,
  type ChatMessage, type RenderOllamaOptions, type RenderGenerateOptions,
} from './render.js';
export type { ToolCallInput, NormalizedMessage } from './ollama-values.js';

/** Ollama's template for a model without a TEMPLATE (template.DefaultTemplate). */
export const DEFAULT_OLLAMA_TEMPLATE = '{{ .Prompt }}';
