#!/usr/bin/env node
// The npm package as users get it (issue 21): packs the tarball (`npm pack`, whose prepack builds the TypeScript,
// the web UI and the release addon into prebuilds/<platform>-<arch>), installs it into an empty project with install
// scripts disabled (as npm 11 does for dependencies), then from that project runs `npx spindle serve` on the built-in
// demo model (waits for /health 200, sends a chat completion, stops it with SIGTERM) and an `LLM.chat` through
// `import { LLM } from 'spindle'`, once per prebuilt variant: the CPU addon (what a machine without an NVIDIA driver
// loads; it must link no CUDA library) and, when the pack built one (nvcc present), the CUDA addon beside it
// (SPINDLE_NATIVE_VARIANT=cuda: it loads without a driver, says no usable GPU for device 'cuda', and runs 'auto'
// on the CPU). Prints the tarball's size, its file count, each addon's size and the install time.
// --reuse-build: pack without prepack, taking dist/ as built and build/Release/spindle.node as the (only) prebuild
// (a developer's quick run; CI runs the real `npm pack`).
// Exit code 0 when every step passed; any failure names the step.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const reuse = process.argv.includes('--reuse-build');
const work = mkdtempSync(join(tmpdir(), 'spindle-pack-'));
const say = (line) => console.log(`pack-check: ${line}`);

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr?.slice(-2000)}`);
  return r.stdout;
}

async function serveFromProject(project) {
  // Its own process group: npx does not pass SIGTERM on to spindle, so the stop goes to the group (as `docker stop`
  // or systemd reach every process of the container or unit).
  const child = spawn('npx', ['--no-install', 'spindle', 'serve', '--port', '0'], { cwd: project, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  let err = '';
  child.stderr.on('data', (b) => { err += b; });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => { process.kill(-child.pid, 'SIGKILL'); reject(new Error(`npx spindle serve did not listen within 180 s: ${err}`)); }, 180_000);
    child.stdout.on('data', (b) => {
      out += b;
      const m = /listening on (http:\/\/\S+) /.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`npx spindle serve exited ${code}: ${err}`)); });
  });
  const health = await fetch(`${url}/health`);
  if (health.status !== 200) throw new Error(`/health answered ${health.status}`);
  const chat = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 8, temperature: 0 }),
  });
  const body = await chat.json();
  if (chat.status !== 200 || body.object !== 'chat.completion') throw new Error(`chat completion: ${chat.status} ${JSON.stringify(body)}`);
  // 'close': every process holding the pipes (npx and spindle) has exited; spindle logs its drain's end.
  const closed = new Promise((resolve) => child.once('close', resolve));
  process.kill(-child.pid, 'SIGTERM');
  await closed;
  if (!/all requests finished; stopped/.test(err)) throw new Error(`spindle serve did not drain and stop on SIGTERM: ${err.slice(-1000)}`);
  const model = /from (\S+\.gguf) on /.exec(err)?.[1];
  if (!model) throw new Error(`the demo model's path is not in the log: ${err}`);
  return { model, completion: body.choices[0].message.content };
}

