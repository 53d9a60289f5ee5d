// LoRA adapters (llama.cpp's GGUF adapter format; native/model/lora.h): with an adapter, Spindle's log-softmax at
// every prompt position and its greedy continuation match llama.cpp's (node-llama-cpp with the same adapter file)
// on llama (untied: output.weight adapted too), qwen3 and lfm2 (short-conv projections); F16 and F32 adapters;
// requests with different adapters and none share batches and get what they get alone; the server serves
// adapters under their names (vLLM's --lora-modules), lists them in /v1/models, keeps prefix caches apart
// (cache_salt too), and refuses them where they do not apply; SGLang's lora_path; option and flag errors.
import t from 'tap';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import type { Token } from 'node-llama-cpp';
import { Engine } from '../lib/engine.js';
import { main as createMain } from '../lib/cli/models/create.js';
import { main as showMain } from '../lib/cli/models/show.js';
import { localKey, ModelStore } from '../lib/models/store.js';
import { LLM } from '../lib/llm.js';
import { buildApp } from '../lib/server/app.js';
import { parseServeArgs } from '../lib/server/command.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { GgmlType } from '../lib/gguf/constants.js';
import { conformanceTier, NEAR_TIE } from './helpers/conformance.js';
import { debugAddon } from './helpers/debug-addon.js';
import { fixtureModel, referenceLlama } from './helpers/fixtures.js';
import { resolveSpec, tensorPlan, tokenizerGguf, writeLoraAdapter, type ModelSpec } from './tooling/fixtures/index.js';

