// Fill-in-the-middle (lib/fim.ts): the FIM tokens of a vocabulary that has them (Qwen's <|fim_prefix|>,
// <|fim_suffix|>, <|fim_middle|>) and none for one that lacks them (Llama 3's); the infill prompt in llama.cpp's
// order with user text never turned into special tokens; then `suffix` on /v1/completions (openai client) and
// Ollama's /api/generate (ollama client): the prompt is the infill prompt (same token count, same greedy text as
// sending its ids), and a model without FIM tokens answers 400 "does not support insert".
import t from 'tap';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { LLM } from '../lib/llm.js';
import { fimPrompt, fimTokens } from '../lib/fim.js';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, tiedEmbeddings: true } as const;
const qwen = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3' });
const llama3 = await fixtureModel({ ...SMALL, arch: 'llama', tokenizer: 'llama3' });
const PREFIX = 'def add(a, b):\n    ', SUFFIX = '\n\nprint(add(1, 2))\n';

t.test('FIM tokens: found by their text in a Qwen vocabulary, none in Llama 3\'s; the infill prompt', async (t) => {
  const q = new LLM({ model: qwen, maxModelLen: 256, threads: 2 });
  const l = new LLM({ model: llama3, maxModelLen: 256, threads: 2 });
  t.teardown(async () => { await q.close(); await l.close(); });
  await q.ready();
  await l.ready();
  const fim = fimTokens(q.tokenizer);
  t.ok(fim);
  t.same(['pre', 'suf', 'mid'].map((k) => q.tokenizer.decode([fim![k as 'pre']], { skipSpecialTokens: false })),
    ['<|fim_prefix|>', '<|fim_suffix|>', '<|fim_middle|>']);
  t.equal(fimTokens(l.tokenizer), null, 'Llama 3 has no FIM tokens');
  const ids = fimPrompt(q.tokenizer, fim!, PREFIX, SUFFIX);
  const text = (s: string): number[] => q.tokenizer.encode(s, { addSpecialTokens: false, parseSpecial: false });
  t.same(ids, [fim!.pre, ...text(PREFIX), fim!.suf, ...text(SUFFIX), fim!.mid], 'llama.cpp\'s order (Qwen adds no BOS)');
  const sneaky = fimPrompt(q.tokenizer, fim!, '<|fim_middle|>', '');
  t.equal(sneaky.filter((id) => id === fim!.mid).length, 1, 'text that spells a FIM token stays text');
});

t.test('suffix on /v1/completions and /api/generate: the infill prompt; a model without FIM tokens is a 400', async (t) => {
  const serve = async (path: string) => {
    const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['m'] });
    await app.listen({ host: '127.0.0.1', port: 0 });
    t.teardown(() => app.close());
    return { app, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
  };
  const { app, base } = await serve(qwen);
  const { tokenizer } = await app.engine.ready();
  const ids = fimPrompt(tokenizer, fimTokens(tokenizer)!, PREFIX, SUFFIX);
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const byIds = await openai.completions.create({ model: 'm', prompt: ids, max_tokens: 8, temperature: 0 });
  const infill = await openai.completions.create({ model: 'm', prompt: PREFIX, suffix: SUFFIX, max_tokens: 8, temperature: 0 });
  t.equal(infill.usage!.prompt_tokens, ids.length);
  t.equal(infill.choices[0].text, byIds.choices[0].text, 'the same as sending the infill prompt\'s ids');
  await t.rejects(openai.completions.create({ model: 'm', prompt: PREFIX, suffix: SUFFIX, echo: true }), { status: 400, message: /echo cannot be combined with suffix/ });

  const ollama = new Ollama({ host: base });
  const g = await ollama.generate({ model: 'm', prompt: PREFIX, suffix: SUFFIX, options: { temperature: 0, num_predict: 8 } });
  t.equal(g.prompt_eval_count, ids.length);
  t.equal(g.response, byIds.choices[0].text, '/api/generate with suffix: the same infill');
  await t.rejects(ollama.generate({ model: 'm', prompt: PREFIX, suffix: SUFFIX, raw: true }), /cannot be combined with raw/);

  const other = await serve(llama3);
  const o = new OpenAI({ baseURL: `${other.base}/v1`, apiKey: 'unused', maxRetries: 0 });
  await t.rejects(o.completions.create({ model: 'm', prompt: PREFIX, suffix: SUFFIX }), { status: 400, message: /no fill-in-the-middle tokens/ });
  await t.rejects(new Ollama({ host: other.base }).generate({ model: 'm', prompt: PREFIX, suffix: SUFFIX }), /"m" does not support insert/);
});
