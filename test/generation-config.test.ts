// The model maker's recommended sampling (GGUF general.sampling.*, which llama.cpp's converter copies from
// generation_config.json) as the default of what a request leaves out: vLLM's --generation-config auto (the /v1
// routes, LLM.generate / chat without params, LLM.getDefaultSamplingParams; SGLang's --sampling-defaults model is
// the same switch); 'vllm' / 'openai' turn it off; SGLang's native /generate and Engine.generate never take them, as
// in SGLang. The fixture recommends temperature 0, so a request that leaves temperature out is greedy: its tokens
// equal an explicit temperature-0 request's. Values Hugging Face defaults to are dropped (as vLLM), values out of
// range are left out (a warning), never turning requests into errors.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { readModelFileInfo } from '../lib/gguf/file-info.js';
import { Engine, LLM } from '../lib/index.js';
import { buildApp } from '../lib/server/app.js';
import { parseServeArgs } from '../lib/server/command.js';
import { fixtureModel } from './helpers/fixtures.js';
import { startServe } from './helpers/serve-process.js';

const SPEC = { arch: 'llama', tokenizer: 'llama3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128,
  tiedEmbeddings: true, seed: 11 } as const;
const path = await fixtureModel({ ...SPEC, sampling: { temp: 0, topK: 20, topP: 0.95, minP: 0.05, penaltyLastN: 64 } });
const plain = await fixtureModel(SPEC);
const odd = await fixtureModel({ ...SPEC, sampling: { temp: 0.7, topK: 50, topP: 0 } });
const greedyOf = async (llm: LLM, prompt: string, max: number) =>
  (await llm.generate(prompt, { temperature: 0, maxTokens: max, ignoreEos: true }))[0].outputs[0].tokenIds;

t.test('the GGUF header: general.sampling.* read as the converter wrote them', async (t) => {
  t.same(readModelFileInfo(path).sampling, { temperature: 0, topK: 20, topP: 0.95, minP: 0.05 },
    'float32 values as their shortest decimals; penalty_last_n is not a generation config field (vLLM takes none)');
  t.same(readModelFileInfo(plain).sampling, {}, 'a file without the keys: none');
  t.same(readModelFileInfo(odd).sampling, { temperature: 0.7, topP: 0 }, 'top_k 50 is Hugging Face\'s default: dropped, as vLLM');
});

