// docs/reliability.md item 11 on the real CLI: `node dist/cli/main.js serve <model>` as a child process, 10
// streams in flight, SIGTERM: new requests get 503, the 10 streams drain to their full length, /health is 503
// while draining, and the process exits 0. Needs the built CLI (`npm run build:ts`).
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { fixtureModel } from './helpers/fixtures.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli', 'main.js');
const path = await fixtureModel({ arch: 'llama', tokenizer: 'llama2', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 });

t.test('SIGTERM with 10 streams in flight: 503 for new requests, the streams drain, exit 0', async (t) => {
  t.ok(existsSync(cli), `${cli} exists (run npm run build:ts first)`);
  const child = spawn(process.execPath, [cli, 'serve', path, '--port', '0', '--max-model-len', '512', '--threads', '1', '--served-model-name', 'm'],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
  let stderr = '';
  const signalled = new Promise<void>((resolve) => {
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString();
      if (/SIGTERM: not taking new requests/.test(stderr)) resolve();
    });
  });
  let stdout = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
      const m = /listening on (http:\/\/\S+) /.exec(stdout);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
  const exited = once(child, 'exit');
  const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'x', maxRetries: 0 });

  // 10 streams, each past its first token before the signal
  const TOKENS = 96;
  const firstTokens: Array<Promise<void>> = [];
  const streams = Array.from({ length: 10 }, (_, i) => {
    let first!: () => void;
    firstTokens.push(new Promise<void>((r) => { first = r; }));
    return (async () => {
      const stream = await client.completions.create({ model: 'm', prompt: `Spindle ${i} says`, max_tokens: TOKENS, ignore_eos: true,
        stream: true, stream_options: { include_usage: true } } as OpenAI.CompletionCreateParamsStreaming);
      let finish: string | null = null;
      let tokens = 0;
      for await (const c of stream) {
        if (c.choices[0]?.text) first();
        finish = c.choices[0]?.finish_reason ?? finish;
        tokens = c.usage?.completion_tokens ?? tokens;
      }
      return { finish, tokens };
    })();
  });
  await Promise.all(firstTokens);
  child.kill('SIGTERM');
  await signalled;

  const refused = await client.completions.create({ model: 'm', prompt: 'late', max_tokens: 2 }).then(() => null, (e: unknown) => e);
  t.ok(refused instanceof OpenAI.APIError && refused.status === 503, 'a new request during the drain gets 503');
  t.match((refused as InstanceType<typeof OpenAI.APIError>).error, { code: 'server_shutting_down' });
  t.equal((await fetch(url + '/health')).status, 503, '/health is 503 while draining');

  const done = await Promise.all(streams);
  t.same(done, Array.from({ length: 10 }, () => ({ finish: 'length', tokens: TOKENS })), 'all 10 streams drained to their full length');
  const [code, signal] = await exited;
  t.equal(signal, null);
  t.equal(code, 0, `exit code 0 (stderr: ${stderr})`);
  t.match(stderr, /all requests finished; stopped/);
});
