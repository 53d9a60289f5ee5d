// Issue 13 item 5: the anchors' launch lines and calls work verbatim. The command lines run the way a user types
// them (the built CLI, dist/cli/main.js, as a child process); the offline calls run in-process.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseBenchArgs } from '../lib/bench/offline/args.js';
import { parseBenchServeArgs } from '../lib/bench/serve/args.js';
import { joinNegativeValues } from '../lib/cli/negative-values.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { Engine, LLM } from '../lib/index.js';
import { HELP as SERVE_HELP, parseServeArgs } from '../lib/server/command.js';
import { ollamaSampling } from '../lib/server/routes/ollama/ollama.js';
import { fixtureModel } from './helpers/fixtures.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli', 'main.js');
// Llama 3 tokenizer: the model adds BOS and its template writes '<|begin_of_text|>'.
const path = await fixtureModel({ arch: 'llama', tokenizer: 'llama3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2,
  nFf: 128, tiedEmbeddings: true, seed: 11 });
const messages = [{ role: 'user' as const, content: 'Hello there' }];

interface Served {
  url: string; // http://127.0.0.1:PORT, whatever address it bound
  pid: number;
  stderr(): string;
}

/** `spindle serve <model> ...args` as a child process; resolves once it listens, stopped (SIGTERM) at the test's end. */
async function serve(t: Test, args: string[]): Promise<Served> {
  t.ok(existsSync(cli), `${cli} exists (run npm run build:ts first)`);
  const child = spawn(process.execPath, [cli, 'serve', path, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  });
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
      const m = /listening on http:\/\/\S+:(\d+) /.exec(stdout);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`spindle serve exited ${code}: ${stderr}`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stderr: () => stderr };
}

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** The four generating routes with `model`, one token each; [route, status, body]. */
async function generateAll(url: string, model: string): Promise<Array<[string, number, Record<string, unknown>]>> {
  const calls: Array<[string, unknown]> = [
    ['/v1/chat/completions', { model, messages, max_tokens: 1 }],
    ['/v1/completions', { model, prompt: 'Hello', max_tokens: 1 }],
    ['/api/chat', { model, messages, stream: false, options: { num_predict: 1 } }],
    ['/api/generate', { model, prompt: 'Hello', stream: false, options: { num_predict: 1 } }],
  ];
  const out: Array<[string, number, Record<string, unknown>]> = [];
  for (const [route, body] of calls) {
    const r = await post(url + route, body);
    out.push([route, r.status, r.json]);
  }
  return out;
}

/** `spindle <args>` to completion: exit code and output. */
async function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [cli, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stdout, stderr };
}

t.test('negative numbers as separate words: parsed for serve and bench flags, never a real flag as a value', async (t) => {
  const cfg = parseServeArgs(['m.gguf', '--chunked-prefill-size', '-1']);
  t.equal(cfg !== 'help' && cfg.engine.chunkedPrefillSize, -1);
  t.throws(() => parseServeArgs(['m.gguf', '--port', '-1']), /--port must be an integer in \[0, 65535\] \(got '-1'\)/, 'a range error, not a parse error');
  t.throws(() => parseServeArgs(['m.gguf', '--chunked-prefill-size', '--port', '8000']), /--chunked-prefill-size/, 'a flag is not a value');
  t.throws(() => parseServeArgs(['m.gguf', '--chunked-prefill-size', '-h']), /--chunked-prefill-size/, 'a short flag is not a value');
  t.throws(() => parseBenchServeArgs(['--temperature', '-1']), /--temperature must be >= 0, got -1/);
  t.throws(() => parseBenchServeArgs(['--seed', '-1']), /--seed must be an integer, got '-1'/);
  t.throws(() => parseBenchArgs(['-m', 'a.gguf', '-p', '-1']), /-p \(--n-prompt\) expects integers/);
  t.same(joinNegativeValues(['--a', '-1.5', '-b', '-2', '--c', '-x', '--flag', '-3', '--', '--a', '-4'],
    { a: { type: 'string' }, bee: { type: 'string', short: 'b' }, c: { type: 'string' }, flag: { type: 'boolean' } }),
  ['--a=-1.5', '--bee=-2', '--c', '-x', '--flag', '-3', '--', '--a', '-4']);
});

t.test('`spindle serve model.gguf --chunked-prefill-size -1` starts and serves', async (t) => {
  const s = await serve(t, ['--chunked-prefill-size', '-1', '--port', '0', '--threads', '1']);
  const r = await post(s.url + '/v1/chat/completions', { messages, max_tokens: 2 });
  t.equal(r.status, 200, JSON.stringify(r.json));
});

