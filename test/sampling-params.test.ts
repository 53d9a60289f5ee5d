// The sampling-parameter normalizer: defaults, every alias, every invalid field's message.
import t from 'tap';
import { normalizeSamplingParams, SamplingParamsError } from '../lib/sampling-params.js';

t.test('defaults follow the API table (offline maxTokens 256)', async (t) => {
  t.same(normalizeSamplingParams(undefined), {
    temperature: 1, topP: 1, topK: -1, minP: 0, repetitionPenalty: 1, repeatLastN: -1, presencePenalty: 0, frequencyPenalty: 0,
    maxTokens: 256, minTokens: 0, stop: [], stopTokenIds: [], ignoreEos: false, seed: null, n: 1, logprobs: null, promptLogprobs: null,
    logitBias: [], skipSpecialTokens: true, grammar: null, prediction: null, speculative: true,
  });
  t.equal(normalizeSamplingParams({}, { defaultMaxTokens: null }).maxTokens, null);
  t.equal(normalizeSamplingParams({}, { defaultMaxTokens: 17 }).maxTokens, 17);
  t.equal(normalizeSamplingParams({ temperature: null, seed: undefined }).temperature, 1, 'null / undefined = unset');
});

t.test('camelCase, snake_case and aliases map to one field', async (t) => {
  const cases: [string, unknown, string, unknown][] = [
    ['temperature', 0.5, 'temperature', 0.5],
    ['topP', 0.9, 'topP', 0.9], ['top_p', 0.9, 'topP', 0.9],
    ['topK', 40, 'topK', 40], ['top_k', 40, 'topK', 40],
    ['minP', 0.05, 'minP', 0.05], ['min_p', 0.05, 'minP', 0.05],
    ['repetitionPenalty', 1.1, 'repetitionPenalty', 1.1], ['repetition_penalty', 1.1, 'repetitionPenalty', 1.1],
    ['repeatPenalty', 1.2, 'repetitionPenalty', 1.2], ['repeat_penalty', 1.2, 'repetitionPenalty', 1.2],
    ['presencePenalty', 0.5, 'presencePenalty', 0.5], ['presence_penalty', -0.5, 'presencePenalty', -0.5],
    ['frequencyPenalty', 1, 'frequencyPenalty', 1], ['frequency_penalty', 2, 'frequencyPenalty', 2],
    ['maxTokens', 10, 'maxTokens', 10], ['max_tokens', 11, 'maxTokens', 11],
    ['maxNewTokens', 12, 'maxTokens', 12], ['max_new_tokens', 13, 'maxTokens', 13],
    ['maxCompletionTokens', 14, 'maxTokens', 14], ['max_completion_tokens', 15, 'maxTokens', 15],
    ['minTokens', 2, 'minTokens', 2], ['min_tokens', 3, 'minTokens', 3],
    ['minNewTokens', 4, 'minTokens', 4], ['min_new_tokens', 5, 'minTokens', 5],
    ['stop', 'END', 'stop', ['END']], ['stop', ['a', 'b'], 'stop', ['a', 'b']],
    ['stopTokenIds', [1, 2], 'stopTokenIds', [1, 2]], ['stop_token_ids', [3], 'stopTokenIds', [3]],
    ['ignoreEos', true, 'ignoreEos', true], ['ignore_eos', true, 'ignoreEos', true],
    ['seed', 0, 'seed', 0], ['seed', 4294967295, 'seed', 4294967295],
    ['n', 8, 'n', 8],
    ['logprobs', 0, 'logprobs', 0], ['logprobs', 20, 'logprobs', 20],
    ['topK', 0, 'topK', 0], ['temperature', 0, 'temperature', 0],
  ];
  for (const [name, value, field, expect] of cases) {
    const p = normalizeSamplingParams({ [name]: value }) as unknown as Record<string, unknown>;
    t.same(p[field], expect, `${name} = ${JSON.stringify(value)} -> ${field}`);
  }
});

