// `spindle serve` as a child process of a test (the built CLI, dist/cli/main.js): startServe(args) resolves with
// its URL once it prints `listening on` (text or --log-format json); stop() sends SIGTERM and waits for the exit.
// Needs `npm run build:ts`.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = join(repoRoot, 'dist', 'cli', 'main.js');

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stdout(): string;
  stop(): Promise<void>;
}

export async function startServe(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ServeProcess> {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run build:ts first`);
  const child = spawn(process.execPath, [cli, 'serve', ...args, '--port', '0'], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => { stderr += b.toString(); });
  let stdout = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (b: Buffer) => {
      stdout += b.toString();
      const m = /listening on (http:\/\/\S+) /.exec(stdout);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`spindle serve exited ${code}: ${stderr}`)));
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  return { url, child, stderr: () => stderr, stdout: () => stdout, stop };
}
