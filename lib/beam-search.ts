// Beam search as vLLM runs it (LLM.beam_search, and `use_beam_search` on its OpenAI server): every step asks the
// engine for one token of every live beam with 2 * beamWidth top logprobs (each beam a request of its own, so the
// prefix cache serves the shared prefix), extends each beam by each of those tokens, keeps the beamWidth best
// extensions per prompt by score, and moves an extension ending in an end-of-generation token to the prompt's
// completed list (unless ignoreEos); after maxTokens steps (or when no beam is left) the beamWidth best of the
// completed and live beams are the answer. Score = cumulative logprob / length ** lengthPenalty, the length counting
// the prompt and not a final end-of-generation token (vLLM's get_beam_search_score, after transformers').
// Invariants: logprobs are the raw logits' (the engine's), so with temperature 0 (or a seed) the search is
// deterministic and the same whatever else runs (temperature > 0 adds each step's sampled token as one more candidate,
// as vLLM's); ties keep the earlier beam's extension first (a stable sort); at most beamWidth completed beams are
// kept per prompt (a completed beam's score never changes, so the answer is the same) and only the surviving
// extensions are built, so memory stays O(beamWidth x length); every step's requests are aborted when `signal`
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
  temperature?: number; // 0 (default): the candidates are the top logprobs; > 0: each step's sampled token joins them
  seed?: number; // the sampled tokens' seed (temperature > 0)
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
  seed: number | null;
  lengthPenalty: number;
  includeStopStrInOutput: boolean;
}

/** One beam: the prompt's tokens and the generated ones, as vLLM's BeamSearchSequence. */
export interface BeamSearchSequence {
  tokens: number[]; // prompt + generated
  outputTokenIds: number[]; // the generated ones (an ending end-of-generation token included)
  logprobs: Array<Record<number, number>>; // per generated token: the candidates' logprobs, keyed by token id
  cumLogprob: number;
  text: string; // vLLM's: the whole sequence, prompt included, decoded (special tokens too, as transformers' decode)
  outputText: string; // the generated part, special tokens skipped (an ending end-of-generation token's text only with
  // includeStopStrInOutput)
  finishReason: 'stop' | 'length';
  stopReason: number | null; // the end-of-generation token that ended it
}

export interface BeamSearchOutput {
  sequences: BeamSearchSequence[]; // best first
}

const KEYS = ['beamWidth', 'maxTokens', 'ignoreEos', 'temperature', 'seed', 'lengthPenalty', 'includeStopStrInOutput'];
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
  const name = (k: string): string => names[k] ?? snake(k); // as the caller spelled it
  const maxWidth = Math.floor(maxLogprobs() / 2);
  const width = v.beamWidth;
  if (!Number.isInteger(width) || (width as number) < 1 || (width as number) > maxWidth) {
    fail(name('beamWidth'), `${name('beamWidth')} must be an integer in [1, ${maxWidth}] (got ${String(width)})`);
  }
  const maxTokens = v.maxTokens ?? 16;
  if (!Number.isSafeInteger(maxTokens) || (maxTokens as number) < 1) fail(name('maxTokens'), `${name('maxTokens')} must be an integer >= 1 (got ${String(maxTokens)})`);
  const temperature = v.temperature ?? 0;
  if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
    fail(name('temperature'), `${name('temperature')} must be a number >= 0 (got ${String(temperature)})`);
  }
  const seed = v.seed ?? null;
  if (seed !== null) normalizeSamplingParams({ seed }); // its range, as sampling's
  const penalty = v.lengthPenalty ?? 1;
  if (typeof penalty !== 'number' || !Number.isFinite(penalty)) fail(name('lengthPenalty'), `${name('lengthPenalty')} must be a finite number`);
  for (const k of ['ignoreEos', 'includeStopStrInOutput']) {
    if (v[k] !== undefined && typeof v[k] !== 'boolean') fail(name(k), `${name(k)} must be a boolean`);
  }
  return {
    beamWidth: width as number, maxTokens: maxTokens as number, ignoreEos: v.ignoreEos === true, temperature, seed: seed as number | null,
    lengthPenalty: penalty, includeStopStrInOutput: v.includeStopStrInOutput === true,
  };
}

interface Beam {
  tokens: number[];
  logprobs: Array<Record<number, number>>;
  cumLogprob: number;
  eog: number | null; // the end-of-generation token that completed it
  score: number;
}

/** vLLM's get_beam_search_score: cumulative logprob / length ^ lengthPenalty, the length without a final EOG token. */
function scoreOf(length: number, eog: boolean, cumLogprob: number, lengthPenalty: number): number {
  return cumLogprob / Math.max(length - (eog ? 1 : 0), 1) ** lengthPenalty;
}

