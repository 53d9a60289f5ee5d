// The offline LLM end to end on fixture models (random weights, real tokenizers): result shape, greedy
// determinism and agreement with llama.cpp, seeded sampling, length / stop / abort, batches in input order,
// n > 1, logprobs, and request errors.
import t from 'tap';
import { LLM } from '../lib/index.js';
import { fixtureModel, referenceLlama, REFERENCE_CONTEXT_OPTIONS } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;

t.test('chat on a qwen3 model: the docs/api.md result shape', async (t) => {
  const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
  const llm = new LLM({ model: path, maxModelLen: 512, threads: 2 });
  t.teardown(() => llm.close());
  await llm.ready();
  const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Hello!' }];
  const outs = await llm.chat(messages, { temperature: 0, maxTokens: 8 });
  t.equal(outs.length, 1);
  const o = outs[0];
  t.equal(o.prompt, '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n');
  t.same(o.promptTokenIds, llm.tokenizer.applyChatTemplate(messages));
  t.same(o.promptTokenIds, llm.tokenizer.encode(o.prompt!, { addSpecialTokens: false }));
  t.equal(o.finished, true);
  t.equal(o.outputs.length, 1);
  const c = o.outputs[0];
  t.equal(c.index, 0);
  t.type(c.text, 'string');
  t.ok(c.tokenIds.length >= 1 && c.tokenIds.length <= 8);
  t.ok(['stop', 'length'].includes(c.finishReason));
  t.notOk('logprobs' in c, 'no logprobs unless asked');
  // a batch of conversations, in input order
  const batch = await llm.chat([[{ role: 'user', content: 'a' }], [{ role: 'user', content: 'bb' }]], { temperature: 0, maxTokens: 2 });
  t.same(batch.map((b) => b.prompt), [
    '<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n', '<|im_start|>user\nbb<|im_end|>\n<|im_start|>assistant\n']);
  await t.rejects(llm.chat([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }]),
    /vision encoder/);
});

