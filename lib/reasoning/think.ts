// Ollama's `think` (true, false or a level) as the chat template variables that switch a reasoning model's thinking:
// `enable_thinking` (Qwen3's templates) and `reasoning_effort` (templates that take a level, gpt-oss's).
import type { ThinkValue } from '../modelfile/index.js';

export const THINK_LEVELS = ['low', 'medium', 'high', 'max'] as const;

export function thinkTemplateVars(think: ThinkValue): Record<string, unknown> {
  if (think === false) return { enable_thinking: false };
  return think === true ? { enable_thinking: true } : { enable_thinking: true, reasoning_effort: think };
}
