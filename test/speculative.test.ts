// Speculative decoding end to end: on every model family (dense, MoE, LFM2 and LFM2-MoE with their recurrent conv
// state rolled back after a rejected draft) the output with drafts equals plain decoding's, greedy and seeded:
// a prediction equal to the plain output (every draft accepted), a prediction with edits (drafts rejected mid-way),
// n-gram drafts, in continuous batching with prefix caching and under a KV budget tight enough to preempt. The
// counters say how many drafts were verified and accepted; per-request `speculative: false` turns drafting off.
import t from 'tap';
import { LLM } from '../lib/index.js';
import { fixtureModel } from './helpers/fixtures.js';
import { DENSE, LFM2, LFM2MOE, MOE } from './helpers/small-models.js';

const MAX_LEN = 256;

const ids = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => 3 + ((i * 37 + seed * 101) % 200));
// Four prompts; the last repeats itself, so n-gram lookup finds drafts in the prompt
const PROMPTS = [ids(20, 1), ids(33, 2), ids(7, 3), [...ids(12, 4), ...ids(12, 4), ...ids(12, 4)]];
const N_OUT = 40;

async function generate(llm: LLM, params: object, predictions?: (number[] | null)[]): Promise<number[][]> {
  const res = await llm.generate(PROMPTS.map((p) => ({ promptTokenIds: p })),
    PROMPTS.map((_, i) => ({ ...params, ...(predictions?.[i] ? { prediction: { tokenIds: predictions[i] } } : {}) })));
  return res.map((r) => r.outputs[0].tokenIds);
}

// A prediction with edits: every 7th token replaced, a token inserted after the 12th and one dropped at the 25th
function edited(out: number[]): number[] {
  const e = out.map((tok, i) => (i % 7 === 6 ? 3 + ((tok + 11) % 200) : tok));
  e.splice(12, 0, 5);
  e.splice(25, 1);
  return e;
}

for (const [label, spec] of [['llama', DENSE], ['qwen3moe', MOE], ['lfm2', LFM2], ['lfm2moe', LFM2MOE]] as const) {
  t.test(`${label}: speculative output == plain output (predictions, edits, n-gram; greedy and seeded)`, async (t) => {
    const model = await fixtureModel(spec);
    const base = { model, maxModelLen: MAX_LEN, threads: 2, maxNumSeqs: 4, chunkedPrefillSize: 16, maxNumBatchedTokens: 64 };
    const plain = new LLM(base);
    const spec8 = new LLM({ ...base, speculativeConfig: { method: 'ngram', numSpeculativeTokens: 8, promptLookupMin: 1 } });
    t.teardown(() => Promise.all([plain.close(), spec8.close()]));
    for (const params of [{ temperature: 0, maxTokens: N_OUT, ignoreEos: true },
      { temperature: 0.9, topK: 20, seed: 5, maxTokens: N_OUT, ignoreEos: true }]) {
      const sampled = params.temperature > 0 ? 'seeded' : 'greedy';
      const want = await generate(plain, { ...params, speculative: false });
      t.equal(plain.stats().specDraftTokens, 0, 'no drafts with speculative: false');

      const before = spec8.stats();
      const exact = await generate(spec8, params, want);
      t.same(exact, want, `${sampled}: prediction == the output: same tokens`);
      const after = spec8.stats();
      const drafted = after.specDraftTokens - before.specDraftTokens;
      const accepted = after.specAcceptedTokens - before.specAcceptedTokens;
      t.ok(drafted >= 4 * (N_OUT - 8) && accepted === drafted, `${sampled}: every draft accepted (${accepted} of ${drafted})`);
      t.ok(after.steps - before.steps < N_OUT / 2, `${sampled}: fewer steps than tokens (${after.steps - before.steps})`);

      const mid = spec8.stats();
      const edits = await generate(spec8, params, want.map(edited));
      t.same(edits, want, `${sampled}: edited prediction: same tokens`);
      const end = spec8.stats();
      const rejected = (end.specDraftTokens - mid.specDraftTokens) - (end.specAcceptedTokens - mid.specAcceptedTokens);
      t.ok(rejected > 0 && end.specAcceptedTokens > mid.specAcceptedTokens, `${sampled}: some drafts rejected (${rejected}), some accepted`);

      t.same(await generate(spec8, params), want, `${sampled}: n-gram drafts only: same tokens`);
    }
  });
}

