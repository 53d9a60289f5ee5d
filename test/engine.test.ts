// The SGLang-style Engine: generate (single, batch, n > 1), streaming chunks, early exit aborts, tokenizer
// before the model has loaded, shutdown.
import t from 'tap';
import { Engine } from '../lib/index.js';
import { fixtureModel } from './helpers/fixtures.js';

t.test('Engine on a qwen3 model', async (t) => {
  const path = await fixtureModel({
    arch: 'qwen3', tokenizer: 'qwen3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128,
    tiedEmbeddings: true, seed: 11,
  });
  const engine = new Engine({ modelPath: path, contextLength: 512, threads: 2 });
  t.teardown(() => engine.shutdown());

  // Available at once (read from the GGUF metadata), like SGLang's synchronous constructor.
  const messages = [{ role: 'user' as const, content: 'Hi' }];
  const prompt = engine.tokenizer.applyChatTemplate(messages, { tokenize: false, addGenerationPrompt: true });
  t.equal(prompt, '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');

  const params = { maxNewTokens: 12, temperature: 0, ignore_eos: true };
  const r = await engine.generate({ prompt, samplingParams: params });
  if (Array.isArray(r)) throw new Error('expected one result');
  t.equal(r.outputIds.length, 12);
  t.type(r.text, 'string');
  t.equal(r.metaInfo.promptTokens, engine.tokenizer.encode(prompt).length);
  t.equal(r.metaInfo.completionTokens, 12);
  t.same(r.metaInfo.finishReason, { type: 'length', length: 12 });
  t.ok(r.metaInfo.e2eLatency > 0 && r.metaInfo.e2eLatency < 60);
  t.same(engine.tokenizer.applyChatTemplate(messages), engine.tokenizer.encode(prompt, { addSpecialTokens: false }));

  // snake_case input fields and token-id input give the same greedy result
  const ids = engine.tokenizer.encode(prompt);
  const r2 = await engine.generate({ input_ids: ids, sampling_params: params });
  t.same((r2 as { outputIds: number[] }).outputIds, r.outputIds);

  // streaming: incremental chunks that add up to the non-streamed result; the last carries the finish
  const chunks = [];
  for await (const c of engine.generate({ prompt, samplingParams: params, stream: true })) chunks.push(c);
  t.equal(chunks.length, 12, 'one chunk per engine step');
  t.equal(chunks.map((c) => c.text).join(''), r.text);
  t.same(chunks.flatMap((c) => c.outputIds), r.outputIds);
  t.ok(chunks.slice(0, -1).every((c) => c.metaInfo.finishReason === null));
  t.same(chunks[11].metaInfo.finishReason, { type: 'length', length: 12 });
  t.equal(chunks[11].metaInfo.completionTokens, 12);

  // leaving the loop early aborts the request
  let seen = 0;
  for await (const c of engine.generate({ prompt, samplingParams: { maxNewTokens: 400, ignoreEos: true }, stream: true })) {
    seen += c.outputIds.length;
    if (seen >= 2) break;
  }
  const after = await engine.generate({ prompt, samplingParams: { ...params, maxNewTokens: 1 } });
  t.same((after as { metaInfo: { finishReason: unknown } }).metaInfo.finishReason, { type: 'length', length: 1 },
    'the next request runs at once: the abandoned stream was aborted');

  // batches and n > 1 give arrays
  const batch = await engine.generate({ prompt: ['a', 'b c'], samplingParams: { maxNewTokens: 2, temperature: 0 } });
  t.ok(Array.isArray(batch) && batch.length === 2);
  const multi = await engine.generate({ prompt: 'a', samplingParams: { maxNewTokens: 2, n: 2, seed: 1 } });
  t.ok(Array.isArray(multi) && multi.length === 2);

  // stop string reported as SGLang's matched
  const full = r.text;
  const stop = full.slice(3, 6);
  const stopped = await engine.generate({ prompt, samplingParams: { ...params, stop } });
  if (Array.isArray(stopped)) throw new Error('expected one result');
  t.same(stopped.metaInfo.finishReason, { type: 'stop', matched: stop });
  t.equal(stopped.text, full.slice(0, full.indexOf(stop)));

  t.throws(() => engine.generate({ prompt, inputIds: ids }), /exactly one of prompt/);
  await t.rejects(engine.generate({ prompt: ['a', 'b'], stream: true }).next(), /stream supports one prompt/);
  t.throws(() => engine.generate({ prompt, sampling: {} } as never), /unknown field 'sampling'/);

  await engine.shutdown();
  await t.rejects(engine.generate({ prompt }), /the engine is closed/);
});