try {
  let packArgs = ['pack', '--json', '--pack-destination', work];
  if (reuse) {
    const libc = process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
    const dir = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(root, 'build', 'Release', 'spindle.node'), join(dir, `spindle.${libc}.node`));
    rmSync(`${dir}-cuda`, { recursive: true, force: true });  // a real pack's CUDA addon would be stale here
    packArgs = [...packArgs, '--ignore-scripts'];
  }
  const packStart = Date.now();
  // `npm pack --json` prints its JSON last; what the lifecycle scripts print before it (the native build's own
  // lines) is not part of it
  const packOut = run('npm', packArgs, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = packOut.split('\n');
  const jsonStart = lines.lastIndexOf('[');  // the JSON array's opening line (a build line may start with '[' too)
  if (jsonStart < 0) throw new Error(`npm pack --json printed no JSON: ${packOut.slice(-500)}`);
  const [info] = JSON.parse(lines.slice(jsonStart).join('\n'));
  const tarball = join(work, info.filename);
  const addon = info.files.filter((f) => /^prebuilds\/.*\.node$/.test(f.path));
  if (addon.length === 0) throw new Error('the tarball holds no prebuilt addon under prebuilds/');
  say(`packed ${info.filename} in ${((Date.now() - packStart) / 1000).toFixed(1)} s: ${(statSync(tarball).size / 1e6).toFixed(2)} MB packed, ` +
    `${(info.unpackedSize / 1e6).toFixed(2)} MB unpacked, ${info.entryCount} files; prebuilt: ${addon.map((f) => `${f.path} (${(f.size / 1e6).toFixed(2)} MB)`).join(', ')}`);

  const project = join(work, 'app');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }));
  const installStart = Date.now();
  run('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', tarball], { cwd: project });
  say(`npm install --ignore-scripts of the tarball into an empty project: ${((Date.now() - installStart) / 1000).toFixed(1)} s`);

  const served = await serveFromProject(project);
  say(`npx spindle serve: /health 200, a chat completion ('${served.completion.slice(0, 40)}...'), SIGTERM: drained and stopped`);

  // a chat on device 'auto', then what device 'cuda' says (which tells the two addons apart)
  const script = "import { LLM } from 'spindle';\n" +
    `const model = ${JSON.stringify(served.model)};\n` +
    "const llm = new LLM({ model, maxModelLen: 512 });\n" +
    "const [out] = await llm.chat([{ role: 'user', content: 'Hello!' }], { maxTokens: 8, temperature: 0 });\n" +
    "if (out.outputs[0].tokenIds.length === 0) throw new Error('no tokens');\n" +
    'await llm.close();\n' +
    "const cuda = await new LLM({ model, maxModelLen: 512, device: 'cuda' }).chat([{ role: 'user', content: 'Hi' }], { maxTokens: 1 })\n" +
    "  .then(() => 'ran', (e) => e.message);\n" +
    "console.log(JSON.stringify({ tokens: out.outputs[0].tokenIds.length, finish: out.outputs[0].finishReason, cuda }));\n";
  writeFileSync(join(project, 'chat.mjs'), script);
  const installed = join(project, 'node_modules', 'spindle', 'prebuilds');
  const cpuAddon = join(installed, `${process.platform}-${process.arch}`);
  const cudaAddon = join(installed, `${process.platform}-${process.arch}-cuda`);
  if (process.platform === 'linux') {
    for (const f of readdirSync(cpuAddon)) {
      const libs = run('ldd', [join(cpuAddon, f)]);
      if (/cuda/i.test(libs)) throw new Error(`the CPU addon ${f} links a CUDA library: ${libs}`);
    }
  }
  const chat = run(process.execPath, ['chat.mjs'], { cwd: project, env: { ...process.env, SPINDLE_NATIVE_VARIANT: 'cpu' } }).trim();
  // (--reuse-build packs the developer's build, which has the CUDA backend wherever nvcc was found)
  if (!reuse && !/without nvcc/.test(chat)) throw new Error(`the CPU addon should have no CUDA backend: ${chat}`);
  say(`LLM.chat from the installed package, CPU addon (links no CUDA library): ${chat}`);
  if (existsSync(cudaAddon)) {
    const chatCuda = run(process.execPath, ['chat.mjs'], { cwd: project, env: { ...process.env, SPINDLE_NATIVE_VARIANT: 'cuda' } }).trim();
    if (!/no usable CUDA GPU|"cuda":"ran"/.test(chatCuda)) throw new Error(`the CUDA addon should have the CUDA backend: ${chatCuda}`);
    say(`LLM.chat, CUDA addon beside it (auto runs on the CPU where no GPU is usable): ${chatCuda}`);
  } else {
    say('no CUDA addon in this package (packed where nvcc was absent, or SPINDLE_PREBUILD_CUDA=0)');
  }
  say('ok');
} catch (e) {
  console.error(`pack-check: FAILED: ${e.message}`);
  process.exitCode = 1;
} finally {
  rmSync(work, { recursive: true, force: true });
}