t.test('unknown keys and duplicate spellings are rejected', async (t) => {
  t.throws(() => normalizeSamplingParams({ temprature: 1 } as never), /unknown sampling parameter 'temprature'/);
  t.throws(() => normalizeSamplingParams({ best_of: 2 } as never), /unknown sampling parameter 'best_of'/);
  t.throws(() => normalizeSamplingParams({ topP: 0.5, top_p: 0.5 }), /top_p and topP are the same parameter/);
  t.throws(() => normalizeSamplingParams({ maxTokens: 5, maxNewTokens: 5 }), /maxNewTokens and maxTokens/);
  t.throws(() => normalizeSamplingParams([] as never), /must be an object/);
  t.throws(() => normalizeSamplingParams('x' as never), /must be an object/);
});

t.test('every invalid field names itself and its range', async (t) => {
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ temperature: -0.1 }, /^temperature must be >= 0 \(got -0\.1\)$/],
    [{ temperature: '1' }, /^temperature must be >= 0 \(got "1"\)$/],
    [{ temperature: NaN }, /^temperature must be >= 0/],
    [{ topP: 0 }, /^topP must be in \(0, 1\] \(got 0\)$/],
    [{ top_p: 1.5 }, /^top_p must be in \(0, 1\] \(got 1\.5\)$/],
    [{ topK: -2 }, /^topK must be an integer >= -1 \(got -2\)$/],
    [{ topK: 2.5 }, /^topK must be an integer >= -1/],
    [{ repeat_last_n: -2 }, /^repeat_last_n must be an integer >= -1 \(got -2\)$/],
    [{ minP: 1.1 }, /^minP must be in \[0, 1\] \(got 1\.1\)$/],
    [{ repetitionPenalty: 0 }, /^repetitionPenalty must be > 0 \(got 0\)$/],
    [{ repeat_penalty: -1 }, /^repeat_penalty must be > 0/],
    [{ presencePenalty: 2.5 }, /^presencePenalty must be in \[-2, 2\] \(got 2\.5\)$/],
    [{ frequency_penalty: -3 }, /^frequency_penalty must be in \[-2, 2\]/],
    [{ maxTokens: 0 }, /^maxTokens must be an integer >= 1 \(got 0\)$/],
    [{ max_completion_tokens: 1.5 }, /^max_completion_tokens must be an integer >= 1/],
    [{ minTokens: -1 }, /^minTokens must be an integer >= 0 \(got -1\)$/],
    [{ minTokens: 10, maxTokens: 5 }, /^minTokens \(10\) must not exceed maxTokens \(5\)$/],
    [{ stop: 5 }, /^stop must be a string or an array of strings \(got 5\)$/],
    [{ stop: new Array(17).fill('x') }, /^stop must hold at most 16 strings \(got 17\)$/],
    [{ stop: ['ok', 3] }, /^stop\[1\] must be a string \(got 3\)$/],
    [{ stop: [''] }, /^stop\[0\] must not be empty$/],
    [{ stop: ['é'.repeat(129)] }, /^stop\[0\] must be at most 256 bytes \(got 258\)$/],
    [{ stopTokenIds: 3 }, /^stopTokenIds must be an array of token ids/],
    [{ stop_token_ids: [1, -1] }, /^stop_token_ids\[1\] must be a non-negative integer token id \(got -1\)$/],
    [{ ignoreEos: 'yes' }, /^ignoreEos must be a boolean \(got "yes"\)$/],
    [{ seed: -1 }, /^seed must be an integer in \[0, 4294967295\] \(got -1\)$/],
    [{ seed: 2 ** 32 }, /^seed must be an integer in \[0, 4294967295\]/],
    [{ n: 0 }, /^n must be an integer in \[1, 128\] \(got 0\)$/],
    [{ n: 129 }, /^n must be an integer in \[1, 128\] \(got 129\)$/],
    [{ logprobs: 21 }, /^logprobs must be an integer in \[0, 20\] \(got 21\)$/],
    [{ logprobs: true }, /^logprobs must be an integer in \[0, 20\] \(got true\)$/],
  ];
  for (const [input, re] of bad) {
    let caught: unknown;
    try {
      normalizeSamplingParams(input);
    } catch (e) {
      caught = e;
    }
    t.ok(caught instanceof SamplingParamsError, `${JSON.stringify(input)} throws SamplingParamsError`);
    t.match((caught as Error).message, re, JSON.stringify(input).slice(0, 60));
  }
  const e = (() => { try { normalizeSamplingParams({ top_k: -5 }); } catch (err) { return err as SamplingParamsError; } })();
  t.equal(e?.param, 'top_k', 'the error carries the field as spelled (for HTTP error.param)');
});