/** The candidates of one step's logprob entry: the top alternatives and the sampled token, by id. */
function candidates(lp: NativeLogprob): Map<number, number> {
  const out = new Map<number, number>();
  lp.topTokenIds.forEach((id, k) => out.set(id, lp.topLogprobs[k]));
  if (!out.has(lp.tokenId)) out.set(lp.tokenId, lp.logprob);
  return out;
}

/** An extension before it is built: its parent, the token, and its numbers. */
interface Extension { parent: Beam; id: number; cumLogprob: number; score: number; entry: Record<number, number> }

const byScore = <T extends { score: number }>(a: T, b: T): number => b.score - a.score; // Array#sort is stable: ties keep their order

function build(x: Extension, eog: boolean): Beam {
  return { tokens: [...x.parent.tokens, x.id], logprobs: [...x.parent.logprobs, x.entry], cumLogprob: x.cumLogprob, eog: eog ? x.id : null, score: x.score };
}

export interface BeamSearchRun {
  core: EngineCore;
  tokenizer: Tokenizer;
  eogIds: readonly number[];
  maxModelLen: number;
  signal?: AbortSignal;
  target?: SubmitTarget;
}

/** Runs beam search for every prompt (token ids); one output per prompt, in order. Throws for a prompt that leaves no
 * room in the context, as generate does. */
export async function beamSearch(run: BeamSearchRun, prompts: readonly (readonly number[])[], p: BeamSearchParams): Promise<BeamSearchOutput[]> {
  const { core, tokenizer } = run;
  prompts.forEach((ids, i) => {
    if (ids.length >= run.maxModelLen) {
      throw new RangeError(`beam search: prompt ${i} has ${ids.length} tokens; maxModelLen is ${run.maxModelLen}, so no token can follow it`);
    }
  });
  const eog = new Set(run.eogIds);
  const step = normalizeSamplingParams({ maxTokens: 1, temperature: p.temperature, logprobs: 2 * p.beamWidth, ignoreEos: true, seed: p.seed });
  const live: Beam[][] = prompts.map((ids) => [{ tokens: [...ids], logprobs: [], cumLogprob: 0, eog: null, score: 0 }]);
  const completed: Beam[][] = prompts.map(() => []);
  for (let t = 0; t < p.maxTokens; t++) {
    run.signal?.throwIfAborted();
    const beams = live.flatMap((list, i) => list.filter((b) => b.tokens.length < run.maxModelLen).map((b) => ({ i, b })));
    if (beams.length === 0) break;
    const submission = core.submitMany(beams.map(({ b }) => b.tokens as CorePrompt), beams.map(() => step),
      { stream: false, signal: run.signal, ...run.target });
    const results = await submission.results();
    run.signal?.throwIfAborted();
    const next: Extension[][] = prompts.map(() => []);
    const done: Extension[][] = prompts.map(() => []);
    beams.forEach(({ i, b }, k) => {
      const lp = results[k][0].logprobs?.[0];
      if (!lp) return;
      const cands = candidates(lp);
      const entry = Object.fromEntries(cands);
      for (const [id, logprob] of cands) {
        const ends = eog.has(id) && !p.ignoreEos;
        const cumLogprob = b.cumLogprob + logprob;
        const x = { parent: b, id, cumLogprob, score: scoreOf(b.tokens.length + 1, ends, cumLogprob, p.lengthPenalty), entry };
        (ends ? done : next)[i].push(x);
      }
    });
    live.forEach((list, i) => {
      const full = list.filter((b) => b.tokens.length >= run.maxModelLen); // out of context: they stay as they are
      const kept = [...full.map((b) => ({ score: b.score, beam: b })), ...next[i].map((x) => ({ score: x.score, x }))].sort(byScore).slice(0, p.beamWidth);
      live[i] = kept.map((e) => ('beam' in e ? e.beam : build(e.x, false)));
      // completed beams: only those among the best beamWidth so far are kept (a completed beam's score is final)
      const best = [...completed[i].map((b) => ({ score: b.score, beam: b })), ...done[i].map((x) => ({ score: x.score, x }))].sort(byScore).slice(0, p.beamWidth);
      completed[i] = best.map((e) => ('beam' in e ? e.beam : build(e.x, true)));
    });
  }
  return live.map((list, i) => ({
    sequences: [...completed[i], ...list].sort(byScore).slice(0, p.beamWidth).map((b): BeamSearchSequence => {
      const promptLength = prompts[i].length;
      const output = b.tokens.slice(promptLength);
      const body = tokenizer.decode(b.eog !== null ? output.slice(0, -1) : output, { skipSpecialTokens: true });
      return {
        tokens: b.tokens, outputTokenIds: output, logprobs: b.logprobs, cumLogprob: b.cumLogprob,
        text: tokenizer.decode(b.tokens),
        outputText: b.eog !== null && p.includeStopStrInOutput ? body + tokenizer.decode([b.eog]) : body,
        finishReason: b.eog !== null ? 'stop' : 'length', stopReason: b.eog,
      };
    }),
  }));
}
