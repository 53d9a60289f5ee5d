// Beam search as vLLM's (lib/beam-search.ts): width 1 is greedy decoding; every beam's cumulative logprob is what the
// model gives its tokens (scored independently through prompt logprobs); beams come best first by vLLM's score; an
// end-of-generation token completes a beam (stop, its id as stop_reason); LLM.beamSearch, and `use_beam_search` on
// /v1/completions and /v1/chat/completions (n beams as the choices); bad parameters are refused by name.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LLM } from '../lib/llm.js';
import { beamSearch, normalizeBeamSearchParams } from '../lib/beam-search.js';
import type { EngineCore } from '../lib/engine-core.js';
import type { Tokenizer } from '../lib/tokenizer.js';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { tokenizerGguf } from '../lib/random-model/tokenizer.js';
import { chain, writeScriptedModel } from './tooling/fixtures/index.js';
import { fixtureModel } from './helpers/fixtures.js';

const path = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const llm = new LLM({ model: path, maxModelLen: 256, threads: 2 });
t.teardown(() => llm.close());
const PROMPT = 'The capital of France is';

t.test('width 1 is greedy decoding; every beam scores what the model gives it; best first', async (t) => {
  const [greedy] = await llm.generate(PROMPT, { temperature: 0, maxTokens: 6, ignoreEos: true });
  const [one] = await llm.beamSearch(PROMPT, { beamWidth: 1, maxTokens: 6, ignoreEos: true });
  t.equal(one.sequences.length, 1);
  t.same(one.sequences[0].outputTokenIds, greedy.outputs[0].tokenIds, 'the argmax chain');
  t.same(one.sequences[0].tokens, [...greedy.promptTokenIds, ...greedy.outputs[0].tokenIds], 'tokens: the prompt, then the output');
  const [four] = await llm.beamSearch({ prompt: PROMPT }, { beam_width: 4, max_tokens: 5, ignore_eos: true, length_penalty: 1 });
  t.equal(four.sequences.length, 4);
  const scores = four.sequences.map((s) => s.cumLogprob / s.tokens.length);
  t.ok(scores.every((v, i) => i === 0 || scores[i - 1] >= v), 'best first by cumulative logprob / length');
  t.equal(new Set(four.sequences.map((s) => s.outputTokenIds.join(','))).size, 4, 'four different beams');
  for (const s of four.sequences) {
    const [scored] = await llm.generate({ promptTokenIds: s.tokens }, { maxTokens: 1, temperature: 0, promptLogprobs: 0 });
    const model = scored.promptLogprobs!.slice(-5).map((e, k) => e![s.outputTokenIds[k]].logprob).reduce((a, b) => a + b, 0);
    t.ok(Math.abs(model - s.cumLogprob) < 1e-4, `cumLogprob ${s.cumLogprob.toFixed(5)} = the model's ${model.toFixed(5)}`);
    t.equal(s.logprobs.length, 5);
    t.equal(s.finishReason, 'length');
    t.ok(s.text.includes('capital of France') && s.text.endsWith(s.outputText), "text: the whole sequence, prompt included, as vLLM's");
  }
  const two = await llm.beamSearch([PROMPT, 'Once upon a time'], { beamWidth: 2, maxTokens: 3, ignoreEos: true });
  t.equal(two.length, 2, 'one output per prompt');
  await t.rejects(llm.beamSearch(PROMPT, { beamWidth: 11, maxTokens: 2 }), /beamWidth must be an integer in \[1, 10\]/);
  await t.rejects(llm.beamSearch(PROMPT, { beamWidth: 2, maxTokens: 2, lengthPenalty: Infinity }), /lengthPenalty must be a finite number/);
  await t.rejects(llm.beamSearch(PROMPT, { beamWidth: 2, best: 1 } as never), /unknown beam search parameter 'best'/);
});