t.test('drafts under preemption and prefix caching: same tokens, counters consistent', async (t) => {
  const model = await fixtureModel(LFM2);
  // KV for one max-length sequence (16 blocks of 16) across 4 sequences: the batch preempts while drafting
  const kv = MAX_LEN * (2 * 2 * 16 * 2 * 2 + (4 * 2 * 64 * 4) / 16) + 4 * 4 * 2 * 64 * 4; // float16 K / V (the CPU's default)
  const base = { model, maxModelLen: MAX_LEN, threads: 2, maxNumSeqs: 4, kvCacheMemory: kv };
  const plain = new LLM(base);
  const spec = new LLM({ ...base, speculativeConfig: { method: 'ngram', promptLookupMin: 1 } });
  t.teardown(() => Promise.all([plain.close(), spec.close()]));
  const long = { temperature: 0, maxTokens: 150, ignoreEos: true };
  const want = await generate(plain, long);
  const got = await generate(spec, long, want);
  t.same(got, want, 'same tokens');
  const s = spec.stats();
  t.ok(s.preemptions > 0, `preempted ${s.preemptions} times`);
  t.ok(s.specAcceptedTokens > 0 && s.specAcceptedTokens <= s.specDraftTokens, `${s.specAcceptedTokens} of ${s.specDraftTokens} accepted`);
  t.equal(s.kvBlocksUsed, 0, 'every block back after the requests');
});

t.test('prediction as text and as OpenAI content parts; bad predictions are refused by name', async (t) => {
  const model = await fixtureModel(DENSE);
  const llm = new LLM({ model, maxModelLen: MAX_LEN, threads: 2 });
  t.teardown(() => llm.close());
  const params = { temperature: 0, maxTokens: 24, ignoreEos: true };
  const [plain] = await llm.generate([{ promptTokenIds: PROMPTS[0] }], params);
  const text = plain.outputs[0].text;
  for (const prediction of [text, { type: 'content', content: text }, { type: 'content', content: [{ type: 'text', text }] }]) {
    const [r] = await llm.generate([{ promptTokenIds: PROMPTS[0] }], { ...params, prediction });
    t.same(r.outputs[0].tokenIds, plain.outputs[0].tokenIds, `same tokens with prediction ${typeof prediction === 'string' ? 'text' : 'content'}`);
  }
  await t.rejects(llm.generate([{ promptTokenIds: PROMPTS[0] }], { ...params, prediction: { type: 'other' } }), /prediction.type must be 'content'/);
  await t.rejects(llm.generate([{ promptTokenIds: PROMPTS[0] }], { ...params, prediction: { tokenIds: [1, -2] } }), /prediction.tokenIds\[1\]/);
  await t.rejects(llm.generate([{ promptTokenIds: PROMPTS[0] }], { ...params, prediction: { tokenIds: [10 ** 6] } }),
    /prediction token id 1000000 is outside the vocabulary/);
  t.throws(() => new LLM({ model, speculativeConfig: { method: 'eagle' } }), /method must be 'ngram'/);
  t.throws(() => new LLM({ model, speculativeConfig: { numSpeculativeTokens: 0 } }), /numSpeculativeTokens must be/);
  t.throws(() => new LLM({ model, speculativeConfig: { promptLookupMin: 5, promptLookupMax: 3 } }), /must not exceed/);
});

