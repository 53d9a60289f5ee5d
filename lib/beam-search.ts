// Beam search as vLLM runs it (LLM.beam_search, and `use_beam_search` on its OpenAI server): every step asks the
// engine for one token of every live beam with 2 * beamWidth top logprobs (each beam a request of its own, so the
// prefix cache serves the shared prefix), extends each beam by each of those tokens, keeps the beamWidth best
// extensions per prompt by score, and moves an extension ending in an end-of-generation token to the prompt's
// completed list (unless ignoreEos); after maxTokens steps (or when no beam is left) the beamWidth best of the
// completed and live beams are the answer. Score = cumulative logprob / length ** lengthPenalty, the length counting
// the prompt and not a final end-of-generation token (vLLM's get_beam_search_score, after transformers').
// Invariants: logprobs are the raw logits' (the engine's), so the search is deterministic and the same whatever else
// runs; ties keep the earlier beam's extension first (a stable sort); every step's requests are aborted when `signal`
// fires, and the search then rejects.
import type { CorePrompt, EngineCore, SubmitTarget } from './engine-core.js';
import type { NativeLogprob } from './native.js';
import { maxLogprobs, normalizeSamplingParams, SamplingParamsError } from './sampling-params.js';
import type { Tokenizer } from './tokenizer.js';

/** vLLM's BeamSearchParams (camelCase or snake_case). */
export interface BeamSearchParamsInput {
  beamWidth?: number;
  beam_width?: number;
  maxTokens?: number;
  max_tokens?: number;
  ignoreEos?: boolean;
  ignore_eos?: boolean;
  temperature?: number; // accepted as vLLM's (its steps sample with it; the beams follow the logprobs either way)
  lengthPenalty?: number;
  length_penalty?: number;
  includeStopStrInOutput?: boolean; // the end-of-generation token's text stays in `text`
  include_stop_str_in_output?: boolean;
}

export interface BeamSearchParams {
  beamWidth: number;
  maxTokens: number;
  ignoreEos: boolean;
  temperature: number;
  lengthPenalty: number;
  includeStopStrInOutput: boolean;
}

/** One beam: the prompt's tokens and the generated ones, as vLLM's BeamSearchSequence. */
export interface BeamSearchSequence {
  tokens: number[]; // prompt + generated
  outputTokenIds: number[]; // the generated ones
  logprobs: Array<Record<number, number>>; // per generated token: the candidates' logprobs, keyed by token id
  cumLogprob: number;
  text: string; // vLLM's: the whole sequence, prompt included, decoded (special tokens too, as transformers' decode)
  outputText: string; // the generated part (an ending end-of-generation token's text only with includeStopStrInOutput)
  finishReason: 'stop' | 'length';
  stopReason: number | null; // the end-of-generation token that ended it
}

export interface BeamSearchOutput {
  sequences: BeamSearchSequence[]; // best first
}

const KEYS = ['beamWidth', 'maxTokens', 'ignoreEos', 'temperature', 'lengthPenalty', 'includeStopStrInOutput'];
const snake = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function fail(name: string, message: string): never {
  throw new SamplingParamsError(name, message);
}

/** Checks vLLM's BeamSearchParams; the widest beam is half the engine's logprob limit (2 * beamWidth candidates). */
export function normalizeBeamSearchParams(input: BeamSearchParamsInput): BeamSearchParams {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new TypeError('beam search params must be an object');
  const raw = input as Record<string, unknown>;
  const v: Record<string, unknown> = {};
  const names: Record<string, string> = {};
  for (const [key, value] of Object.entries(raw)) {
    const name = KEYS.find((k) => k === key || snake(k) === key);
    if (!name) fail(key, `unknown beam search parameter '${key}' (known: ${KEYS.map(snake).join(', ')})`);
    if (value === undefined || value === null) continue;
    if (name in v) fail(key, `${key} and ${names[name]} are the same parameter; give one`);
    v[name] = value;
    names[name] = key;
  }
  const maxWidth = Math.floor(maxLogprobs() / 2);
  const width = v.beamWidth;
  if (!Number.isInteger(width) || (width as number) < 1 || (width as number) > maxWidth) {
    fail(names.beamWidth ?? 'beam_width', `${names.beamWidth ?? 'beam_width'} must be an integer in [1, ${maxWidth}] (got ${String(width)})`);
  }
  const sampling = normalizeSamplingParams({ maxTokens: v.maxTokens ?? 16, temperature: v.temperature ?? 0 });
  const penalty = v.lengthPenalty ?? 1;
  if (typeof penalty !== 'number' || !Number.isFinite(penalty)) fail(names.lengthPenalty ?? 'length_penalty', 'length_penalty must be a finite number');
  for (const k of ['ignoreEos', 'includeStopStrInOutput']) {
    if (v[k] !== undefined && typeof v[k] !== 'boolean') fail(names[k], `${names[k]} must be a boolean`);
  }
  return {
    beamWidth: width as number, maxTokens: sampling.maxTokens ?? 16, ignoreEos: v.ignoreEos === true, temperature: sampling.temperature,
    lengthPenalty: penalty, includeStopStrInOutput: v.includeStopStrInOutput === true,
  };
}