t.test('an end-of-generation token completes a beam: stop, its id, not in the text', async (t) => {
  const vocab = tokenizerGguf('qwen3');
  const id = (piece: string): number => vocab.tokens.indexOf(piece);
  const dir = mkdtempSync(join(tmpdir(), 'spindle-beam-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = ['Hello', 'Ġworld', '!', '<|im_end|>'].map(id);
  const scripted = await writeScriptedModel(join(dir, 'scripted.gguf'), chain(id('Ċ'), script));
  const m = new LLM({ model: scripted, maxModelLen: 128, threads: 2 });
  t.teardown(() => m.close());
  const [out] = await m.beamSearch({ promptTokenIds: [id('Ċ')] }, { beamWidth: 2, maxTokens: 8 });
  const best = out.sequences[0];
  t.same(best.outputTokenIds, script, 'the script, ended by <|im_end|>');
  t.equal(best.finishReason, 'stop');
  t.equal(best.stopReason, id('<|im_end|>'));
  t.equal(best.outputText, 'Hello world!');
  const [kept] = await m.beamSearch({ promptTokenIds: [id('Ċ')] }, { beamWidth: 2, maxTokens: 8, includeStopStrInOutput: true });
  t.equal(kept.sequences[0].outputText, 'Hello world!<|im_end|>', 'include_stop_str_in_output');
});

t.test("vLLM's use_beam_search on /v1/completions and /v1/chat/completions", async (t) => {
  const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['m'] });
  t.teardown(() => app.close());
  const post = async (url: string, payload: Record<string, unknown>) => {
    const r = await app.inject({ method: 'POST', url, payload });
    return { status: r.statusCode, body: JSON.parse(r.body) as Record<string, unknown> };
  };
  const [offline] = await llm.beamSearch(PROMPT, { beamWidth: 3, maxTokens: 4, ignoreEos: true });
  const c = await post('/v1/completions', { prompt: PROMPT, use_beam_search: true, n: 3, max_tokens: 4, ignore_eos: true });
  t.equal(c.status, 200);
  const choices = c.body.choices as { index: number; text: string; finish_reason: string }[];
  t.same(choices.map((x) => x.text), offline.sequences.map((s) => s.outputText), 'the same beams as LLM.beamSearch');
  t.same(choices.map((x) => x.index), [0, 1, 2]);
  t.match(c.body.usage, { completion_tokens: 12 });
  const messages = [{ role: 'user', content: 'Hi' }];
  const chat = await post('/v1/chat/completions', { messages, use_beam_search: true, n: 2, max_tokens: 3, ignore_eos: true });
  t.equal(chat.status, 200);
  t.equal((chat.body.choices as unknown[]).length, 2);
  for (const [payload, re] of [
    [{ prompt: 'x', use_beam_search: true, stream: true }, /stream cannot be combined with use_beam_search/],
    [{ prompt: 'x', use_beam_search: true, logprobs: 2 }, /logprobs cannot be combined with use_beam_search/],
    [{ prompt: 'x', use_beam_search: 'yes' }, /use_beam_search must be a boolean/],
    [{ prompt: 'x', use_beam_search: true, length_penalty: 'long' }, /length_penalty must be a finite number/],
  ] as [Record<string, unknown>, RegExp][]) {
    const r = await post('/v1/completions', payload);
    t.equal(r.status, 400, JSON.stringify(payload));
    t.match(JSON.stringify(r.body), re);
  }
});

// A fake engine whose next-token logprobs are a function of the sequence: the search's own arithmetic, exactly.
function fakeRun(next: (tokens: readonly number[]) => [number, number][], eogIds: number[] = [9], maxModelLen = 100) {
  let steps = 0;
  const core = {
    submitMany: (prompts: number[][]) => {
      steps++;
      return { results: async () => prompts.map((p) => {
        const c = next(p);
        return [{ logprobs: [{ tokenId: c[0][0], logprob: c[0][1], rank: 1, topTokenIds: c.map((x) => x[0]), topLogprobs: c.map((x) => x[1]) }] }];
      }) };
    },
  } as unknown as EngineCore;
  const tokenizer = { decode: (ids: readonly number[]) => ids.map((i) => (i === 9 ? '<eos>' : String.fromCharCode(96 + i))).join('') } as unknown as Tokenizer;
  return { run: { core, tokenizer, eogIds, maxModelLen }, steps: () => steps };
}

