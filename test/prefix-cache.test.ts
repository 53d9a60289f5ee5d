// Automatic prefix caching end to end: a chat-like workload (a long shared system prefix, turns that resend the
// whole history) gives the same tokens with the cache as without it, greedy and seeded, on dense and MoE models,
// also under a KV budget too small to keep every cached block (evictions); later requests report
// their cached prompt tokens (numCachedTokens, Engine metaInfo.cachedTokens) and the engine its hit counters; an
// aborted cache-hit request leaves no block in use. LFM2 and LFM2-MoE (recurrent conv state) take the same
// workload: a hit restores the conv state from the checkpoint of the block it ends with.
import t from 'tap';
import { Engine, LLM } from '../lib/index.js';
import type { RequestOutput } from '../lib/llm.js';
import { fixtureModel } from './helpers/fixtures.js';
import { DENSE, LFM2, LFM2MOE, MOE } from './helpers/small-models.js';

const MAX_LEN = 256;

const ids = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => 3 + ((i * 37 + seed * 101) % 200));
const SYSTEM = ids(100, 1); // shared by every conversation

/** Three conversations of three turns each: every turn resends the history plus its answer and a new message. */
async function chatWorkload(llm: LLM, params: object): Promise<{ outputs: number[][]; cached: number[] }> {
  const outputs: number[][] = [];
  const cached: number[] = [];
  const history = [0, 1, 2].map((c) => [...SYSTEM, ...ids(9 + c, 10 + c)]);
  for (let turn = 0; turn < 3; turn++) {
    const res: RequestOutput[] = await llm.generate(history.map((h) => ({ promptTokenIds: h })), params);
    res.forEach((r, c) => {
      outputs.push(r.outputs[0].tokenIds);
      cached.push(r.numCachedTokens);
      history[c] = [...history[c], ...r.outputs[0].tokenIds, ...ids(7, 40 + turn * 3 + c)];
    });
  }
  return { outputs, cached };
}

// KV bytes per token: attention layers only (lfm2: 2 of 6; float16 K and V, the CPU's default), plus lfm2's f32
// conv-state checkpoint per block (4 conv layers x 2 rows x 64 floats per 16 tokens)
const KV_PER_TOKEN: Record<string, number> = { llama: 2 * 2 * 16 * 2 * 2, qwen3moe: 2 * 2 * 16 * 2 * 2,
  lfm2: 2 * 2 * 16 * 2 * 2 + (4 * 2 * 64 * 4) / 16, lfm2moe: 2 * 2 * 16 * 2 * 2 + (4 * 2 * 64 * 4) / 16 };
const STATE_PER_SEQ: Record<string, number> = { llama: 0, qwen3moe: 0, lfm2: 4 * 2 * 64 * 4, lfm2moe: 4 * 2 * 64 * 4 };

for (const [label, spec] of [['llama', DENSE], ['qwen3moe', MOE], ['lfm2', LFM2], ['lfm2moe', LFM2MOE]] as const) {
  t.test(`${label}: the same tokens with and without the prefix cache (greedy, seeded, tight KV)`, async (t) => {
    const model = await fixtureModel(spec);
    const bytesPerToken = KV_PER_TOKEN[label];
    const base = { model, maxModelLen: MAX_LEN, threads: 2, chunkedPrefillSize: 48, maxNumBatchedTokens: 96, maxNumSeqs: 4 };
    const off = new LLM({ ...base, enablePrefixCaching: false });
    const on = new LLM(base);
    // KV for one max-length sequence (16 blocks): blocks are evicted and sequences preempted while three
    // conversations of up to 11 blocks run
    const tight = new LLM({ ...base, kvCacheMemory: MAX_LEN * bytesPerToken + 4 * STATE_PER_SEQ[label] });
    t.teardown(() => Promise.all([off.close(), on.close(), tight.close()]));
    for (const params of [{ temperature: 0, maxTokens: 12, ignoreEos: true },
      { temperature: 0.9, topK: 20, seed: 5, maxTokens: 12, ignoreEos: true }]) {
      const a = await chatWorkload(off, params);
      const b = await chatWorkload(on, params);
      const c = await chatWorkload(tight, params);
      t.same(b.outputs, a.outputs, 'cache on == cache off');
      t.same(c.outputs, a.outputs, 'tight cache (evictions, preemptions) == cache off');
      t.ok(a.cached.every((n) => n === 0), 'no cached tokens with the cache off');
      // turns 2 and 3 find the system prefix and their history (whole 16-token blocks); in turn 1 the three
      // conversations start together, so only the later-admitted ones can find the first one's blocks
      t.ok(b.cached.slice(3).every((n) => n >= 96), `later turns hit the cache (${b.cached.join(' ')})`);
      t.ok(b.cached[1] + b.cached[2] > 0, 'in turn 1, a later-admitted conversation finds the shared prefix');
      t.ok(b.cached.slice(3).every((n, i) => n >= b.cached[i] + 16), 'each turn finds more of its history');
      t.ok(b.cached.every((n) => n % 16 === 0), 'whole blocks');
    }
    const s = on.stats();
    t.ok(s.prefixCaching);
    t.ok(s.prefixCacheHits > 0 && s.prefixCacheHits < s.prefixCacheQueries, `${s.prefixCacheHits} of ${s.prefixCacheQueries}`);
    t.ok(s.kvBlocksCached > 0);
    t.equal(s.kvBlocksUsed, 0, 'finished requests hold no block (cached ones are free)');
    t.notOk(off.stats().prefixCaching);
    // the roomy engine kept every committed block; the tight one cannot hold that many: it evicted
    t.ok(s.kvBlocksCached > tight.stats().kvBlocksTotal, `${s.kvBlocksCached} blocks cached > ${tight.stats().kvBlocksTotal} blocks in all`);
  });
}

