// Shared shapes of `spindle bench serve`: what one request sends and what it measured.
// Invariant: every time here is in seconds from one monotonic clock (performance.now() / 1000), so the
// per-request arrays of the result JSON read like vLLM's (ttfts, itls, latencies in s) and the
// aggregate *_ms fields are these times * 1000.

export type BackendName = 'openai-chat' | 'openai' | 'ollama' | 'sglang';

/** One benchmark prompt. */
export interface SampleRequest {
  prompt: string;
  /** the prompt as token ids (--random-token-ids): what a completions request sends instead of `prompt`,
   * which then holds the ids as text (for logs) */
  promptIds?: number[];
  /** tokens the prompt was built to have (1 word of the word list = 1 token on common BPE vocabularies) */
  promptLenEstimate: number;
  /** max tokens asked of the server */
  outputLen: number;
  /** a conversation so far (multi-turn dataset): sent as chat messages, or joined into one prompt for
   * completion endpoints; `prompt` then holds that joined text */
  messages?: { role: 'system' | 'user' | 'assistant'; content: string }[];
  /** the output expected back (edit dataset): sent as OpenAI's Predicted Outputs `prediction` */
  prediction?: string;
}

/** Everything a backend needs to send one request. */
export interface RequestInput {
  url: string; // full URL of the generation endpoint
  model: string;
  request: SampleRequest;
  headers: Record<string, string>;
  ignoreEos: boolean;
  temperature: number | null; // null = the server's default
}

/** What one request measured (vLLM RequestFuncOutput, in seconds). */
export interface RequestOutput {
  success: boolean;
  error: string;
  /** clock time the request was sent, s */
  startTime: number;
  /** request sent -> first chunk carrying content, s */
  ttft: number;
  /** gaps between successive content chunks after the first, s (one entry per chunk, as vLLM) */
  itl: number[];
  /** request sent -> last generation event (last choices chunk / Ollama done line), s */
  latency: number;
  /** prompt tokens: the server's count when it reported one, else the client's estimate */
  promptLen: number;
  promptLenFromServer: boolean;
  /** completion tokens the server reported (usage.completion_tokens / eval_count), or null */
  outputTokens: number | null;
  /** chunks that carried content */
  contentChunks: number;
  generatedText: string;
  /** time spent waiting for the --max-concurrency semaphore, s */
  queueTime: number;
}

export function emptyOutput(request: SampleRequest, startTime: number): RequestOutput {
  return {
    success: false, error: '', startTime, ttft: 0, itl: [], latency: 0,
    promptLen: request.promptLenEstimate, promptLenFromServer: false, outputTokens: null,
    contentChunks: 0, generatedText: '', queueTime: 0,
  };
}

/** Monotonic clock in seconds. */
export function nowS(): number {
  return performance.now() / 1000;
}
