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
  const tok = engine.tokenizer;
  t.equal(tok.decode(tok.encode(prompt)), prompt);
  t.equal(tok.decode(tok.encode(prompt), { skipSpecialTokens: true }), 'user\nHi\nassistant\n');
  t.same(tok.encode('<|im_end|>'), [151645], '<|im_end|> is one special token');
  t.ok(tok.eogTokenIds.includes(151645), '... and ends generation');
  t.ok(tok.encode('<|im_end|>', { parseSpecial: false }).length > 1, 'parseSpecial: false keeps control text as text');
  t.throws(() => tok.decode(null as never), /decode: ids must be an array of token ids/);
  t.throws(() => tok.encode('x', { addSpecial: true } as never), /encode: unknown option 'addSpecial'/);
  t.throws(() => tok.applyChatTemplate(messages, { tokenize: 'no' } as never), /applyChatTemplate: tokenize must be a boolean/);

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

  // Bad input rejects (the promise, or the stream's first next()); generate() itself never throws.
  await t.rejects(engine.generate({ prompt, inputIds: ids }), /exactly one of prompt \(text\) or inputIds/);
  await t.rejects(engine.generate({}), /exactly one of prompt/);
  await t.rejects(engine.generate({ prompt: ['a', 'b'], stream: true }).next(), /stream supports one prompt/);
  await t.rejects(engine.generate({ prompt, stream: true, inputIds: ids }).next(), /exactly one of prompt/);
  const untyped = (input: unknown) => engine.generate(input as { prompt: string });
  await t.rejects(untyped({ prompt, sampling: {} }), /unknown field 'sampling'/);
  await t.rejects(untyped(null), /input must be an object/);
  await t.rejects(untyped({ prompt, stream: 'yes' }), /stream must be a boolean/);
  await t.rejects(engine.generate({ prompt, samplingParams: { topP: 0 } }), /topP must be in \(0, 1\] \(got 0\)/);
  await t.rejects(engine.generate({ input_ids: [[1, 2], 'x'] as never }), /inputIds\[1\] must be an array of integer token ids/);
  await t.rejects(engine.generate({ prompt, samplingParams: [{}, {}] }), /params has 2 entries but there are 1 prompts/);

  await engine.shutdown();
  await t.rejects(engine.generate({ prompt }), /the engine is closed/);
});
