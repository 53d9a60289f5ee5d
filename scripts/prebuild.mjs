#!/usr/bin/env node
// Builds the release addon (no tests, portable: CPU features are chosen at run time, never -march=native) in two
// variants side by side, where node-gyp-build and lib/native.ts find them in an installed package:
//   prebuilds/<platform>-<arch>/spindle.<libc>.node        the CPU backend only (no CUDA code or library at all);
//   prebuilds/<platform>-<arch>-cuda/spindle.<libc>.node   with the CUDA backend (the CUDA runtime linked in
//     statically: it needs only the NVIDIA driver), made when nvcc is present (SPINDLE_PREBUILD_CUDA=0: never),
//     for SPINDLE_CUDA_ARCHITECTURES (CI: one architecture) or, unset, every architecture CMakeLists.txt lists.
// lib/native.ts loads the CUDA variant only on a machine with an NVIDIA driver. Runs from `prepack`, so
// `npm pack` / `npm publish` ship the binaries.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function run(cmd, args) {
  // the build's output on stderr: stdout stays for what runs us (`npm pack --json` prints JSON there)
  const r = spawnSync(cmd, args, { cwd: root, stdio: ['inherit', 2, 2] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed with status ${r.status}`);
}

const libc = process.platform === 'linux' ? (process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl') : '';
const platform = `${process.platform}-${process.arch}`;

/** Builds one variant in its own build folder and copies the addon into prebuilds/<dir>/. */
function variant(buildDir, outDirName, cuda) {
  run('npx', ['cmake-js', 'compile', '--out', buildDir, '--CDSPINDLE_BUILD_TESTS=OFF', `--CDSPINDLE_CUDA=${cuda ? 'ON' : 'OFF'}`]);
  const outDir = join(root, 'prebuilds', outDirName);
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const target = join(outDir, ['spindle', libc, 'node'].filter(Boolean).join('.'));
  copyFileSync(join(root, buildDir, 'Release', 'spindle.node'), target);
  if (process.platform === 'linux') spawnSync('strip', ['--strip-unneeded', target], { stdio: 'inherit' });
  console.error(`prebuild: wrote ${target}`);
}

variant('build-prebuild', platform, false);
const nvcc = spawnSync(process.env.CUDACXX || 'nvcc', ['--version'], { stdio: 'ignore' }).status === 0;
if (process.env.SPINDLE_PREBUILD_CUDA !== '0' && nvcc) variant('build-prebuild-cuda', `${platform}-cuda`, true);
else rmSync(join(root, 'prebuilds', `${platform}-cuda`), { recursive: true, force: true });