const dir = mkdtempSync(join(tmpdir(), 'spindle-lora-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const TEXT = 'The quick brown fox jumps over the lazy dog. Once upon a time there was';
const tier = conformanceTier(debugAddon().debugCpuLevel());
// Stated tolerances (logprobs): the exact tier computes the same IEEE sequence (our logprob vs this file's log-softmax
// of llama.cpp's logits: ~1e-6); approximate: F32 adapters f32 rounding only, F16 adapters as forward-conformance's
// F16 weights (a 1-ulp difference can flip the f16 rounding of the activation each adapter matmul takes).
const toleranceFor = (type: GgmlType): number => (tier === 'exact' ? 1e-5 : type === GgmlType.F32 ? 2e-3 : 0.02);

async function adapterFor(spec: ModelSpec, name: string, opts: Parameters<typeof writeLoraAdapter>[3] = {}): Promise<string> {
  const resolved = resolveSpec(spec);
  const plan = tensorPlan(resolved, tokenizerGguf(resolved.tokenizer).nVocab);
  const path = join(dir, `${name}.gguf`);
  await writeLoraAdapter(path, resolved.arch, plan, opts);
  return path;
}

function logSoftmaxAt(logits: Iterable<number>, get: number): number {
  const v = Array.from(logits);
  let max = -Infinity, sum = 0;
  for (const x of v) max = Math.max(max, x);
  for (const x of v) sum += Math.exp(x - max);
  return get - max - Math.log(sum);
}

const CASES: { label: string; spec: ModelSpec; type: GgmlType.F16 | GgmlType.F32; output: boolean }[] = [
  { label: 'llama (untied)', spec: { arch: 'llama', tokenizer: 'llama2', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 31 }, type: GgmlType.F16, output: true },
  { label: 'qwen3', spec: { arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 32, tiedEmbeddings: true }, type: GgmlType.F32, output: false },
  { label: 'lfm2', spec: { arch: 'lfm2', tokenizer: 'llama3', nEmbd: 64, nLayer: 4, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 33, tiedEmbeddings: true }, type: GgmlType.F16, output: false },
];

for (const c of CASES) {
  t.test(`${c.label}: with an adapter, llama.cpp's log-softmax at every position and its greedy tokens`, async (t) => {
    const path = await fixtureModel(c.spec);
    const adapter = await adapterFor(c.spec, `${c.label.split(' ')[0]}-a`, {
      type: c.type, seed: 5, std: 0.2 / Math.sqrt(8), targets: c.output ? (n) => n === 'output.weight' || /^blk\.\d+\./.test(n) : undefined,
    });
    // float32 K / V: llama.cpp below runs with an F32 KV cache (the comparison tier's tolerances assume both)
    const llm = new LLM({ model: path, maxModelLen: 256, threads: 2, dtype: 'float32', loraModules: [{ name: 'a', path: adapter }] });
    t.teardown(() => llm.close());
    await llm.ready();
    const ids = llm.tokenizer.encode(TEXT, { addSpecialTokens: true });
    const params = { promptLogprobs: 0, maxTokens: 6, temperature: 0, ignoreEos: true };
    const [withLora] = await llm.generate({ promptTokenIds: ids }, params, { loraRequest: 'a' });
    const [base] = await llm.generate({ promptTokenIds: ids }, params);
    const llama = await referenceLlama();
    const model = await llama.loadModel({ modelPath: path });
    const ctx = await model.createContext({ contextSize: 128, batchSize: 128, threads: 1, flashAttention: false,
      experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32', lora: { adapters: [{ filePath: adapter }] } });
    try {
      const seq = ctx.getSequence();
      const res = await seq.controlledEvaluate(ids.map((tok) => [tok as Token, { generateNext: { logits: true } }]));
      let maxDiff = 0, baseDiff = 0;
      for (let p = 1; p < ids.length; ++p) {
        const logits = res[p - 1]!.next.logits!;
        const ref = logSoftmaxAt(logits.values(), logits.get(ids[p] as Token)!);
        maxDiff = Math.max(maxDiff, Math.abs(withLora.promptLogprobs![p]![ids[p]].logprob - ref));
        baseDiff = Math.max(baseDiff, Math.abs(base.promptLogprobs![p]![ids[p]].logprob - ref));
      }
      const tolerance = toleranceFor(c.type);
      t.ok(maxDiff <= tolerance, `max |logprob - llama.cpp's with the adapter| over ${ids.length - 1} positions: ${maxDiff.toExponential(2)} ` +
        `(${c.type === GgmlType.F32 ? 'F32' : 'F16'} adapter, ${tier} tier, <= ${tolerance})`);
      t.ok(baseDiff > 0.05, `the adapter matters: the base model differs by up to ${baseDiff.toFixed(3)}`);
      // greedy: llama.cpp's argmax chain with the adapter (a near tie exempts the rest)
      let next = res[ids.length - 1]!.next.logits!;
      const theirs: number[] = [];
      for (let i = 0; i < 6; ++i) {
        const sorted = [...next.entries()].sort((a, b) => b[1] - a[1]);
        if (sorted[0][1] - sorted[1][1] < NEAR_TIE) break;
        theirs.push(sorted[0][0]);
        const step = await seq.controlledEvaluate([[sorted[0][0], { generateNext: { logits: true } }]]);
        next = step[0]!.next.logits!;
      }
      t.same(withLora.outputs[0].tokenIds.slice(0, theirs.length), theirs, `greedy tokens with the adapter (${theirs.length} compared)`);
    } finally {
      await ctx.dispose();
      await model.dispose();
    }
  });
}

const SPEC: ModelSpec = { arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 32, tiedEmbeddings: true };
const modelPath = await fixtureModel(SPEC);
const adapterA = await adapterFor(SPEC, 'qwen3-sql', { seed: 11 });
const adapterB = await adapterFor(SPEC, 'qwen3-chat', { seed: 12, rank: 4, alpha: 8, targets: (n) => /ffn_(up|down)/.test(n) });
const MODULES = [{ name: 'sql', path: adapterA }, { name: 'chat', path: adapterB, scale: 0.5 }];

t.test('offline: adapters and the base model mixed in one batch give what each gets alone', async (t) => {
  const llm = new LLM({ model: modelPath, maxModelLen: 256, threads: 2, loraModules: MODULES });
  t.teardown(() => llm.close());
  const prompts = ['Hello there', 'Write a query that lists', 'Once upon a time'];
  const params = { maxTokens: 8, temperature: 0, ignoreEos: true };
  const alone: Record<string, string[]> = {};
  for (const lora of [null, 'sql', 'chat'] as const) {
    alone[String(lora)] = (await llm.generate(prompts, params, { loraRequest: lora })).map((o) => o.outputs[0].text);
  }
  t.not(alone.sql.join('|'), alone.null.join('|'), 'sql changes the output');
  t.not(alone.chat.join('|'), alone.sql.join('|'), 'the two adapters differ');
  const mixed = await Promise.all([null, 'sql', 'chat', 'sql', null].map((lora) => llm.generate(prompts, params, { loraRequest: lora })));
  t.same(mixed.map((outs) => outs.map((o) => o.outputs[0].text)), [alone.null, alone.sql, alone.chat, alone.sql, alone.null],
    'five concurrent calls (batched together): each equals its own run');
  const byPath = await llm.generate(prompts, params, { loraRequest: { loraName: 'x', loraIntId: 1, loraPath: adapterA } });
  t.same(byPath.map((o) => o.outputs[0].text), alone.sql, "vLLM's LoRARequest naming a loaded adapter's path");
  await t.rejects(llm.generate('hi', params, { loraRequest: 'nope' }), /the LoRA adapter 'nope' is not loaded \(loaded: sql, chat\)/);
  await t.rejects(llm.generate('hi', params, { loraRequest: {} as never }), /loraRequest needs loraName/);
  const chat = await llm.chat([{ role: 'user', content: 'Hi' }], params, { loraRequest: 'sql' });
  t.ok(chat[0].outputs[0].text.length > 0, 'chat takes loraRequest too');
});

t.test("SGLang's Engine: lora_path per generate call", async (t) => {
  const engine = new Engine({ modelPath, contextLength: 256, threads: 2, loraPaths: ['sql=' + adapterA] });
  t.teardown(() => engine.shutdown());
  const base = await engine.generate({ prompt: 'Hello there', samplingParams: { max_new_tokens: 8, temperature: 0 } });
  const sql = await engine.generate({ prompt: 'Hello there', samplingParams: { max_new_tokens: 8, temperature: 0 }, lora_path: 'sql' });
  const llm = new LLM({ model: modelPath, maxModelLen: 256, threads: 2, loraModules: MODULES });
  t.teardown(() => llm.close());
  const [ref] = await llm.generate('Hello there', { maxTokens: 8, temperature: 0 }, { loraRequest: 'sql' });
  t.equal((sql as { text: string }).text, ref.outputs[0].text, 'the same text as LLM with the adapter');
  t.not((sql as { text: string }).text, (base as { text: string }).text);
  const both = await engine.generate({ prompt: ['Hello there', 'Hello there'], samplingParams: { max_new_tokens: 8, temperature: 0 }, lora_path: [null, 'sql'] });
  t.same((both as { text: string }[]).map((o) => o.text), [(base as { text: string }).text, ref.outputs[0].text], 'lora_path: one per prompt of a batch');
  await t.rejects(engine.generate({ prompt: ['a', 'b'], lora_path: ['sql'] }), /loraPath has 1 entries for 2 prompts/);
});

t.test('options: adapters are checked where they are given; a file that is no adapter fails the load by name', async (t) => {
  t.throws(() => normalizeEngineOptions({ model: 'm.gguf', loraModules: ['=x.gguf'] }, 'LLM'), /loraModules\[0\] must be 'name=path' or a path/);
  t.same(normalizeEngineOptions({ model: 'm.gguf', lora_paths: ['/a/sql.gguf'] }, 'LLM').loraModules,
    [{ name: '/a/sql.gguf', path: '/a/sql.gguf', scale: 1 }], "SGLang's bare path names itself");
  t.throws(() => normalizeEngineOptions({ model: 'm.gguf', loraModules: [{ name: 'a', path: 'x' }, 'a=y'] }, 'LLM'), /the name 'a' is given twice/);
  t.throws(() => normalizeEngineOptions({ model: 'm.gguf', loraModules: [{ name: 'a b', path: 'x' }] }, 'LLM'), /must be 1 to 256 letters/);
  t.throws(() => normalizeEngineOptions({ model: 'm.gguf', loraModules: [{ name: 'a', path: 'x', scale: Infinity }] }, 'LLM'), /scale must be a finite number/);
  t.throws(() => normalizeEngineOptions({ model: 'm.gguf', loraModules: [{ name: 'a', path: 'x', rank: 4 } as never] }, 'LLM'), /unknown key 'rank'/);
  t.same(normalizeEngineOptions({ model: 'm.gguf', enable_lora: true, lora_modules: ['a=/x.gguf'] }, 'LLM').loraModules,
    [{ name: 'a', path: '/x.gguf', scale: 1 }], "vLLM's enable_lora is accepted; 'name=path'");
  const llm = new LLM({ model: modelPath, maxModelLen: 256, threads: 2, loraModules: [{ name: 'bad', path: modelPath }] });
  await t.rejects(llm.ready(), new RegExp(`LoRA adapter ${modelPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: general.type is 'model', expected 'adapter'`));
  await llm.close();
});

t.test("flags: vLLM's --lora-modules (several words, JSON), SGLang's --lora-paths, accepted no-ops", async (t) => {
  const cfg = parseServeArgs(['m.gguf', '--lora-modules', 'a=/a.gguf', 'b=/b.gguf', '--enable-lora', '--max-lora-rank', '64',
    '--lora-paths', '{"name":"c","path":"/c.gguf","base_model_name":"m"}']);
  if (cfg === 'help') throw new Error('help');
  t.same(cfg.engine.loraModules, ['a=/a.gguf', 'b=/b.gguf', { name: 'c', path: '/c.gguf', base_model_name: 'm' }]);
  t.equal(cfg.model, 'm.gguf');
  t.match(cfg.notes.join('\n'), /--max-lora-rank has no effect/);
  const eq = parseServeArgs(['--lora-modules=a=/a.gguf', 'b=/b.gguf', 'm.gguf']);
  if (eq === 'help') throw new Error('help');
  t.same(eq.engine.loraModules, ['a=/a.gguf', 'b=/b.gguf'], '--lora-modules=... takes the following words too');
  const after = parseServeArgs(['--lora-modules', 'a=/a.gguf', 'm.gguf']);
  if (after === 'help') throw new Error('help');
  t.equal(after.model, 'm.gguf', 'a word without = after the list is the model');
  t.throws(() => parseServeArgs(['m.gguf', '--lora-modules', '{nope']), /neither name=path nor a JSON object/);
});

t.test('server: adapters by model name, /v1/models, prefix caches apart, cache_salt, refusals', async (t) => {
  const app = await buildApp({ engine: normalizeEngineOptions({ model: modelPath, maxModelLen: 256, threads: 2, loraModules: MODULES }, 'serve'),
    servedModelNames: ['base'] });  // not strict: adapters make it so
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const models = await client.models.list();
  t.same(models.data.map((m) => [m.id, (m as unknown as { parent: string | null }).parent, (m as unknown as { root: string }).root]),
    [['base', null, 'base'], ['sql', 'base', adapterA], ['chat', 'base', adapterB]], 'the model, then its adapters (parent, root)');
  t.equal((await client.models.retrieve('sql') as unknown as { parent: string }).parent, 'base');
  const llm = new LLM({ model: modelPath, maxModelLen: 256, threads: 2, loraModules: MODULES });
  t.teardown(() => llm.close());
  const messages = [{ role: 'user' as const, content: 'Tell me a long story about a fox and a dog, please.' }];
  const [offlineSql] = await llm.chat(messages, { maxTokens: 8, temperature: 0 }, { loraRequest: 'sql' });
  const [offlineBase] = await llm.chat(messages, { maxTokens: 8, temperature: 0 });
  const ask = (model: string, extra: Record<string, unknown> = {}) =>
    client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, ...extra } as never) as Promise<OpenAI.Chat.ChatCompletion>;
  const b1 = await ask('base');
  const s1 = await ask('sql');
  const s2 = await ask('sql');
  const salted = await ask('sql', { cache_salt: 'tenant-1' });
  t.equal(s1.choices[0].message.content, offlineSql.outputs[0].text, 'model "sql" runs the sql adapter');
  t.equal(b1.choices[0].message.content, offlineBase.outputs[0].text, 'the served name runs the base model');
  t.equal(s1.model, 'sql');
  const cached = (r: OpenAI.Chat.ChatCompletion) => r.usage?.prompt_tokens_details?.cached_tokens ?? 0;
  t.equal(cached(s1), 0, "the base model's cached prompt is not the adapter's");
  t.ok(cached(s2) > 0, `the adapter's own is (${cached(s2)} tokens)`);
  t.equal(cached(salted), 0, 'another cache_salt: another namespace');
  t.equal(salted.choices[0].message.content, s1.choices[0].message.content, 'a salt changes no output');
  const completion = await client.completions.create({ model: 'chat', prompt: 'Hello there', max_tokens: 6, temperature: 0 });
  const [offlineChat] = await llm.generate('Hello there', { maxTokens: 6, temperature: 0 }, { loraRequest: 'chat' });
  t.equal(completion.choices[0].text, offlineChat.outputs[0].text, '/v1/completions with the chat adapter (scale 0.5)');
  const ollama = await fetch(`${base}/api/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'chat', prompt: 'Hello there', raw: true, stream: false, options: { num_predict: 6, temperature: 0, repeat_penalty: 1 } }) });
  t.equal((await ollama.json() as { response: string }).response, offlineChat.outputs[0].text, "Ollama's /api/generate names adapters the same way");
  const [offlinePlain] = await llm.generate('Hello there', { maxTokens: 6, temperature: 0 });
  const sglang = await fetch(`${base}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: ['Hello there', 'Hello there'], sampling_params: { max_new_tokens: 6, temperature: 0 }, lora_path: ['chat', null] }) });
  t.same((await sglang.json() as { text: string }[]).map((o) => o.text), [offlineChat.outputs[0].text, offlinePlain.outputs[0].text],
    "SGLang's /generate: lora_path per prompt (an adapter, and null: the base model)");
  const bad = async (path: string, body: Record<string, unknown>, status: number, re: RegExp) => {
    const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    t.equal(r.status, status, `${path} ${JSON.stringify(body).slice(0, 60)}: ${status}`);
    t.match(((await r.json()) as { error: { message: string } }).error.message, re);
  };
  await bad('/v1/embeddings', { model: 'sql', input: 'hi' }, 400, /'sql' is a LoRA adapter; adapters apply to generation/);
  await bad('/v1/chat/completions', { model: 'sqll', messages }, 404, /the model 'sqll' does not exist \(served: base, sql, chat\)/);
  const latest = await ask('sql:latest');
  t.equal(latest.choices[0].message.content, s1.choices[0].message.content, "an adapter's name with ':latest' (Ollama clients)");
  const tok = await fetch(`${base}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sql', prompt: 'hi' }) });
  t.equal(tok.status, 200, '/tokenize takes an adapter name (the same tokenizer)');
  await t.rejects(buildApp({ engine: normalizeEngineOptions({ model: modelPath, loraModules: [{ name: 'base', path: adapterA }] }, 'serve'),
    servedModelNames: ['base'] }), /the LoRA adapter name 'base' is also a served model name/);
  await bad('/v1/chat/completions', { model: 'sql', messages, cache_salt: '' }, 400, /cache_salt must be a non-empty string/);
});

t.test("Ollama's Modelfile ADAPTER: spindle create, the store model runs with it everywhere; runner mode; refusals", async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'spindle-lora-home-'));
  const saved = process.env.SPINDLE_HOME;
  process.env.SPINDLE_HOME = home;
  t.teardown(() => {
    if (saved === undefined) delete process.env.SPINDLE_HOME;
    else process.env.SPINDLE_HOME = saved;
    rmSync(home, { recursive: true, force: true });
  });
  const out: string[] = [];
  const io = { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => out.push(s) } } as never;
  writeFileSync(join(dir, 'Modelfile'), `FROM ${modelPath}\nADAPTER ./qwen3-sql.gguf\nPARAMETER temperature 0\n`);
  t.equal(await createMain(['sqlmodel', '-f', join(dir, 'Modelfile')], io), 0, out.join(''));
  writeFileSync(join(dir, 'Bad'), `FROM ${modelPath}\nADAPTER ${modelPath}\n`);
  t.equal(await createMain(['bad', '-f', join(dir, 'Bad')], io), 1);
  t.match(out.join(''), /is not a LoRA adapter \(general\.type 'model'\)/);
  const llamaAdapter = join(dir, 'llama-a.gguf'); // the first case's llama adapter: another architecture
  writeFileSync(join(dir, 'Arch'), `FROM ${modelPath}\nADAPTER ${llamaAdapter}\n`);
  const blobs = () => readdirSync(join(home, 'models', 'blobs')).length;
  const before = blobs();
  t.equal(await createMain(['arch', '-f', join(dir, 'Arch')], io), 1);
  t.match(out.join(''), /was made for architecture 'llama', the model is 'qwen3'/);
  t.equal(blobs(), before, 'nothing written to the store on a refusal');
  writeFileSync(join(dir, 'Over'), 'FROM sqlmodel\nADAPTER ./qwen3-chat.gguf\n');
  t.equal(await createMain(['over', '-f', join(dir, 'Over')], io), 1);
  t.match(out.join(''), /FROM sqlmodel has an ADAPTER already; a model takes one/);
  writeFileSync(join(dir, 'Two'), `FROM ${modelPath}\nADAPTER ./qwen3-sql.gguf\nADAPTER ./qwen3-chat.gguf\n`);
  t.equal(await createMain(['two', '-f', join(dir, 'Two')], io), 1);
  t.match(out.join(''), /a Modelfile takes one ADAPTER \(got 2\)/);
  out.length = 0;
  t.equal(await showMain(['sqlmodel'], io), 0);
  t.match(out.join(''), /Adapter\n\s+file\s+\S+sha256-/, 'spindle show names the adapter');

  const ref = new LLM({ model: modelPath, maxModelLen: 256, threads: 2, loraModules: MODULES });
  t.teardown(() => ref.close());
  const [want] = await ref.generate('Hello there', { maxTokens: 6, temperature: 0 }, { loraRequest: 'sql' });
  const [base] = await ref.generate('Hello there', { maxTokens: 6, temperature: 0 });
  const byName = new LLM({ model: 'sqlmodel', maxModelLen: 256, threads: 2 });
  t.teardown(() => byName.close());
  const [got] = await byName.generate('Hello there', { maxTokens: 6, temperature: 0 });
  t.equal(got.outputs[0].text, want.outputs[0].text, 'LLM on the store name runs with its ADAPTER');
  await t.rejects(byName.embed('hi'), /runs with a LoRA adapter \(its Modelfile's ADAPTER\), which applies to generation only/);
  t.not(got.outputs[0].text, base.outputs[0].text);

  const store = new ModelStore(home);
  const app = await buildApp({ engine: normalizeEngineOptions({ model: 'runner', maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: [], runner: { store } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const host = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const post = async (path: string, body: Record<string, unknown>) => {
    const r = await fetch(`${host}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() as Record<string, unknown> };
  };
  const gen = await post('/api/generate', { model: 'sqlmodel', prompt: 'Hello there', raw: true, stream: false, options: { num_predict: 6, temperature: 0, repeat_penalty: 1 } });
  t.equal(gen.body.response, want.outputs[0].text, 'runner mode: /api/generate with the adapter');
  t.equal((await post('/api/create', { model: 'child', from: 'sqlmodel', system: 'x', stream: false })).status, 200);
  const child = await post('/api/generate', { model: 'child', prompt: 'Hello there', raw: true, stream: false, options: { num_predict: 6, temperature: 0, repeat_penalty: 1 } });
  t.equal(child.body.response, want.outputs[0].text, 'a model created FROM it keeps the adapter');
  const emb = await post('/api/embed', { model: 'sqlmodel', input: 'hi' });
  t.equal(emb.status, 400);
  t.match(JSON.stringify(emb.body), /has a LoRA adapter/);
  const upload = await post('/api/create', { model: 'x', from: 'sqlmodel', adapters: { 'a.gguf': 'sha256:00' }, stream: false });
  t.equal(upload.status, 400);
  t.match(JSON.stringify(upload.body), /adapters\.a\.gguf must be a blob digest 'sha256:<64 hex digits>'/);
  const adapterBlob = store.read(localKey(null, 'sqlmodel', 'latest'))!.adapter!;
  store.remove(localKey(null, 'child', 'latest'));
  t.ok(existsSync(store.filePath(adapterBlob)), 'the adapter blob stays while a model uses it');
  store.remove(localKey(null, 'sqlmodel', 'latest'));
  t.notOk(existsSync(store.filePath(adapterBlob)), 'and goes with the last one');
});