t.test('completed beams against live ones: the length penalty decides; only the best are kept', async (t) => {
  // from the prompt: EOS at -1.0 (a 2-token sequence, 1 without the EOS), or token 1 at -0.7 then token 2 at -0.7
  const next = (tokens: readonly number[]): [number, number][] => (tokens.length === 1 ? [[1, -0.7], [9, -1.0]] : [[2, -0.7], [3, -3]]);
  const p = (lengthPenalty: number) => normalizeBeamSearchParams({ beamWidth: 1, maxTokens: 2, lengthPenalty });
  // penalty 0: scores are cumulative logprobs: EOS -1.0 beats -1.4
  const [flat] = await beamSearch(fakeRun(next).run, [[5]], p(0));
  t.same(flat.sequences[0].outputTokenIds, [9]);
  t.equal(flat.sequences[0].finishReason, 'stop');
  t.equal(flat.sequences[0].stopReason, 9);
  t.equal(flat.sequences[0].outputText, '', 'the EOS text is not shown');
  // penalty 2: -1.0 / 1^2 = -1 against -1.4 / 3^2 = -0.156: the longer live beam wins
  const [long] = await beamSearch(fakeRun(next).run, [[5]], p(2));
  t.same(long.sequences[0].outputTokenIds, [1, 2]);
  t.equal(long.sequences[0].finishReason, 'length');
  t.ok(Math.abs(long.sequences[0].cumLogprob + 1.4) < 1e-12);
  const [shown] = await beamSearch(fakeRun(next).run, [[5]], normalizeBeamSearchParams({ beamWidth: 1, maxTokens: 2, lengthPenalty: 0, includeStopStrInOutput: true }));
  t.equal(shown.sequences[0].outputText, '<eos>', 'include_stop_str_in_output shows it');
  // an EOS candidate every step, 200 steps, width 2: at most 2 completed beams are kept, and the answer is width 2
  const always = (): [number, number][] => [[1, -0.1], [2, -0.2], [9, -0.05]];
  const fake = fakeRun(always, [9], 1000);
  const [many] = await beamSearch(fake.run, [[5]], normalizeBeamSearchParams({ beamWidth: 2, maxTokens: 200, lengthPenalty: 0 }));
  t.equal(fake.steps(), 200);
  t.equal(many.sequences.length, 2);
  t.same(many.sequences[0].outputTokenIds, [9], 'the best: EOS at once (-0.05)');
});

t.test('the context limit: beams stop there (length); a prompt with no room is refused', async (t) => {
  const fake = fakeRun(() => [[1, -0.1], [2, -0.2]], [9], 8);
  const [out] = await beamSearch(fake.run, [[5, 5, 5, 5, 5]], normalizeBeamSearchParams({ beamWidth: 2, maxTokens: 10 }));
  t.ok(out.sequences.every((s) => s.tokens.length === 8 && s.finishReason === 'length'), 'three tokens fit');
  t.equal(fake.steps(), 3, 'no step once every beam is full');
  await t.rejects(beamSearch(fakeRun(() => [[1, 0]], [9], 4).run, [[1, 2, 3, 4]], normalizeBeamSearchParams({ beamWidth: 1, maxTokens: 2 })),
    /prompt 0 has 4 tokens; maxModelLen is 4, so no token can follow it/);
  await t.rejects(llm.beamSearch({ promptTokenIds: Array.from({ length: 256 }, () => 100) }, { beamWidth: 1, maxTokens: 2 }), /maxModelLen is 256/);
});

t.test("use_beam_search: explicit defaults pass, several prompts' choices numbered prompt * n + beam", async (t) => {
  const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['m'] });
  t.teardown(() => app.close());
  const r = await app.inject({ method: 'POST', url: '/v1/completions', payload: {
    prompt: ['a', 'b'], use_beam_search: true, n: 2, max_tokens: 2, ignore_eos: true, temperature: 0,
    top_p: 1, frequency_penalty: 0, presence_penalty: 0, stream: false, logprobs: null, best_of: 2,
  } });
  t.equal(r.statusCode, 200, r.body.slice(0, 200));
  t.same((JSON.parse(r.body).choices as { index: number }[]).map((c) => c.index), [0, 1, 2, 3]);
  for (const [field, value] of [['top_p', 0.5], ['repeat_penalty', 2], ['skip_special_tokens', false], ['best_of', 3]] as const) {
    const bad = await app.inject({ method: 'POST', url: '/v1/completions', payload: { prompt: 'a', use_beam_search: true, n: 2, max_tokens: 2, [field]: value } });
    t.equal(bad.statusCode, 400, `${field}: ${value}`);
    t.match(bad.body, new RegExp(`${field} cannot be combined with use_beam_search`));
  }
  const defaulted = await app.inject({ method: 'POST', url: '/v1/completions', payload: { prompt: 'a', use_beam_search: true, ignore_eos: true, temperature: 0 } });
  t.equal(JSON.parse(defaulted.body).usage.completion_tokens, 16, "max_tokens 16 when absent, as vLLM's completions");
});