t.test('server: prediction over HTTP, usage.completion_tokens_details, spec decode counters in /metrics', async (t) => {
  const { buildApp } = await import('../lib/server/app.js');
  const { normalizeEngineOptions } = await import('../lib/engine-options.js');
  const model = await fixtureModel(DENSE);
  const app = await buildApp({ engine: normalizeEngineOptions({ model, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['m'] });
  t.teardown(() => app.close());
  const ask = async (extra: object): Promise<{ choices: { text: string }[]; usage: Record<string, any> }> => {
    const r = await app.inject({ method: 'POST', url: '/v1/completions', payload: {
      model: 'm', prompt: 'Once upon a time', max_tokens: 24, temperature: 0, ignore_eos: true, ...extra } });
    t.equal(r.statusCode, 200, r.body.slice(0, 200));
    return r.json();
  };
  const plain = await ask({});
  t.same(plain.usage.completion_tokens_details, { accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
  const predicted = await ask({ prediction: { type: 'content', content: plain.choices[0].text } });
  t.equal(predicted.choices[0].text, plain.choices[0].text, 'same text');
  const details = predicted.usage.completion_tokens_details;
  t.ok(details.accepted_prediction_tokens > 0, `accepted ${details.accepted_prediction_tokens}, rejected ${details.rejected_prediction_tokens}`);
  const off = await ask({ prediction: plain.choices[0].text, speculative: false });
  t.same(off.usage.completion_tokens_details, { accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 }, 'speculative: false');
  const bad = await app.inject({ method: 'POST', url: '/v1/completions', payload: { model: 'm', prompt: 'x', prediction: { type: 'image' } } });
  t.equal(bad.statusCode, 400);
  t.match(bad.body, /prediction.type must be 'content'/);
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const accepted = /spindle:spec_decode_num_accepted_tokens_total\{[^}]*\} (\d+)/.exec(metrics);
  const drafted = /spindle:spec_decode_num_draft_tokens_total\{[^}]*\} (\d+)/.exec(metrics);
  t.ok(accepted && Number(accepted[1]) === details.accepted_prediction_tokens, 'accepted tokens counted');
  t.ok(drafted && Number(drafted[1]) === details.accepted_prediction_tokens + details.rejected_prediction_tokens, 'draft tokens counted');
});

t.test('serve flags: --speculative-config, --speculative-model (vLLM) and --speculative-algorithm / --speculative-num-draft-tokens / --speculative-draft-model-path (SGLang)', async (t) => {
  const { parseServeArgs } = await import('../lib/server/command.js');
  const { normalizeEngineOptions } = await import('../lib/engine-options.js');
  const engineOf = (argv: string[]) => {
    const cfg = parseServeArgs(['m.gguf', ...argv]);
    if (cfg === 'help') throw new Error('help');
    return normalizeEngineOptions({ ...cfg.engine, model: 'm.gguf' }, 'serve').speculativeConfig;
  };
  t.same(engineOf(['--speculative-config', '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3}']),
    { method: 'ngram', numSpeculativeTokens: 4, promptLookupMax: 3 });
  t.same(engineOf(['--speculative-algorithm', 'NGRAM', '--speculative-num-draft-tokens', '6']), { method: 'ngram', numSpeculativeTokens: 6 });
  t.equal(engineOf([]), null);
  t.throws(() => engineOf(['--speculative-config', '{oops']), /must be a JSON object/);
  t.throws(() => engineOf(['--speculative-config', '{"method":"eagle"}']), /method must be 'ngram'/);
  t.throws(() => engineOf(['--speculative-config', '{"method":"draft_model"}']), /needs model/);
  t.throws(() => engineOf(['--speculative-config', '{}', '--speculative-algorithm', 'NGRAM']), /give one/);
  t.same(engineOf(['--speculative-model', 'd.gguf', '--num-speculative-tokens', '5']), { method: 'draft_model', model: 'd.gguf', numSpeculativeTokens: 5 });
  t.same(engineOf(['--speculative-algorithm', 'STANDALONE', '--speculative-draft-model-path', 'd.gguf']), { method: 'draft_model', model: 'd.gguf' });
  t.same(engineOf(['--speculative-config', '{"model":"d.gguf","num_speculative_tokens":3}']), { method: 'draft_model', model: 'd.gguf', numSpeculativeTokens: 3 });
});

t.test('draft model: the same tokens as plain decoding; a copy of the model gets every draft accepted', async (t) => {
  const target = await fixtureModel(DENSE);
  const small = await fixtureModel({ ...DENSE, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 64, seed: 5 });
  const lfm2 = await fixtureModel(LFM2);
  const base = { maxModelLen: MAX_LEN, threads: 2, maxNumSeqs: 4 };
  const params = { temperature: 0, maxTokens: N_OUT, ignoreEos: true };
  const seeded = { temperature: 0.9, topK: 20, seed: 5, maxTokens: N_OUT, ignoreEos: true };
  for (const [label, model, draft] of [['llama, draft = itself', target, target], ['llama, small draft', target, small],
    ['lfm2, small llama draft', lfm2, small]] as const) {
    const plain = new LLM({ ...base, model });
    const spec = new LLM({ ...base, model, speculativeConfig: { model: draft, numSpeculativeTokens: 6 } });
    for (const p of [params, seeded]) {
      const want = await generate(plain, p);
      const before = spec.stats();
      t.same(await generate(spec, p), want, `${label}, ${p.temperature ? 'seeded' : 'greedy'}: same tokens`);
      const after = spec.stats();
      const drafted = after.specDraftTokens - before.specDraftTokens, accepted = after.specAcceptedTokens - before.specAcceptedTokens;
      t.ok(drafted > 0, `${label}: ${accepted} of ${drafted} drafts accepted`);
      if (draft === model && !p.temperature) t.equal(accepted, drafted, 'a copy of the model proposes its own greedy tokens');
    }
    t.equal(spec.stats().kvBlocksUsed, 0, 'every block back');
    await Promise.all([plain.close(), spec.close()]);
  }
  const qwen = await fixtureModel(MOE);
  const other = new LLM({ ...base, model: target, speculativeConfig: { model: qwen } });
  await t.rejects(other.ready(), /same tokenizer/);
  await other.close();
  const recurrent = new LLM({ ...base, model: target, speculativeConfig: { model: lfm2 } });
  await t.rejects(recurrent.ready(), /keeps recurrent state/);
  await recurrent.close();
  t.throws(() => new LLM({ ...base, model: target, speculativeConfig: { method: 'draft_model' } }), /needs model/);
});