interface Beam {
  tokens: number[];
  promptLength: number;
  logprobs: Array<Record<number, number>>;
  cumLogprob: number;
  eog: number | null; // the end-of-generation token that completed it
}

function score(b: Beam, lengthPenalty: number): number {
  const len = Math.max(b.tokens.length - (b.eog !== null ? 1 : 0), 1);
  return b.cumLogprob / len ** lengthPenalty;
}

/** The candidates of one step's logprob entry: the top alternatives and the sampled token, by id. */
function candidates(lp: NativeLogprob): Map<number, number> {
  const out = new Map<number, number>();
  lp.topTokenIds.forEach((id, k) => out.set(id, lp.topLogprobs[k]));
  if (!out.has(lp.tokenId)) out.set(lp.tokenId, lp.logprob);
  return out;
}

export interface BeamSearchRun {
  core: EngineCore;
  tokenizer: Tokenizer;
  eogIds: readonly number[];
  maxModelLen: number;
  signal?: AbortSignal;
  target?: SubmitTarget;
}

/** Runs beam search for every prompt (token ids); one output per prompt, in order. */
export async function beamSearch(run: BeamSearchRun, prompts: readonly (readonly number[])[], p: BeamSearchParams): Promise<BeamSearchOutput[]> {
  const { core, tokenizer } = run;
  const eog = new Set(run.eogIds);
  const step = normalizeSamplingParams({ maxTokens: 1, temperature: p.temperature, logprobs: 2 * p.beamWidth, ignoreEos: true });
  const live: Beam[][] = prompts.map((ids) => [{ tokens: [...ids], promptLength: ids.length, logprobs: [], cumLogprob: 0, eog: null }]);
  const completed: Beam[][] = prompts.map(() => []);
  for (let t = 0; t < p.maxTokens; t++) {
    run.signal?.throwIfAborted();
    const beams = live.flatMap((list, i) => list.filter((b) => b.tokens.length < run.maxModelLen).map((b) => ({ i, b })));
    if (beams.length === 0) break;
    const submission = core.submitMany(beams.map(({ b }) => b.tokens as CorePrompt), beams.map(() => step),
      { stream: false, signal: run.signal, ...run.target });
    const results = await submission.results();
    if (run.signal?.aborted) run.signal.throwIfAborted();
    const next: Beam[][] = prompts.map(() => []);
    beams.forEach(({ i, b }, k) => {
      const lp = results[k][0].logprobs?.[0];
      if (!lp) return;
      const cands = candidates(lp);
      const entry = Object.fromEntries(cands);
      for (const [id, logprob] of cands) {
        const ext: Beam = { tokens: [...b.tokens, id], promptLength: b.promptLength, logprobs: [...b.logprobs, entry], cumLogprob: b.cumLogprob + logprob, eog: null };
        if (eog.has(id) && !p.ignoreEos) completed[i].push({ ...ext, eog: id });
        else next[i].push(ext);
      }
    });
    live.forEach((list, i) => {
      const full = list.filter((b) => b.tokens.length >= run.maxModelLen); // out of context: they stay as they are
      live[i] = [...full, ...next[i]].sort((a, c) => score(c, p.lengthPenalty) - score(a, p.lengthPenalty)).slice(0, p.beamWidth);
    });
  }
  return live.map((list, i) => ({
    sequences: [...completed[i], ...list].sort((a, c) => score(c, p.lengthPenalty) - score(a, p.lengthPenalty)).slice(0, p.beamWidth)
      .map((b): BeamSearchSequence => {
        const output = b.tokens.slice(b.promptLength);
        const shown = b.eog !== null && !p.includeStopStrInOutput ? output.slice(0, -1) : output;
        return {
          tokens: b.tokens, outputTokenIds: output, logprobs: b.logprobs, cumLogprob: b.cumLogprob,
          text: tokenizer.decode(b.tokens), outputText: tokenizer.decode(shown, { skipSpecialTokens: !p.includeStopStrInOutput }),
          finishReason: b.eog !== null ? 'stop' : 'length', stopReason: b.eog,
        };
      }),
  }));
}
