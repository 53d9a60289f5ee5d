// Environment variables of `spindle serve` (issue 21; lib/server/serve-env.ts): SPINDLE_MODEL, SPINDLE_API_KEY,
// SPINDLE_ROOT_PATH and SPINDLE_LOG_FORMAT apply when their flag is absent, a flag on the command line wins over
// its variable (as vLLM's --api-key over VLLM_API_KEY), a blank variable is no value, and a bad value is an error
// naming the variable and what it may be. Also --skip-server-warmup and the flags' own errors.
import t from 'tap';
import { parseServeArgs, type ServeConfig } from '../lib/server/command.js';

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}): ServeConfig => {
  const cfg = parseServeArgs(argv, env);
  if (cfg === 'help') throw new Error('help');
  return cfg;
};

t.test('defaults without flags or variables', async (t) => {
  const cfg = parse(['m.gguf']);
  t.same(cfg.serve.apiKeys, []);
  t.equal(cfg.serve.rootPath, '');
  t.equal(cfg.logFormat, 'text');
  t.equal(cfg.serve.warmup, true, 'the warm-up runs by default');
  t.equal(parse([]).model, null, 'no model: the demo model');
});

t.test('each variable applies when its flag is absent', async (t) => {
  const env = { SPINDLE_API_KEY: 'env-key', SPINDLE_ROOT_PATH: '/org/app/', SPINDLE_LOG_FORMAT: 'JSON', SPINDLE_MODEL: '/models/a.gguf' };
  const cfg = parse([], env);
  t.same(cfg.serve.apiKeys, ['env-key']);
  t.equal(cfg.serve.rootPath, '/org/app', 'normalized');
  t.equal(cfg.logFormat, 'json');
  t.equal(cfg.model, '/models/a.gguf');
  t.equal(cfg.runner, null, 'a model from the env is single-model mode');
});

t.test('a flag wins over its variable', async (t) => {
  const env = { SPINDLE_API_KEY: 'env-key', SPINDLE_ROOT_PATH: '/env/path', SPINDLE_LOG_FORMAT: 'json', SPINDLE_MODEL: '/models/env.gguf' };
  const cfg = parse(['/models/flag.gguf', '--api-key', 'flag-1', '--api-key', 'flag-2', '--root-path', '/flag/path', '--log-format', 'text'], env);
  t.same(cfg.serve.apiKeys, ['flag-1', 'flag-2'], '--api-key replaces SPINDLE_API_KEY (not added to it)');
  t.equal(cfg.serve.rootPath, '/flag/path');
  t.equal(cfg.logFormat, 'text');
  t.equal(cfg.model, '/models/flag.gguf', 'the argument wins over SPINDLE_MODEL');
  t.equal(parse(['--model', '/models/m.gguf'], env).model, '/models/m.gguf', '--model too');
  t.equal(parse(['--root-path', '/'], env).serve.rootPath, '', '--root-path / turns off a SPINDLE_ROOT_PATH');
});

t.test("vLLM's VLLM_API_KEY is the key when SPINDLE_API_KEY is not set", async (t) => {
  t.same(parse([], { VLLM_API_KEY: 'v' }).serve.apiKeys, ['v']);
  t.same(parse([], { VLLM_API_KEY: 'v', SPINDLE_API_KEY: 's' }).serve.apiKeys, ['s'], 'SPINDLE_API_KEY wins');
  t.same(parse(['--api-key', 'f'], { VLLM_API_KEY: 'v' }).serve.apiKeys, ['f'], 'the flag wins');
});

t.test('blank variables are no value', async (t) => {
  const cfg = parse([], { SPINDLE_API_KEY: '', SPINDLE_ROOT_PATH: '  ', SPINDLE_LOG_FORMAT: '', SPINDLE_MODEL: ' ' });
  t.same(cfg.serve.apiKeys, []);
  t.equal(cfg.serve.rootPath, '');
  t.equal(cfg.logFormat, 'text');
  t.equal(cfg.model, null);
});

t.test('SPINDLE_MODEL is ignored in runner mode (--ollama serves the store by name)', async (t) => {
  const cfg = parse(['--ollama'], { SPINDLE_MODEL: '/models/a.gguf' });
  t.equal(cfg.model, null);
  t.not(cfg.runner, null);
  const host = parse([], { SPINDLE_HOST: '0.0.0.0:8000', SPINDLE_MODEL: '/models/a.gguf' });
  t.equal(host.runner, null, 'SPINDLE_HOST with SPINDLE_MODEL: one model, on that address');
  t.equal(host.serve.host, '0.0.0.0');
  t.equal(host.serve.port, 8000);
});

t.test('bad values name the variable or flag and what is allowed', async (t) => {
  t.throws(() => parse([], { SPINDLE_LOG_FORMAT: 'yaml' }), { message: "SPINDLE_LOG_FORMAT must be one of text, json (got 'yaml')" });
  t.throws(() => parse(['--log-format', 'xml']), { message: "--log-format must be one of text, json (got 'xml')" });
  t.throws(() => parse([], { SPINDLE_ROOT_PATH: 'org/app' }), { message: /^SPINDLE_ROOT_PATH must start with '\/'/ });
  t.throws(() => parse(['--root-path', '/a/../b']), { message: /^--root-path must be a path such as \/org_id\/app_id/ });
  t.equal(parse(['--root-path', '/x'], { SPINDLE_ROOT_PATH: 'bad' }).serve.rootPath, '/x', 'a bad variable is not read when the flag is given');
});

t.test('--skip-server-warmup', async (t) => {
  t.equal(parse(['m.gguf', '--skip-server-warmup']).serve.warmup, false);
});
