#!/usr/bin/env node
// The one list of native sources, read by both CMakeLists.txt and binding.gyp.
// Usage: node scripts/native-sources.mjs <core|napi|addon|tests|cuda|gputests> [--sep=;]
//   core:  every .cpp under native/ except napi/ and the GPU backends (the engine, usable without Node)
//   napi:  native/napi/*.cpp (the Node-API layer only)
//   addon: core + napi (binding.gyp builds everything in one target)
//   tests: test/native/*.cpp (the native test executable)
//   cuda:  native/backend/cuda/*.cu
//   gputests: test/gpu/*.cpp + the harness main (the GPU test executable)
import { readdirSync } from 'node:fs';
import { join, relative, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function walk(dir, ext) {
  const out = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...walk(path, ext));
    else if (entry.name.endsWith(ext)) out.push(path);
  }
  return out.sort();
}

const gpuDirs = ['native/backend/cuda', 'native/backend/metal'];
const isCore = (f) => !f.startsWith('native/napi/') && !gpuDirs.some((d) => f.startsWith(d + '/'));
const lists = {
  core: () => walk('native', '.cpp').filter(isCore),
  napi: () => walk('native/napi', '.cpp'),
  addon: () => [...lists.core(), ...lists.napi()],
  tests: () => walk('test/native', '.cpp'),
  cuda: () => walk('native/backend/cuda', '.cu'),
  gputests: () => [...walk('test/gpu', '.cpp'), 'test/native/harness_main.cpp'],
};

const kind = process.argv[2];
const sepArg = process.argv.find((a) => a.startsWith('--sep='));
if (!lists[kind]) {
  console.error(`usage: native-sources.mjs <${Object.keys(lists).join('|')}> [--sep=X]`);
  process.exit(2);
}
const files = lists[kind]().map((f) => relative(root, join(root, f)).split('\\').join('/'));
process.stdout.write(files.join(sepArg ? sepArg.slice(6) : ' '));