t.test('--dtype: vLLM values accepted (half = float16), stated in --help, bad values refused by name', async (t) => {
  for (const dtype of ['auto', 'float16', 'half', 'bfloat16', 'float32']) {
    const cfg = parseServeArgs(['m.gguf', '--dtype', dtype]);
    if (cfg === 'help') throw new Error('unexpected help');
    const engine = normalizeEngineOptions({ ...cfg.engine, model: 'm.gguf' }, 'spindle serve');
    t.equal(engine.dtype, dtype === 'half' ? 'float16' : dtype, dtype);
  }
  t.throws(() => normalizeEngineOptions({ model: 'm.gguf', dtype: 'int8' as never }, 'spindle serve'),
    /spindle serve: dtype must be one of auto, float16, half, bfloat16, float32 \(got int8\)/);
  const bad = await run(['serve', path, '--dtype', 'int8', '--port', '0']);
  t.equal(bad.code, 2, 'an unknown dtype is a usage error');
  t.match(bad.stderr, /dtype must be one of auto, float16, half, bfloat16, float32 \(got int8\)/);
  t.match(SERVE_HELP, /--dtype auto\|float16\|bfloat16\|float32/);
  t.match(SERVE_HELP, /float16 \/ bfloat16 keep it in\s+16 bits/);
});

t.test('`--host 0.0.0.0 --port P --max-model-len 1024 --gpu-memory-utilization 0.9 --dtype float16` together', async (t) => {
  const s = await serve(t, ['--host', '0.0.0.0', '--port', '0', '--max-model-len', '1024', '--gpu-memory-utilization', '0.9',
    '--dtype', 'float16', '--threads', '1']);
  const models = (await (await fetch(s.url + '/v1/models')).json()) as { data: Array<{ max_model_len: number }> };
  t.equal(models.data[0].max_model_len, 1024);
  const r = await post(s.url + '/v1/chat/completions', { messages, max_tokens: 2 });
  t.equal(r.status, 200, JSON.stringify(r.json));
  t.match(s.stderr(), /the KV cache is float16 on (cpu|cuda); activations are float32/, 'a line says where the cache is');
  const status = `/proc/${s.pid}/status`;
  if (existsSync(status)) {
    // The KV cache holds at most max-model-len x max-num-seqs tokens; 0.9 of free memory is only its upper bound.
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(status, 'utf8'))?.[1] ?? 0);
    t.ok(rssKb > 0 && rssKb < 1024 * 1024, `the server holds ${Math.round(rssKb / 1024)} MiB, not 90% of the machine`);
  }
});

t.test('`model` in a request: any name by default; --strict-model-name gives vLLM\'s 404', async (t) => {
  const loose = await serve(t, ['--port', '0', '--threads', '1', '--served-model-name', 'm']);
  for (const [route, status, body] of await generateAll(loose.url, 'local-model')) {
    t.equal(status, 200, `${route} accepts 'local-model': ${JSON.stringify(body)}`);
    t.equal(body.model, 'local-model', `${route} answers under the name it was asked for`);
  }
  const strict = await serve(t, ['--port', '0', '--threads', '1', '--served-model-name', 'm', '--strict-model-name']);
  for (const [route, status, body] of await generateAll(strict.url, 'local-model')) {
    t.equal(status, 404, `${route}: unknown name refused`);
    if (route.startsWith('/v1')) t.match(body, { error: { param: 'model', code: 'model_not_found' } });
    else t.match(body, { error: /model 'local-model' not found/ });
  }
  for (const [route, status] of await generateAll(strict.url, 'm')) t.equal(status, 200, `${route} accepts the served name`);
  t.equal((await post(strict.url + '/api/generate', { model: 'm:latest', prompt: 'Hi', stream: false, options: { num_predict: 1 } })).status, 200);
  t.match(SERVE_HELP, /--strict-model-name/);
});

t.test('`spindle bench serve --backend sglang-oai-chat` (and sglang-oai, vllm) run against spindle serve', async (t) => {
  t.equal(parseBenchServeArgs(['--backend', 'sglang-oai-chat'])!.backend, 'openai-chat');
  t.equal(parseBenchServeArgs(['--backend', 'sglang-oai'])!.backend, 'openai');
  t.equal(parseBenchServeArgs(['--backend', 'vllm'])!.backend, 'openai');
  t.throws(() => parseBenchServeArgs(['--backend', 'tgi']), /--backend must be one of .*sglang-oai-chat.*, got 'tgi'/);
  const s = await serve(t, ['--port', '0', '--threads', '1']);
  for (const backend of ['sglang-oai-chat', 'sglang-oai']) {
    const r = await run(['bench', 'serve', '--backend', backend, '--base-url', s.url, '--num-prompts', '2', '--random-input-len', '8',
      '--random-output-len', '2', '--disable-progress']);
    t.equal(r.code, 0, `${backend}: ${r.stderr}`);
    t.match(r.stdout, /Successful requests:\s+2/, backend);
    t.match(r.stdout, backend === 'sglang-oai-chat' ? /\/v1\/chat\/completions/ : /\/v1\/completions/);
  }
});

