// Beam search as vLLM's (lib/beam-search.ts): width 1 is greedy decoding; every beam's cumulative logprob is what the
// model gives its tokens (scored independently through prompt logprobs); beams come best first by vLLM's score; an
// end-of-generation token completes a beam (stop, its id as stop_reason); LLM.beamSearch, and `use_beam_search` on
// /v1/completions and /v1/chat/completions (n beams as the choices); bad parameters are refused by name.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LLM } from '../lib/llm.js';
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
    t.equal(s.text, llm.tokenizer.decode(s.tokens), "text: the whole sequence, as vLLM's");
  }
  const two = await llm.beamSearch([PROMPT, 'Once upon a time'], { beamWidth: 2, maxTokens: 3, ignoreEos: true });
  t.equal(two.length, 2, 'one output per prompt');
  await t.rejects(llm.beamSearch(PROMPT, { beamWidth: 11, maxTokens: 2 }), /beamWidth must be an integer in \[1, 10\]/);
  await t.rejects(llm.beamSearch(PROMPT, { beamWidth: 2, maxTokens: 2, lengthPenalty: Infinity }), /length_penalty must be a finite number/);
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