t.test("runtime adapters: vLLM's LoRARequest loads its path on first use; /v1/load_lora_adapter and /v1/unload_lora_adapter", async (t) => {
  const llm = new LLM({ model: modelPath, maxModelLen: 256, threads: 2, enableLora: true });
  t.teardown(() => llm.close());
  const ref = new LLM({ model: modelPath, maxModelLen: 256, threads: 2, loraModules: MODULES });
  t.teardown(() => ref.close());
  const params = { maxTokens: 6, temperature: 0 };
  const [want] = await ref.generate('Hello there', params, { loraRequest: 'sql' });
  const both = await Promise.all([1, 2].map(() => llm.generate('Hello there', params, { loraRequest: { loraName: 'sql', loraIntId: 1, loraPath: adapterA } })));
  t.same(both.map((o) => o[0].outputs[0].text), [want.outputs[0].text, want.outputs[0].text], 'loaded once, on first use, for two concurrent calls');
  const [byName] = await llm.generate('Hello there', params, { loraRequest: 'sql' });
  t.equal(byName.outputs[0].text, want.outputs[0].text, 'then named like a loraModules adapter');
  await t.rejects(llm.generate('hi', params, { loraRequest: { loraName: 'bad', loraPath: modelPath } }), /general\.type is 'model', expected 'adapter'/);
  await t.rejects(llm.generate('hi', params, { loraRequest: 'bad' }), /the LoRA adapter 'bad' is not loaded/, 'a failed load leaves nothing');

  const off = await buildApp({ engine: normalizeEngineOptions({ model: modelPath, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['base'] });
  await off.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => off.close());
  const offBase = `http://127.0.0.1:${(off.server.address() as AddressInfo).port}`;
  const closed = await fetch(`${offBase}/v1/load_lora_adapter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ lora_name: 'sql', lora_path: adapterA }) });
  t.equal(closed.status, 404);
  t.match(await closed.text(), /runtime LoRA updating is off: set VLLM_ALLOW_RUNTIME_LORA_UPDATING=true/);

  const app = await buildApp({ engine: normalizeEngineOptions({ model: modelPath, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['base'],
    allowRuntimeLoraUpdating: true });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const post = async (path: string, body: Record<string, unknown>) => {
    const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, text: await r.text() };
  };
  const complete = (model: string) => post('/v1/completions', { model, prompt: 'Hello there', max_tokens: 6, temperature: 0 });
  t.equal((await complete('sql')).status, 404, 'not loaded yet: model names are strict with runtime updating');
  const loaded = await post('/v1/load_lora_adapter', { lora_name: 'sql', lora_path: adapterA });
  t.same(loaded, { status: 200, text: "Success: LoRA adapter 'sql' added successfully." });
  const r = await complete('sql');
  t.equal(JSON.parse(r.text).choices[0].text, want.outputs[0].text, 'served under its name once loaded');
  const models = JSON.parse((await (await fetch(`${base}/v1/models`)).text()) as string) as { data: { id: string; parent: string | null }[] };
  t.same(models.data.map((m) => [m.id, m.parent]), [['base', null], ['sql', 'base']]);
  t.match((await post('/v1/load_lora_adapter', { lora_name: 'sql', lora_path: adapterA })).text, /has already been loaded/);
  t.equal((await post('/v1/load_lora_adapter', { lora_name: 'base', lora_path: adapterA })).status, 400, 'not under a served name');
  t.match((await post('/v1/load_lora_adapter', { lora_name: 'x' })).text, /Both 'lora_name' and 'lora_path' must be provided/);
  const missing = await post('/v1/load_lora_adapter', { lora_name: 'x', lora_path: join(dir, 'nope.gguf') });
  t.equal(missing.status, 404);
  t.match(missing.text, /No adapter found/);
  const bad = await post('/v1/load_lora_adapter', { lora_name: 'bad', lora_path: modelPath });
  t.equal(bad.status, 400);
  t.match(bad.text, /expected 'adapter'/);
  t.same(await post('/v1/unload_lora_adapter', { lora_name: 'sql' }), { status: 200, text: "Success: LoRA adapter 'sql' removed successfully." });
  t.equal((await complete('sql')).status, 404, 'gone after the unload');
  const again = await post('/v1/unload_lora_adapter', { lora_name: 'sql' });
  t.equal(again.status, 404);
  t.match(again.text, /the LoRA adapter 'sql' cannot be found/);
  t.equal((await post('/v1/load_lora_adapter', { lora_name: 'sql2', lora_path: adapterA })).status, 200, 'its slot is reused');
  t.equal(JSON.parse((await complete('sql2')).text).choices[0].text, want.outputs[0].text);
});