t.test('generate on a llama2-tokenizer model', async (t) => {
  const path = await fixtureModel({ ...SMALL, arch: 'llama', tokenizer: 'llama2' });
  const llm = new LLM({ model: path, maxModelLen: 256, threads: 2 });
  t.teardown(() => llm.close());
  await llm.ready();
  const tok = llm.tokenizer;
  const prompt = 'The quick brown fox';
  const greedy = { temperature: 0, maxTokens: 24, ignoreEos: true };

  const [a] = await llm.generate(prompt, greedy);
  const [b] = await llm.generate({ prompt }, greedy);
  t.equal(a.prompt, prompt);
  t.same(a.promptTokenIds, tok.encode(prompt));
  t.equal(a.promptTokenIds[0], tok.bosTokenId, 'BOS added for a raw prompt');
  t.same(b.outputs[0].tokenIds, a.outputs[0].tokenIds, 'greedy is deterministic');
  t.equal(a.outputs[0].finishReason, 'length');
  t.equal(a.outputs[0].tokenIds.length, 24, 'maxTokens -> finishReason length');
  // The text continues the prompt, as vLLM detokenizes (decode(prompt + output) minus decode(prompt)): a
  // SentencePiece word piece keeps its leading space even as the first output token. Decoding the output ids on
  // their own would drop that space, as sentencepiece does at the start of a text.
  const skip = { skipSpecialTokens: true };
  const whole = tok.decode([...a.promptTokenIds, ...a.outputs[0].tokenIds], skip);
  t.equal(a.outputs[0].text, whole.slice(tok.decode(a.promptTokenIds, skip).length));
  t.ok(new Set(a.outputs[0].tokenIds).size > 1, 'random weights are not degenerate');
  const [ids] = await llm.generate({ promptTokenIds: a.promptTokenIds }, greedy);
  t.equal(ids.prompt, null);
  t.same(ids.outputs[0].tokenIds, a.outputs[0].tokenIds, 'token-id prompts give the same result');

  t.test('greedy tokens match llama.cpp', async (t) => {
    const llama = await referenceLlama();
    const model = await llama.loadModel({ modelPath: path });
    // threads: 1 (REFERENCE_CONTEXT_OPTIONS): llama.cpp's default threads spin against each other on a
    // shared 2-core machine and made this subtest take 12-30 s instead of well under a second.
    const context = await model.createContext(REFERENCE_CONTEXT_OPTIONS);
    const seq = context.getSequence();
    const theirs: number[] = [];
    for await (const token of seq.evaluate(a.promptTokenIds as never, { temperature: 0 })) {
      theirs.push(token as number);
      if (theirs.length === 24) break;
    }
    await context.dispose();
    await model.dispose();
    t.same(a.outputs[0].tokenIds, theirs);
  });

  const seeded = { temperature: 1, topK: 40, seed: 1234, maxTokens: 16, ignoreEos: true };
  const [s1] = await llm.generate(prompt, seeded);
  const [s2] = await llm.generate(prompt, seeded);
  const [s3] = await llm.generate(prompt, { ...seeded, seed: 1235 });
  t.same(s1.outputs[0].tokenIds, s2.outputs[0].tokenIds, 'same seed, same tokens');
  t.notSame(s1.outputs[0].tokenIds, s3.outputs[0].tokenIds, 'another seed, other tokens');
  t.notSame(s1.outputs[0].tokenIds, a.outputs[0].tokenIds.slice(0, 16), 'temperature 1 is not greedy');
  // The filters reach the sampler: top-k 1, a tiny top-p and min-p 1 each leave only the argmax.
  for (const only of [{ topK: 1 }, { top_p: 1e-6 }, { minP: 1 }]) {
    const [o] = await llm.generate(prompt, { ...greedy, temperature: 1.5, seed: 3, ...only });
    t.same(o.outputs[0].tokenIds, a.outputs[0].tokenIds, `${JSON.stringify(only)} at temperature 1.5 is greedy`);
  }

  // A request whose token the model samples where its logits are (the engine plans a spec: edits, truncation, one
  // generator value; the backend's sample_rows draws) gets the tokens the host sampler draws from the downloaded
  // row, which logprobs requests still take: the same for every chain, draw for draw.
  const chains: Record<string, unknown>[] = [
    { temperature: 1 },
    { temperature: 0.7, topK: 40, topP: 0.9, minP: 0.05 },
    { temperature: 0.9, topP: 0.8 },
    { temperature: 1.2, minP: 0.1 },
    { temperature: 0.8, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.4, logitBias: { 42: 2.5, 7: -3 } },
    { temperature: 0, repetitionPenalty: 1.5 },
    { temperature: 1, minTokens: 10, ignoreEos: false },
  ];
  for (const chain of chains) {
    const opts = { ignoreEos: true, seed: 42, maxTokens: 12, ...chain };
    const [onModel] = await llm.generate(prompt, opts);
    const [onHost] = await llm.generate(prompt, { ...opts, logprobs: 0 });
    t.same(onModel.outputs[0].tokenIds, onHost.outputs[0].tokenIds, `sampled by the model == by the host: ${JSON.stringify(chain)}`);
  }

  // Stop string and stop token taken from the greedy continuation.
  const text = a.outputs[0].text;
  const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 3);
  const [st] = await llm.generate(prompt, { ...greedy, stop: [stop] });
  t.equal(st.outputs[0].finishReason, 'stop');
  t.equal(st.outputs[0].stopReason, stop);
  t.equal(st.outputs[0].text, text.slice(0, text.indexOf(stop)), 'text ends right before the stop string');
  const stopId = a.outputs[0].tokenIds[5];
  const [sid] = await llm.generate(prompt, { ...greedy, stopTokenIds: [stopId] });
  const firstAt = a.outputs[0].tokenIds.indexOf(stopId);
  t.same(sid.outputs[0].tokenIds, a.outputs[0].tokenIds.slice(0, firstAt + 1), 'ends at (and reports) the stop id');
  t.equal(sid.outputs[0].stopReason, stopId);
  t.equal(sid.outputs[0].finishReason, 'stop');
  t.equal(a.outputs[0].stopReason, null, 'no stop reason for length');

  // Batch: input order, per-prompt params.
  const prompts = ['one', 'two three four five', 'six seven'];
  const batch = await llm.generate(prompts, [{ ...greedy, maxTokens: 3 }, { ...greedy, maxTokens: 5 }, { ...greedy, maxTokens: 4 }]);
  t.same(batch.map((r) => r.prompt), prompts);
  t.same(batch.map((r) => r.outputs[0].tokenIds.length), [3, 5, 4]);
  for (let i = 0; i < prompts.length; i++) {
    const [alone] = await llm.generate(prompts[i], { ...greedy, maxTokens: 3 });
    t.same(batch[i].outputs[0].tokenIds.slice(0, 3), alone.outputs[0].tokenIds, `batch entry ${i} is its own prompt's output`);
  }

  // n > 1 and logprobs
  const [multi] = await llm.generate(prompt, { temperature: 1, n: 3, seed: 7, maxTokens: 6, ignoreEos: true });
  t.same(multi.outputs.map((o) => o.index), [0, 1, 2]);
  t.ok(new Set(multi.outputs.map((o) => o.tokenIds.join(','))).size > 1, 'n samples are independent');
  const [lp] = await llm.generate(prompt, { ...greedy, maxTokens: 4, logprobs: 3 });
  t.equal(lp.outputs[0].logprobs!.length, 4);
  let sum = 0;
  lp.outputs[0].logprobs!.forEach((entry, i) => {
    const chosen = entry[lp.outputs[0].tokenIds[i]];
    t.equal(chosen.rank, 1, 'greedy picks the rank-1 token');
    t.ok(chosen.logprob <= 0);
    t.equal(Object.keys(entry).length, 3);
    sum += chosen.logprob;
  });
  t.ok(Math.abs(sum - lp.outputs[0].cumulativeLogprob!) < 1e-4);
});

