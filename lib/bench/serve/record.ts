// Turns the timestamps of one streamed response into TTFT, ITL and E2E latency, as vLLM's request
// functions do (vllm/benchmarks/lib/endpoint_request_func.py, async_request_openai_chat_completions):
//   ttft    = first token chunk - request sent
//   itl[]   = one entry per later token chunk: its arrival - the previous token chunk's arrival; a chunk
//             that carries several tokens is still one gap (vLLM does not split it; SGLang divides by the
//             speculative accept length, vLLM does not), so ITL is per chunk and TPOT is per token
//   latency = last generation event (a chunk with choices / Ollama's done line) - request sent
// One deliberate difference: a chunk whose text is empty (the role-only first delta of a chat stream,
// the finish_reason chunk) is not a token chunk here, so a server that sends the role delta before
// prefill cannot report a TTFT of ~0 (NVIDIA GenAI-Perf / AIPerf skip empty first responses the same
// way). If no chunk carried text at all (an empty completion) the first generation event stands in, which
// is vLLM's behaviour.
// Invariant: once fail() is called the request stays failed.
import type { RequestOutput } from './types.js';

export class StreamRecorder {
  private firstEvent: number | null = null;
  private lastEvent: number | null = null;
  private lastContent: number | null = null;
  private failed = false;

  constructor(private readonly out: RequestOutput) {}

  /** A chunk that carried generated text, received at clock time t (s). */
  content(text: string, t: number): void {
    if (this.lastContent === null) this.out.ttft = t - this.out.startTime;
    else this.out.itl.push(t - this.lastContent);
    this.lastContent = t;
    this.out.contentChunks++;
    this.out.generatedText += text;
    this.event(t);
  }

  /** A generation event without text (role delta, finish chunk, Ollama's done line). */
  event(t: number): void {
    if (this.firstEvent === null) this.firstEvent = t;
    this.lastEvent = t;
  }

  /** Token counts reported by the server (either may be absent). */
  usage(promptTokens: unknown, completionTokens: unknown): void {
    if (typeof promptTokens === 'number' && Number.isFinite(promptTokens)) {
      this.out.promptLen = promptTokens;
      this.out.promptLenFromServer = true;
    }
    if (typeof completionTokens === 'number' && Number.isFinite(completionTokens)) this.out.outputTokens = completionTokens;
  }

  fail(message: string): void {
    if (this.failed) return;
    this.failed = true;
    this.out.success = false;
    this.out.error = message;
  }

  /** The body has ended: decide success and fill latency. */
  finish(): void {
    if (this.failed) return;
    if (this.firstEvent === null || this.lastEvent === null) {
      this.fail('the stream ended without any generation chunk, so there is no TTFT');
      return;
    }
    if (this.lastContent === null) this.out.ttft = this.firstEvent - this.out.startTime;
    this.out.latency = this.lastEvent - this.out.startTime;
    this.out.success = true;
  }
}

/** The message of an error body (OpenAI `{error:{message}}`, Ollama `{error}`), else its start. */
export function errorBodyMessage(body: string): string {
  try {
    const obj = JSON.parse(body) as { error?: unknown; message?: unknown };
    const e = obj.error;
    if (typeof e === 'string') return e;
    if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string') return (e as { message: string }).message;
    if (typeof obj.message === 'string') return obj.message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.trim().slice(0, 300);
}

export function errorText(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as NodeJS.ErrnoException).code;
    return code && !e.message.includes(code) ? `${code}: ${e.message}` : e.message;
  }
  return String(e);
}