t.test('Ollama options: repeat_penalty 1.1 over repeat_last_n 64 by default; repeat_last_n accepted', async (t) => {
  const dflt = ollamaSampling(undefined, 1024, null);
  t.match(dflt, { temperature: 0.8, topK: 40, topP: 0.9, repetitionPenalty: 1.1, repeatLastN: 64 });
  t.match(ollamaSampling({ repeat_last_n: -1, repeat_penalty: 1.3 }, 1024, null), { repetitionPenalty: 1.3, repeatLastN: -1 });
  t.match(ollamaSampling({ repeat_last_n: 0, repeat_penalty: 1.3, presence_penalty: 1 }, 1024, null),
    { repetitionPenalty: 1, presencePenalty: 0 }, 'repeat_last_n 0 turns the penalties off (as Ollama)');
  const s = await serve(t, ['--port', '0', '--threads', '1']);
  const gen = async (options: Record<string, unknown>) => {
    const r = await post(s.url + '/api/generate', { model: 'x', prompt: 'Tell me a story', raw: true, stream: false,
      options: { temperature: 0, num_predict: 12, ...options } });
    t.equal(r.status, 200, JSON.stringify(r.json));
    return r.json.response as string;
  };
  t.equal(await gen({}), await gen({ repeat_penalty: 1.1, repeat_last_n: 64 }), 'the defaults are repeat_penalty 1.1, repeat_last_n 64');
  await gen({ repeat_penalty: 1.5, repeat_last_n: 8 });
  await gen({ repeat_last_n: -1 });
  const bad = await post(s.url + '/api/generate', { model: 'x', prompt: 'a', options: { repeat_last_n: -2 } });
  t.equal(bad.status, 400);
  t.match(bad.json, { error: /repeat_last_n/ });
});

t.test('Engine / LLM: applyChatTemplate with snake_case options; a rendered prompt gets no second BOS', async (t) => {
  const engine = new Engine({ modelPath: path, contextLength: 256, threads: 1 });
  t.teardown(() => engine.shutdown());
  const tok = engine.tokenizer;
  const prompt = tok.applyChatTemplate(messages, { tokenize: false, add_generation_prompt: true });
  t.equal(prompt, tok.applyChatTemplate(messages, { tokenize: false, addGenerationPrompt: true }), 'snake_case == camelCase');
  const probe = { tokenize: false, chat_template: '{{ add_generation_prompt }} {{ enable_thinking }}', chat_template_kwargs: { enable_thinking: 0 } } as const;
  t.equal(tok.applyChatTemplate(messages, { ...probe, add_generation_prompt: false }), 'false 0', 'snake_case options take effect');
  t.equal(tok.applyChatTemplate(messages, { ...probe, add_generation_prompt: true }), 'true 0');
  t.ok(prompt.startsWith('<|begin_of_text|>'), 'the template writes the BOS text');
  t.throws(() => tok.applyChatTemplate(messages, { tokenize: false, addGenPrompt: true } as never), /applyChatTemplate: unknown option 'addGenPrompt'/);
  t.throws(() => tok.applyChatTemplate(messages, { add_generation_prompt: true, addGenerationPrompt: true }), /are the same option/);
  t.same(tok.encode('hi', { add_special_tokens: false }), tok.encode('hi', { addSpecialTokens: false }));

  const bos = tok.bosTokenId!;
  const chatIds = tok.applyChatTemplate(messages, { add_generation_prompt: true });
  t.equal(chatIds.filter((id) => id === bos).length, 1, 'the template tokenized: one BOS');
  const r = await engine.generate({ prompt, samplingParams: { max_new_tokens: 1, temperature: 0 } });
  if (Array.isArray(r)) throw new Error('expected one result');
  t.equal(r.metaInfo.promptTokens, chatIds.length, 'Engine.generate({ prompt }) of the rendered template: the same ids, one BOS');
  const raw = await engine.generate({ prompt: 'Hello', samplingParams: { max_new_tokens: 1, temperature: 0 } });
  t.equal((raw as { metaInfo: { promptTokens: number } }).metaInfo.promptTokens, tok.encode('Hello').length, 'a raw prompt still gets BOS');
  t.equal(tok.encode('Hello')[0], bos);
  t.same(tok.encodePrompt(prompt), chatIds);
  const llm = new LLM({ model: path, maxModelLen: 256, threads: 1 });
  t.teardown(() => llm.close());
  const [out] = await llm.generate(prompt, { maxTokens: 1, temperature: 0 });
  t.same(out.promptTokenIds, chatIds, 'LLM.generate of the rendered template: one BOS too');
});