t.test('abort through an AbortSignal ends requests with finishReason abort', async (t) => {
  const path = await fixtureModel({ ...SMALL, arch: 'llama', tokenizer: 'llama2' });
  const llm = new LLM({ model: path, maxModelLen: 4096, threads: 2 });
  t.teardown(() => llm.close());
  await llm.ready();
  const ac = new AbortController();
  const pending = llm.generate(['abc', 'def'], { maxTokens: 4000, ignoreEos: true }, { signal: ac.signal });
  setTimeout(() => ac.abort(), 100);
  const outs = await pending;
  t.same(outs.map((o) => o.outputs[0].finishReason), ['abort', 'abort']);
  t.ok(outs[0].outputs[0].tokenIds.length < 4000, 'stopped early, partial output kept');
  const pre = new AbortController();
  pre.abort();
  const [early] = await llm.generate('abc', { maxTokens: 4000 }, { signal: pre.signal });
  t.equal(early.outputs[0].finishReason, 'abort');
  const [after] = await llm.generate('abc', { temperature: 0, maxTokens: 2, ignoreEos: true });
  t.equal(after.outputs[0].finishReason, 'length', 'the engine keeps serving after aborts');
});

t.test('bad requests reject with a clear message; close and asyncDispose', async (t) => {
  const path = await fixtureModel({ ...SMALL, arch: 'llama', tokenizer: 'llama2' });
  const llm = new LLM({ model: path, maxModelLen: 64, threads: 2 });
  await llm.ready();
  await t.rejects(llm.generate({ promptTokenIds: [1, 999999] }), /prompt token id 999999 at position 1 is outside the vocabulary/);
  await t.rejects(llm.generate({ promptTokenIds: new Array(64).fill(1) }), /maxModelLen is 64/);
  await t.rejects(llm.generate('x', { temprature: 0 } as never), /unknown sampling parameter 'temprature'/);
  await t.rejects(llm.generate('x', { top_k: -2 }), /top_k must be an integer >= -1 \(got -2\)/);
  await t.rejects(llm.generate('x', [{ maxTokens: 0 }]), /maxTokens must be an integer >= 1 \(got 0\)/);
  await t.rejects(llm.generate({ promptTokenIds: [1, 2] }, { stopTokenIds: [99999] }), /stopTokenIds entry 99999 is outside the vocabulary \[0, 32000\)/);
  await t.rejects(llm.generate('x', [{}, {}]), /params has 2 entries but there are 1 prompts/);
  await t.rejects(llm.generate('x', {}, { timeout: 5 } as never), /unknown option 'timeout'/);
  await t.rejects(llm.chat([{ role: 'user', content: 'x' }]), /this model has no chat template/);
  const [ok] = await llm.generate('x', { maxTokens: 100, ignoreEos: true });
  t.equal(ok.outputs[0].finishReason, 'length');
  t.ok(ok.promptTokenIds.length + ok.outputs[0].tokenIds.length <= 64, 'output stops where the context is full');
  await llm[Symbol.asyncDispose]();
  await t.rejects(llm.generate('x'), /the engine is closed/);
  await llm.close(); // idempotent
  t.throws(() => new LLM({ model: path, maxModelLen: 1 }), /maxModelLen must be an integer >= 2 \(got 1\)/);
  t.throws(() => new LLM({ model: path, gpuLayers: 3 } as never), /unknown option 'gpuLayers'/);
  t.throws(() => new LLM({ model: path, device: 'tpu' as never }), /LLM: device must be 'auto', 'cpu' or 'cuda' \(got tpu\)/);
  t.throws(() => new LLM({ model: path, chunked_prefill_size: 0 }), /LLM: chunked_prefill_size must be -1 \(off\) or an integer >= 1 \(got 0\)/);
  t.throws(() => new LLM({ model: path, kvCacheMemory: 1.5 }), /kvCacheMemory must be a fraction in \(0, 1\] or a whole number of bytes \(got 1\.5\)/);
  t.throws(() => new LLM({ model: path, threads: 0 }), /LLM: threads must be an integer in \[1, 1024\] \(got 0\)/);
  t.throws(() => new LLM({ model: path, maxModelLen: 64, context_length: 64 }), /context_length and maxModelLen are the same option/);
  t.throws(() => new LLM({} as never), /the model path is required/);
});
