// vLLM's and SGLang's other launch-line flags (lib/server/launch-compat.ts): whole launch lines from both parse;
// the flags that act do (--chat-template, --seed / LLM's seed, --kv-cache-dtype, --enforce-eager, --log-level,
// --disable-log-requests, --allowed-origins); the ones that cannot mean anything else are accepted with a note; the
// values Spindle cannot honour (tensor parallelism, fp8 caches, other quantizations, other policies) are refused
// by name.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { LLM } from '../lib/index.js';
import { HELP, parseServeArgs, type ServeConfig } from '../lib/server/command.js';
import { fixtureModel } from './helpers/fixtures.js';
import { startServe } from './helpers/serve-process.js';

const path = await fixtureModel({ arch: 'llama', tokenizer: 'llama3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2,
  nFf: 128, tiedEmbeddings: true, seed: 11 });
const dir = mkdtempSync(join(tmpdir(), 'spindle-compat-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
// A template unlike the GGUF's: its render is easy to recognize in /tokenize's tokens.
const TEMPLATE = "{% for m in messages %}[{{ m['role'] | upper }}] {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}[ASSISTANT] {% endif %}";
const templateFile = join(dir, 'template.jinja');
writeFileSync(templateFile, TEMPLATE);
const jsonTemplate = join(dir, 'conv.json');
writeFileSync(jsonTemplate, '{"name": "chatml", "roles": ["user", "assistant"]}');
const plainFile = join(dir, 'plain.txt');
writeFileSync(plainFile, 'USER: hello');

function parse(args: string[], env: NodeJS.ProcessEnv = {}): ServeConfig {
  const cfg = parseServeArgs(args, env);
  if (cfg === 'help') throw new Error('unexpected help');
  return cfg;
}

t.test('whole vLLM and SGLang launch lines parse', async (t) => {
  const vllm = parse(['m.gguf', '--enable-auto-tool-choice', '--tool-call-parser', 'hermes', '--trust-remote-code',
    '--disable-log-requests', '--disable-log-stats', '--seed', '0', '--max-model-len', '1024', '-tp', '1',
    '--kv-cache-dtype', 'auto', '--enforce-eager', '--generation-config', 'vllm', '--uvicorn-log-level', 'warning',
    '--tokenizer', 'meta-llama/Llama-3.2-1B-Instruct', '--quantization', 'gguf', '--load-format', 'gguf',
    '--swap-space', '4', '--chat-template', templateFile, '--disable-fastapi-docs']);
  t.equal(vllm.engine.seed, 0);
  t.equal(vllm.engine.chatTemplate, TEMPLATE, 'the file\'s text');
  t.equal(vllm.engine.enforceEager, true, '--enforce-eager: the engine option (CUDA graphs off for this engine)');
  t.equal(vllm.httpLogLevel, 'warning', "vLLM's --uvicorn-log-level: the request lines' level");
  t.equal(vllm.logLevel, null);
  t.equal(vllm.serve.logRequests, false);
  t.match(vllm.notes.join('\n'), /--trust-remote-code has no effect/);
  t.match(vllm.notes.join('\n'), /--tokenizer meta-llama\/Llama-3.2-1B-Instruct has no effect: the GGUF file's own tokenizer/);
  t.match(vllm.notes.join('\n'), /--swap-space has no effect/);
  t.notMatch(vllm.notes.join('\n'), /auto-tool-choice|fastapi|log-stats|generation/, 'flags asking for what Spindle does anyway: no note');
  const sglang = parse(['--model-path', 'm.gguf', '--tp', '1', '--dp-size', '1', '--trust-remote-code', '--log-level', 'WARN',
    '--random-seed', '42', '--enable-metrics', '--mem-fraction-static', '0.8', '--schedule-policy', 'fcfs',
    '--attention-backend', 'triton', '--disable-cuda-graph', '--chat-template', TEMPLATE, '--kv-cache-dtype', 'bf16',
    '--stream-interval', '8', '--tokenizer-path', 'x', '--log-level-http', 'error']);
  t.equal(sglang.engine.seed, 42);
  t.equal(sglang.engine.chatTemplate, TEMPLATE, 'inline template text');
  t.equal(sglang.logLevel, 'warning', 'WARN reads as warning');
  t.equal(sglang.httpLogLevel, 'error');
  t.equal(sglang.engine.enforceEager, true, "SGLang's --disable-cuda-graph: the same");
  t.equal(normalizeEngineOptions({ ...sglang.engine, model: 'm.gguf' }, 'spindle serve').enforceEager, true);
  t.equal(normalizeEngineOptions({ model: 'm.gguf', disable_cuda_graph: true }, 'LLM').enforceEager, true, 'SGLang\'s offline spelling');
  t.equal(normalizeEngineOptions({ model: 'm.gguf' }, 'LLM').enforceEager, false);
  t.throws(() => normalizeEngineOptions({ model: 'm.gguf', enforce_eager: 'yes' } as never, 'LLM'), /enforce_eager must be true or false \(got yes\)/);
  t.equal(normalizeEngineOptions({ ...sglang.engine, model: 'm.gguf' }, 'spindle serve').kvCacheDtype, 'bfloat16');
  t.match(sglang.notes.join('\n'), /--attention-backend has no effect/);
  t.match(sglang.notes.join('\n'), /--stream-interval has no effect/);
  t.match(HELP, /--chat-template/);
  t.match(HELP, /--kv-cache-dtype/);
});

t.test('values Spindle cannot honour are refused by name, with what is allowed', async (t) => {
  const refused: Array<[string[], RegExp]> = [
    [['-tp', '2'], /--tensor-parallel-size must be 1 \(got '2'\): a Spindle server runs its model on one device/],
    [['--tp-size', '4'], /--tp-size must be 1 \(got '4'\)/],
    [['--tensor-parallel-size=2'], /--tensor-parallel-size must be 1/],
    [['-pp', '2'], /--pipeline-parallel-size must be 1/],
    [['--dp', '2'], /--dp must be 1 \(got '2'\)/],
    [['--tp', '1', '--tp-size', '1'], /--tp-size and --tp are the same flag|--tp and --tp-size are the same flag/],
    [['--quantization', 'awq'], /--quantization must be gguf \(got 'awq'\)/],
    [['-q', 'fp8'], /--quantization must be gguf \(got 'fp8'\)/],
    [['--load-format', 'safetensors'], /--load-format must be auto or gguf/],
    [['--seed', '-1'], /--seed must be a whole number \(got '-1'\)/],
    [['--random-seed', 'x'], /--random-seed must be a whole number \(got 'x'\)/],
    [['--seed', '1', '--random-seed', '2'], /--seed and --random-seed are the same flag/],
    [['--chat-template', 'nothing.jinja'], /--chat-template: no file 'nothing.jinja', and the value is no Jinja template either/],
    [['--chat-template', jsonTemplate], /--chat-template: .*conv\.json is a JSON conversation template \(SGLang's\)/],
    [['--chat-template', plainFile], /--chat-template: .*plain\.txt holds no Jinja template/],
    [['--log-level', 'loud'], /--log-level must be one of trace, debug, info, warning, error, critical \(got 'loud'\)/],
    [['--schedule-policy', 'lpm'], /--schedule-policy must be fcfs \(got 'lpm'\)/],
    [['--scheduling-policy', 'priority'], /--scheduling-policy must be fcfs \(got 'priority'\)/],
    [['--uvicorn-log-level', 'info', '--log-level-http', 'info'], /--uvicorn-log-level and --log-level-http are the same flag/],
    [['--generation-config', './model-dir'], /--generation-config must be auto or vllm/],
    [['--allowed-origins', '["a",'], /--allowed-origins must be a JSON list/],
    [['--allowed-origins', '["*"]', '--cors-origins', '*'], /--cors-origins and --allowed-origins are the same flag/],
  ];
  for (const [args, want] of refused) t.throws(() => parse(['m.gguf', ...args]), want, args.join(' '));
  // values the engine options check (the same messages as LLM / Engine give): exit 2 from the command
  const engineOf = (args: string[]) => normalizeEngineOptions({ ...parse(['m.gguf', ...args]).engine, model: 'm.gguf' }, 'spindle serve');
  t.throws(() => engineOf(['--kv-cache-dtype', 'fp8_inc']), /kvCacheDtype must be one of auto, float16, half, bfloat16, float32, fp16, bf16, q8_0, q4_0, fp8, fp8_e4m3, fp8_e5m2 \(got fp8_inc\)/);
  t.equal(engineOf(['--kv-cache-dtype', 'q4_0']).kvCacheDtype, 'q4_0', "llama.cpp's -ctk / -ctv q4_0");
  t.equal(engineOf(['--kv-cache-dtype', 'fp8']).kvCacheDtype, 'fp8_e4m3', "vLLM's fp8 is e4m3");
  t.equal(engineOf(['--kv-cache-dtype', 'FP8_E5M2']).kvCacheDtype, 'fp8_e5m2');
  t.throws(() => engineOf(['--seed', '4294967296']), /seed must be an integer in \[0, 4294967295\]/);
  t.throws(() => engineOf(['--chat-template', '{% if %}']), /chatTemplate: the chat template does not parse/);
  t.throws(() => new LLM({ model: path, chatTemplate: '{% for %}' }), /the chat template does not parse/, 'LLM checks it at construction');
  t.equal(engineOf(['--chat-template', '{{ messages[0].content }}\\n']).chatTemplate, '{{ messages[0].content }}\n',
    "an inline template's escapes are decoded, as vLLM decodes them");
  t.throws(() => parse(['--ollama', '--chat-template', TEMPLATE]), /--chat-template serves one model; runner mode/);
  t.same(parse(['m.gguf', '--allowed-origins', '["https://a.example", "*"]']).serve.corsOrigins, ['https://a.example', '*']);
  t.doesNotThrow(() => parse(['m.gguf', '-tp=1', '-q=gguf']), '-tp=1 and -q=gguf are read too');
  t.throws(() => parse(['m.gguf', '-tp=2']), /--tensor-parallel-size must be 1 \(got '2'\)/);
});

t.test('seed: requests without one draw the same seeds in the same order; a request\'s own seed wins', async (t) => {
  const sample = async (seed?: number, greedyFirst = false): Promise<string[]> => {
    const llm = new LLM({ model: path, threads: 1, maxModelLen: 128, ...(seed === undefined ? {} : { seed }) });
    try {
      if (greedyFirst) await llm.generate('warm up', { temperature: 0, maxTokens: 2 }); // as the server's warm-up
      const outs = await llm.generate(['Once upon', 'The sky'], { temperature: 1.5, maxTokens: 12, ignoreEos: true });
      const own = await llm.generate('Once upon', { temperature: 1.5, maxTokens: 12, ignoreEos: true, seed: 3 });
      return [...outs.map((o) => o.outputs[0].tokenIds.join(',')), own[0].outputs[0].tokenIds.join(',')];
    } finally {
      await llm.close();
    }
  };
  const a = await sample(7), b = await sample(7), c = await sample(8), free = await sample();
  t.same(a, b, 'the same engine seed: the same samples');
  t.same(await sample(7, true), a, 'a greedy request in between draws no seed (the warm-up, health probes)');
  t.not(a[0], c[0], 'another engine seed: other samples');
  t.not(a[0], free[0], 'no engine seed: each request seeds itself at random');
  t.equal(a[2], c[2], 'a request seed gives the same tokens whatever the engine seed');
  t.equal(a[2], free[2]);
  t.throws(() => new LLM({ model: path, seed: -1 }), /seed must be an integer in \[0, 4294967295\]/);
});

t.test('--chat-template replaces the GGUF\'s template; --kv-cache-dtype sets the cache; --log-level quiets info lines', async (t) => {
  const s = await startServe([path, '--threads', '1', '--max-model-len', '256', '--chat-template', templateFile,
    '--kv-cache-dtype', 'float16', '--log-level', 'warning', '--trust-remote-code']);
  t.teardown(s.stop);
  const tok = await fetch(s.url + '/tokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
  const { tokens } = (await tok.json()) as { tokens: number[] };
  const back = await fetch(s.url + '/detokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tokens }) });
  t.match(((await back.json()) as { prompt: string }).prompt, /\[USER\] hi\n\[ASSISTANT\] $/, 'the prompt is the flag\'s template');
  const info = (await (await fetch(s.url + '/tokenizer_info')).json()) as { chat_template: string };
  t.equal(info.chat_template, TEMPLATE);
  const server = (await (await fetch(s.url + '/get_server_info')).json()) as { kv_cache_dtype: string };
  t.equal(server.kv_cache_dtype, 'float16', 'a 16-bit KV cache on the CPU too');
  const chat = await fetch(s.url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }) });
  t.equal(chat.status, 200);
  t.notMatch(s.stderr(), /model '.*' from|ready \d+ ms/, '--log-level warning: no info lines');
  t.match(s.stderr(), /--trust-remote-code has no effect/, 'notes are warnings: still written');
  t.match(s.stdout(), /listening on http/, 'the listening line is written whatever the level');
});

t.test('--log-format json --disable-log-requests: no request lines, errors still logged; without it, one per request', async (t) => {
  for (const quiet of [true, false]) {
    const s = await startServe([path, '--threads', '1', '--max-model-len', '128', '--log-format', 'json', '--skip-server-warmup',
      ...(quiet ? ['--disable-log-requests'] : [])]);
    await fetch(s.url + '/v1/models');
    await s.stop();
    const lines = s.stdout().trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
    t.equal(lines.some((l) => l.msg === 'incoming request'), !quiet, quiet ? 'quiet' : 'request lines');
    t.ok(lines.some((l) => /^listening on /.test(l.msg)));
  }
  const cfg = parse([path, '--log-format', 'json', '--disable-log-requests']);
  t.equal(cfg.serve.logRequests, false, 'Fastify keeps its logger (5xx lines) and drops only the request lines');
});

t.test("runner mode reads Ollama's server variables where the flags are absent; single-model mode never does", async (t) => {
  const env = {
    OLLAMA_HOST: '0.0.0.0:11500', OLLAMA_KEEP_ALIVE: '10m', OLLAMA_MAX_LOADED_MODELS: '2', OLLAMA_NUM_PARALLEL: '4',
    OLLAMA_MAX_QUEUE: '100', OLLAMA_CONTEXT_LENGTH: '2048', OLLAMA_ORIGINS: 'http://a.example,http://b.example', OLLAMA_KV_CACHE_TYPE: 'f16',
  };
  const cfg = parse(['--ollama'], env);
  t.same([cfg.serve.host, cfg.serve.port], ['0.0.0.0', 11500], 'OLLAMA_HOST');
  t.equal(cfg.runner!.keepAliveMs, 600_000);
  t.equal(cfg.runner!.maxLoaded, 2);
  t.equal(cfg.engine.maxNumSeqs, 4);
  t.equal(cfg.serve.maxQueuedRequests, 100);
  t.equal(cfg.engine.maxModelLen, 2048);
  t.same(cfg.serve.corsOrigins.slice(0, 2), ['http://a.example', 'http://b.example']);
  t.ok(cfg.serve.corsOrigins.includes('http://localhost:*') && cfg.serve.corsOrigins.includes('vscode-webview://*'),
    "plus Ollama's default origins");
  t.equal(cfg.engine.kvCacheDtype, 'float16');
  t.match(cfg.notes.join('\n'), /Ollama's environment applies: OLLAMA_KEEP_ALIVE=10m, OLLAMA_MAX_LOADED_MODELS=2, OLLAMA_NUM_PARALLEL=4/);
  const flags = parse(['--ollama', '--keep-alive', '1m', '--max-running-requests', '8', '--host', '127.0.0.1', '--cors-origins', 'x'], env);
  t.same([flags.runner!.keepAliveMs, flags.engine.maxNumSeqs, flags.serve.host, flags.serve.port], [60_000, 8, '127.0.0.1', 11500],
    'a flag, in any spelling, wins over its variable (the port still comes from OLLAMA_HOST, as from SPINDLE_HOST)');
  t.same(flags.serve.corsOrigins, ['x']);
  t.equal(parse(['--ollama'], { ...env, SPINDLE_HOST: '127.0.0.1:9000' }).serve.port, 9000, 'SPINDLE_HOST wins over OLLAMA_HOST');
  const single = parse(['m.gguf'], env);
  t.same([single.serve.host, single.serve.port, single.engine.maxNumSeqs, single.serve.corsOrigins], ['127.0.0.1', 8000, undefined, []],
    "a single-model server ignores them (an ollama client's OLLAMA_HOST must not move it)");
  const auto = parse(['--ollama'], { OLLAMA_NUM_PARALLEL: '0', OLLAMA_MAX_LOADED_MODELS: '0', OLLAMA_KV_CACHE_TYPE: 'q8_0' });
  t.same([auto.engine.maxNumSeqs, auto.runner!.maxLoaded], [undefined, 1], "0: Ollama's automatic choice");
  t.equal(auto.engine.kvCacheDtype, 'q8_0', 'q8_0: a q8_0 cache');
  t.notMatch(auto.notes.join('\n'), /not implemented/, 'no warning: it is what was asked');
  const q4 = parse(['--ollama'], { OLLAMA_KV_CACHE_TYPE: 'q4_0' });
  t.equal(q4.engine.kvCacheDtype, 'q4_0', 'q4_0: a q4_0 cache');
  t.notMatch(q4.notes.join('\n'), /not implemented/, 'no warning: it is what was asked');
  t.same([parse(['--ollama'], { OLLAMA_HOST: ':11500' }).serve.host, parse(['--ollama'], { OLLAMA_HOST: '"0.0.0.0:11434"' }).serve.host],
    ['0.0.0.0', '0.0.0.0'], "OLLAMA_HOST as Ollama's server reads it: an empty host is every interface; quotes dropped");
  t.throws(() => parse(['--ollama'], { OLLAMA_MAX_LOADED_MODELS: '100' }), /OLLAMA_MAX_LOADED_MODELS must be in \[1, 64\] \(got '100'\)/);
  t.throws(() => parse(['--ollama'], { OLLAMA_NUM_PARALLEL: '100000' }), /OLLAMA_NUM_PARALLEL must be /);
  t.throws(() => parse(['--ollama'], { OLLAMA_NUM_PARALLEL: 'four' }), /OLLAMA_NUM_PARALLEL must be a whole number \(got 'four'\)/);
  t.throws(() => parse(['--ollama'], { OLLAMA_KV_CACHE_TYPE: 'f32' }), /OLLAMA_KV_CACHE_TYPE must be f16, q8_0 or q4_0/);
  t.throws(() => parse(['--ollama'], { OLLAMA_KEEP_ALIVE: 'soon' }), /OLLAMA_KEEP_ALIVE must be a duration/);
  t.throws(() => parse(['--ollama'], { OLLAMA_HOST: 'ftp://x' }), /OLLAMA_HOST: the scheme 'ftp' is not http or https/);
});

t.test('--cors-origins patterns: each * any run of characters (Ollama\'s OLLAMA_ORIGINS syntax)', async (t) => {
  const { buildApp } = await import('../lib/server/app.js');
  const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 64, threads: 1 }, 'serve'),
    servedModelNames: ['m'], corsOrigins: ['chrome-extension://*', 'http://localhost:*', 'https://app.example'] });
  t.teardown(() => app.close());
  const allow = async (origin: string) => (await app.inject({ method: 'OPTIONS', url: '/v1/models', headers: { origin } }))
    .headers['access-control-allow-origin'] ?? null;
  t.equal(await allow('chrome-extension://abcdef'), 'chrome-extension://abcdef');
  t.equal(await allow('http://localhost:5173'), 'http://localhost:5173');
  t.equal(await allow('https://app.example'), 'https://app.example');
  t.equal(await allow('https://evil.example'), null, 'anything else: no CORS header');
  t.equal(await allow('http://localhost.evil.example:1'), null, 'a pattern matches the whole origin, dots literal');
});
