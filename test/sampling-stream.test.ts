// Sampling and streaming end to end through the Engine (the native sampler has its own unit tests in
// test/native/sampler_test.cpp): streamed chunks never split a multi-byte character, stop strings that span
// token boundaries never leak into the stream, top-k 1 at a high temperature is greedy, the same seed gives the
// same tokens, and different seeds give different ones.
import t from 'tap';
import { Engine, type EngineChunk, type EngineResult } from '../lib/index.js';
import { fixtureModel } from './helpers/fixtures.js';

async function collect(stream: AsyncIterableIterator<EngineChunk>): Promise<EngineChunk[]> {
  const chunks: EngineChunk[] = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

const one = (r: EngineResult | EngineResult[]): EngineResult => {
  if (Array.isArray(r)) throw new Error('expected one result');
  return r;
};

t.test('sampling and streaming through the Engine', async (t) => {
  // The qwen3 vocabulary has byte-level tokens, so hot sampling emits partial UTF-8 sequences often.
  const path = await fixtureModel({
    arch: 'qwen3', tokenizer: 'qwen3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128,
    tiedEmbeddings: true, seed: 11,
  });
  const engine = new Engine({ modelPath: path, contextLength: 512, threads: 2 });
  t.teardown(() => engine.shutdown());
  const tok = engine.tokenizer;
  const prompt = '日本語のテキスト 🦙 and some text';

  // Streamed text never contains a broken character: each chunk is exactly the decode of the ids so far minus
  // what was already emitted, and the stream adds up to the decode of all ids at once.
  let splitChars = 0;
  for (const seed of [1, 2, 3, 4]) {
    const params = { maxNewTokens: 48, temperature: 1.5, seed, ignoreEos: true };
    const chunks = await collect(engine.generate({ prompt, samplingParams: params, stream: true }));
    const ids = chunks.flatMap((c) => c.outputIds);
    const streamed = chunks.map((c) => c.text).join('');
    t.equal(streamed, tok.decode(ids, { skipSpecialTokens: true }), `seed ${seed}: the stream adds up to the decode of every id`);
    for (const c of chunks) {
      t.notOk(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(c.text), 'no lone surrogate');
    }
    // count ids whose own bytes are not a whole character (the detokenizer had to hold them back)
    splitChars += ids.filter((id) => tok.decode([id]).includes('\uFFFD')).length;
    const again = one(await engine.generate({ prompt, samplingParams: params }));
    t.same(again.outputIds, ids, `seed ${seed}: streamed and non-streamed runs sample the same tokens`);
  }
  t.ok(splitChars > 0, `the runs produced partial-character tokens (${splitChars}), so the check above meant something`);

  // Stop strings across token boundaries: the stream stops right before the match and never shows any of it.
  const greedy = { maxNewTokens: 32, temperature: 0, ignoreEos: true };
  const base = one(await engine.generate({ prompt, samplingParams: greedy }));
  const pieces = base.outputIds.map((id) => tok.decode([id]));
  let spanning = 0;
  for (let i = 4; i < pieces.length - 1 && spanning < 4; i++) {
    if (pieces[i].length < 2 || pieces[i + 1].length < 1 || pieces[i].includes('\uFFFD') || pieces[i + 1].includes('\uFFFD')) continue;
    const stop = pieces[i].slice(-1) + pieces[i + 1].slice(0, 1);  // last char of token i + first of token i+1
    const before = base.text.slice(0, base.text.indexOf(stop));
    const chunks = await collect(engine.generate({ prompt, samplingParams: { ...greedy, stop }, stream: true }));
    const streamed = chunks.map((c) => c.text).join('');
    t.equal(streamed, before, `stop ${JSON.stringify(stop)} spanning tokens ${i}/${i + 1}: nothing of it leaks`);
    t.same(chunks.at(-1)?.metaInfo.finishReason, { type: 'stop', matched: stop });
    spanning++;
  }
  t.ok(spanning >= 2, `checked ${spanning} stop strings that span a token boundary`);

  // top-k 1 at a high temperature is greedy; the same seed repeats; different seeds differ.
  const hot = { maxNewTokens: 24, temperature: 5, ignoreEos: true };
  const topk1 = one(await engine.generate({ prompt, samplingParams: { ...hot, topK: 1, seed: 5 } }));
  t.same(topk1.outputIds, base.outputIds.slice(0, 24), 'top-k 1 equals greedy');
  const a = one(await engine.generate({ prompt, samplingParams: { ...hot, seed: 7 } }));
  const b = one(await engine.generate({ prompt, samplingParams: { ...hot, seed: 7 } }));
  const c = one(await engine.generate({ prompt, samplingParams: { ...hot, seed: 8 } }));
  t.same(a.outputIds, b.outputIds, 'same seed, same tokens');
  t.notSame(a.outputIds, c.outputIds, 'another seed, other tokens');
});