t.test('offline: LLM without params samples as the model recommends; generationConfig vllm does not', async (t) => {
  const llm = new LLM({ model: path, maxModelLen: 128, threads: 1 });
  const vllm = new LLM({ model: path, maxModelLen: 128, threads: 1, generationConfig: 'vllm', seed: 3 });
  t.teardown(() => Promise.all([llm.close(), vllm.close()]));
  t.same(await llm.getDefaultSamplingParams(), { temperature: 0, topK: 20, topP: 0.95, minP: 0.05 });
  t.same(await vllm.getDefaultSamplingParams(), {});
  const greedy = await greedyOf(llm, 'Once upon a time', 256);
  const [out] = await llm.generate('Once upon a time');
  t.same(out.outputs[0].tokenIds.slice(0, 12), greedy.slice(0, 12), 'no params: the model\'s temperature 0');
  const [chat] = await llm.chat([{ role: 'user', content: 'Hi' }]);
  const [chatGreedy] = await llm.chat([{ role: 'user', content: 'Hi' }], { temperature: 0 });
  t.same(chat.outputs[0].tokenIds, chatGreedy.outputs[0].tokenIds);
  const [sampled] = await vllm.generate('Once upon a time', { maxTokens: 12, ignoreEos: true });
  t.not(sampled.outputs[0].tokenIds.join(), greedy.slice(0, 12).join(), 'vllm: temperature 1, sampled');
  const oddLlm = new LLM({ model: odd, maxModelLen: 128, threads: 1 });
  t.teardown(() => oddLlm.close());
  t.same(await oddLlm.getDefaultSamplingParams(), { temperature: 0.7 }, 'top_p 0 is out of range: left out');
  t.ok((await oddLlm.generate('Hi', { maxTokens: 2 }))[0].outputs[0].tokenIds.length > 0, 'requests still run');
  t.throws(() => normalizeEngineOptions({ model: path, generationConfig: 'folder' as never }, 'LLM'),
    /generationConfig must be 'auto' or 'vllm' \(SGLang's sampling_defaults: 'model' or 'openai'; got folder\)/);
  t.equal(normalizeEngineOptions({ model: path, sampling_defaults: 'openai' }, 'Engine').generationConfig, 'vllm');
});

t.test('offline Engine (SGLang): Engine.generate keeps its own defaults (SGLang applies model defaults to chat only)', async (t) => {
  const engine = new Engine({ modelPath: path, contextLength: 128, threads: 1, randomSeed: 2 });
  t.teardown(() => engine.shutdown());
  const a = await engine.generate({ prompt: 'The sky', samplingParams: { maxNewTokens: 10, ignoreEos: true } });
  const b = await engine.generate({ prompt: 'The sky', samplingParams: { temperature: 0, maxNewTokens: 10, ignoreEos: true } });
  t.not((a as { outputIds: number[] }).outputIds.join(), (b as { outputIds: number[] }).outputIds.join(), 'temperature 1: sampled');
});

t.test('server: /v1 requests without temperature get the model\'s; --generation-config vllm, the API\'s; /generate neither', async (t) => {
  const serve = async (generationConfig?: 'vllm') => {
    const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 128, threads: 1, seed: 9,
      ...(generationConfig ? { generationConfig } : {}) }, 'serve'), servedModelNames: ['m'] });
    await app.listen({ host: '127.0.0.1', port: 0 });
    t.teardown(() => app.close());
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  };
  const post = async (url: string, body: unknown) =>
    (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json() as Promise<Record<string, any>>;
  const model = await serve(), api = await serve('vllm');
  const messages = [{ role: 'user', content: 'Tell me a story' }];
  const text = async (url: string, extra: object) =>
    (await post(url + '/v1/chat/completions', { messages, max_tokens: 10, ignore_eos: true, ...extra })).choices[0].message.content;
  const greedy = await text(model, { temperature: 0 });
  t.equal(await text(model, {}), greedy, 'chat: temperature left out = the model\'s 0');
  t.not(await text(api, {}), greedy, '--generation-config vllm: temperature 1');
  const own = { temperature: 1, seed: 4, top_k: -1, top_p: 1, min_p: 0 };
  t.equal(await text(model, own), await text(api, own), 'a request\'s own fields win');
  t.not(await text(model, { temperature: 1, seed: 4 }), await text(api, { temperature: 1, seed: 4 }),
    'the fields it leaves out keep the model\'s (top_k 20, top_p 0.95, min_p 0.05), per field as in vLLM');
  const comp = async (url: string, extra: object) =>
    (await post(url + '/v1/completions', { prompt: 'Once', max_tokens: 8, ignore_eos: true, ...extra })).choices[0].text;
  t.equal(await comp(model, {}), await comp(model, { temperature: 0 }), 'completions too');
  const gen = async (url: string, sp: object) =>
    (await post(url + '/generate', { text: 'Once', sampling_params: { max_new_tokens: 8, ignore_eos: true, ...sp } })).output_ids;
  t.same(await gen(model, { seed: 6 }), await gen(api, { seed: 6 }), 'SGLang /generate: SGLang\'s own defaults, as SGLang');
});

t.test('--generation-config / --sampling-defaults: parsed, exclusive, and said at startup', async (t) => {
  const engineOf = (args: string[]) => {
    const cfg = parseServeArgs(['m.gguf', ...args], {});
    if (cfg === 'help') throw new Error('help');
    return normalizeEngineOptions({ ...cfg.engine, model: 'm.gguf' }, 'spindle serve');
  };
  t.equal(engineOf([]).generationConfig, 'auto');
  t.equal(engineOf(['--generation-config', 'vllm']).generationConfig, 'vllm');
  t.equal(engineOf(['--sampling-defaults', 'openai']).generationConfig, 'vllm');
  t.equal(engineOf(['--sampling-defaults', 'model']).generationConfig, 'auto');
  t.throws(() => engineOf(['--generation-config', 'vllm', '--sampling-defaults', 'model']), /--generation-config and --sampling-defaults are the same flag/);
  t.throws(() => engineOf(['--sampling-defaults', 'hf']), /--sampling-defaults must be model or openai/);
  const s = await startServe([path, '--threads', '1', '--max-model-len', '128', '--skip-server-warmup']);
  await s.stop();
  t.match(s.stderr(), /the model's recommended sampling \(general\.sampling\.\*\) is the default of requests that leave it out: temperature 0, top_p 0\.95, top_k 20, min_p 0\.05 /);
  const o = await startServe([odd, '--threads', '1', '--max-model-len', '128', '--skip-server-warmup']);
  await o.stop();
  t.match(o.stderr(), /the model's general\.sampling\.\* value topP 0: .*not applied/);
});