t.test('an aborted cache-hit request leaves every block free; Engine reports cachedTokens', async (t) => {
  const model = await fixtureModel(DENSE);
  const engine = new Engine({ modelPath: model, contextLength: MAX_LEN, threads: 2 });
  t.teardown(() => engine.shutdown());
  const first = await engine.generate({ inputIds: [...SYSTEM, 5, 6], samplingParams: { temperature: 0, maxNewTokens: 4 } });
  t.equal(first.metaInfo.cachedTokens, 0);
  const second = await engine.generate({ inputIds: [...SYSTEM, 7, 8], samplingParams: { temperature: 0, maxNewTokens: 4 } });
  t.equal(second.metaInfo.cachedTokens, 96, 'six whole blocks of the shared prefix');
  const ac = new AbortController();
  const running = engine.generate({ inputIds: [...SYSTEM, 9], samplingParams: { temperature: 0, maxNewTokens: 200, ignoreEos: true },
    signal: ac.signal });
  await new Promise((r) => setTimeout(r, 30));
  ac.abort();
  await running.catch(() => {});
  await new Promise((r) => setTimeout(r, 20));
  const s = engine.stats();
  t.equal(s.kvBlocksUsed, 0, 'no block in use after the abort');
  t.equal(s.running + s.waiting, 0);
  t.ok(s.kvBlocksCached >= 6, 'the prefix stays cached');
});

t.test('option spellings: enablePrefixCaching, enable_prefix_caching, disableRadixCache', async (t) => {
  const model = await fixtureModel(DENSE);
  for (const [opts, want] of [[{ enable_prefix_caching: false }, false], [{ disableRadixCache: true }, false],
    [{ disable_radix_cache: false }, true], [{}, true]] as const) {
    const llm = new LLM({ model, maxModelLen: 64, threads: 1, ...opts });
    await llm.ready();
    t.equal(llm.stats().prefixCaching, want, JSON.stringify(opts));
    await llm.close();
  }
  t.throws(() => new LLM({ model, enablePrefixCaching: 'yes' as unknown as boolean }), /must be true or false/);
  t.throws(() => new LLM({ model, enablePrefixCaching: true, disableRadixCache: true }), /same option/);
});

t.test('server: usage.prompt_tokens_details.cached_tokens and the prefix cache counters in /metrics', async (t) => {
  const { buildApp } = await import('../lib/server/app.js');
  const { normalizeEngineOptions } = await import('../lib/engine-options.js');
  const model = await fixtureModel({ arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128,
    weights: 'F32', seed: 11, tiedEmbeddings: true });
  const app = await buildApp({ engine: normalizeEngineOptions({ model, maxModelLen: 512, threads: 2 }, 'serve'), servedModelNames: ['m'] });
  t.teardown(() => app.close());
  const system = 'You answer questions about textile machinery in great and careful detail. '.repeat(6);
  const ask = async (question: string): Promise<{ usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }> => {
    const r = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: {
      model: 'm', max_tokens: 4, temperature: 0,
      messages: [{ role: 'system', content: system }, { role: 'user', content: question }] } });
    t.equal(r.statusCode, 200);
    return r.json();
  };
  const first = await ask('What is a spindle?');
  t.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  const second = await ask('What is a loom?');
  t.ok(second.usage.prompt_tokens > 64);
  t.ok(second.usage.prompt_tokens_details.cached_tokens >= 48, `cached ${second.usage.prompt_tokens_details.cached_tokens}`);
  t.ok(second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens);
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const hits = /spindle:prefix_cache_hits_total\{[^}]*\} (\d+)/.exec(metrics);
  const queries = /spindle:prefix_cache_queries_total\{[^}]*\} (\d+)/.exec(metrics);
  t.ok(hits && Number(hits[1]) === second.usage.prompt_tokens_details.cached_tokens, 'hits counted in tokens');
  t.ok(queries && Number(queries[1]) === first.usage.prompt_tokens + second.usage.prompt_tokens, 'queries in tokens');
});
