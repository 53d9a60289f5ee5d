#!/usr/bin/env node
// Builds the release addon (no tests, portable: CPU features are chosen at run time, never -march=native)
// and copies it to prebuilds/<platform>-<arch>/spindle.<libc>.node, where node-gyp-build finds it in an
// installed package. Runs from `prepack`, so `npm pack` / `npm publish` ship the binary.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const buildDir = join(root, 'build-prebuild');

function run(cmd, args) {
  // the build's output on stderr: stdout stays for what runs us (`npm pack --json` prints JSON there)
  const r = spawnSync(cmd, args, { cwd: root, stdio: ['inherit', 2, 2] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed with status ${r.status}`);
}

run('npx', ['cmake-js', 'compile', '--out', 'build-prebuild', '--CDSPINDLE_BUILD_TESTS=OFF']);
const libc = process.platform === 'linux' ? (process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl') : '';
const outDir = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
rmSync(outDir, { recursive: true, force: true });
mkdirSync(outDir, { recursive: true });
const target = join(outDir, ['spindle', libc, 'node'].filter(Boolean).join('.'));
copyFileSync(join(buildDir, 'Release', 'spindle.node'), target);
if (process.platform === 'linux') spawnSync('strip', ['--strip-unneeded', target], { stdio: 'inherit' });
console.log(`prebuild: wrote ${target}`);
