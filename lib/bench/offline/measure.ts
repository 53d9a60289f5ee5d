// One timed run of a benchmark test on a loaded Engine, through its public streaming API.
// Invariants: times are taken when a streamed chunk reaches JavaScript (process.hrtime, ns); a run whose
// sequences do not produce exactly the requested number of tokens throws MeasureError (greedy sampling with
// ignoreEos must run to the length limit), so a sample always counts the tokens it claims; on any failure
// every stream of the run is aborted before the error propagates.
import type { Engine, EngineChunk } from '../../engine.js';

export class MeasureError extends Error {
  override name = 'MeasureError';
}

/** One measured run: `tokens` processed (pp) or generated (tg) in `ns` nanoseconds. */
export interface Sample {
  ns: number;
  tokens: number;
  /** tg with several sequences: ns between the first and the last sequence's first token; else 0. */
  staggerNs: number;
}

const now = (): number => Number(process.hrtime.bigint());

function stream(engine: Engine, ids: number[], maxNewTokens: number, signal: AbortSignal): AsyncIterableIterator<EngineChunk> {
  return engine.generate({
    inputIds: ids, stream: true, signal,
    samplingParams: { maxNewTokens, temperature: 0, ignoreEos: true },
  });
}

/** ppN: submit the N-token prompt, stop the clock at the first output token. */
export async function measurePrompt(engine: Engine, ids: number[]): Promise<Sample> {
  const ac = new AbortController();
  const start = now();
  let firstAt = 0;
  let count = 0;
  try {
    for await (const chunk of stream(engine, ids, 1, ac.signal)) {
      if (count === 0 && chunk.outputIds.length > 0) firstAt = now();
      count += chunk.outputIds.length;
    }
  } finally {
    ac.abort();
  }
  if (count !== 1) throw new MeasureError(`pp${ids.length}: expected 1 output token, got ${count}`);
  return { ns: Math.max(1, firstAt - start), tokens: ids.length, staggerNs: 0 };
}

interface SeqTiming {
  firstAt: number; // ns, when the first output token arrived
  firstCount: number; // tokens in that first chunk (1 unless the engine merged steps)
  lastAt: number; // ns, when token n + 1 arrived
  count: number;
}

async function followSequence(engine: Engine, ids: number[], n: number, signal: AbortSignal): Promise<SeqTiming> {
  const t: SeqTiming = { firstAt: 0, firstCount: 0, lastAt: 0, count: 0 };
  let finish: string | null = null;
  for await (const chunk of stream(engine, ids, n + 1, signal)) {
    if (chunk.outputIds.length > 0) {
      const at = now();
      if (t.count === 0) {
        t.firstAt = at;
        t.firstCount = chunk.outputIds.length;
      }
      t.count += chunk.outputIds.length;
      t.lastAt = at;
    }
    if (chunk.metaInfo.finishReason) finish = chunk.metaInfo.finishReason.type;
  }
  if (t.count !== n + 1) {
    throw new MeasureError(`tg${n}: a sequence stopped after ${t.count} of ${n + 1} tokens (finish reason ${finish ?? 'none'})`);
  }
  return t;
}

/**
 * tgN (one prompt) or tgN@bB (B prompts at once): every sequence generates N + 1 tokens; the first one
 * (which ends the prompt's prefill) starts the clock, the rest are counted.
 */
export async function measureDecode(engine: Engine, prompts: number[][], n: number): Promise<Sample> {
  const ac = new AbortController();
  let seqs: SeqTiming[];
  try {
    seqs = await Promise.all(prompts.map((ids) => followSequence(engine, ids, n, ac.signal).catch((e: unknown) => {
      ac.abort();
      throw e;
    })));
  } finally {
    ac.abort();
  }
  const start = Math.min(...seqs.map((s) => s.firstAt));
  const end = Math.max(...seqs.map((s) => s.lastAt));
  const tokens = seqs.reduce((sum, s) => sum + s.count - s.firstCount, 0);
  if (tokens <= 0 || end <= start) throw new MeasureError(`tg${n}: no token arrived after the first one, nothing to time`);
  const stagger = Math.max(...seqs.map((s) => s.firstAt)) - start;
  return { ns: end - start, tokens, staggerNs: prompts.length > 1 ? stagger : 0 };
}
