#!/usr/bin/env node
// `npm run test:gpu`: the GPU test suite (build/spindle_gpu_tests: every CUDA op against the CPU backend, whole
// models against the CPU backend, batch invariance on the GPU). It exists when the native build found nvcc; each
// case reports SKIP with the reason when no usable GPU / driver is present. Exit code: the suite's.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const candidates = [join(root, 'build', 'spindle_gpu_tests'), join(root, 'build', 'Release', 'spindle_gpu_tests')];
const bin = candidates.find((p) => existsSync(p));
if (!bin) {
  console.log('test:gpu: SKIP: this build has no CUDA backend (nvcc was not found when the addon was built)');
  process.exit(0);
}
const r = spawnSync(bin, process.argv.slice(2), { stdio: 'inherit', cwd: root });
process.exit(r.status ?? 1);
