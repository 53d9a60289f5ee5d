// The sampling settings of the settings panel, kept in localStorage, and how they become request fields.
// Max tokens 0 and an empty seed are left out so the server's default applies; the sampling knobs are always sent.

export interface Settings {
  temperature: number;
  maxTokens: number; // 0: no limit but the context
  topP: number;
  topK: number; // 0: off
  minP: number;
  repetitionPenalty: number;
  seed: string; // '' = random
}

export const DEFAULT_SETTINGS: Settings = {
  temperature: 0.7, maxTokens: 0, topP: 1, topK: 0, minP: 0, repetitionPenalty: 1, seed: '',
};

const KEY = 'spindle.settings';

export function loadSettings(): Settings {
  try {
    return { ...DEFAULT_SETTINGS, ...(JSON.parse(localStorage.getItem(KEY) ?? '{}') as Partial<Settings>) };
  } catch {
    return { ...DEFAULT_SETTINGS };
  }
}

export function saveSettings(s: Settings): void {
  localStorage.setItem(KEY, JSON.stringify(s));
}

/**
 * The OpenAI request fields (plus the server's top_k, min_p, repetition_penalty extras). The sampling knobs are
 * always sent, their "off" values included (top_k -1 for 0), so the panel's settings are what samples: a model's
 * recommended sampling, which the server applies to fields a request leaves out, never mixes in.
 */
export function requestFields(s: Settings): Record<string, number> {
  const fields: Record<string, number> = {
    temperature: s.temperature, top_p: s.topP, top_k: s.topK > 0 ? s.topK : -1, min_p: s.minP,
    repetition_penalty: s.repetitionPenalty,
  };
  if (s.maxTokens > 0) fields.max_tokens = s.maxTokens; // 0: no limit but the model's context (the server's default)
  if (s.seed.trim() !== '') fields.seed = Number(s.seed);
  return fields;
}
