#!/usr/bin/env node
// Install step. The published package ships prebuilt binaries in prebuilds/<platform>-<arch>/ and needs no
// script at all (npm 11 does not run dependency install scripts). This script only matters where it runs:
//   - a binary for this platform is already there (prebuilt or built): nothing to do;
//   - a git clone: `npm install` runs `prepare`, which builds with cmake-js; nothing to do here;
//   - a source install of the package without a matching prebuild: build with node-gyp (binding.gyp).
import { existsSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const prebuildDir = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
const hasPrebuild = existsSync(prebuildDir) && readdirSync(prebuildDir).some((f) => f.endsWith('.node'));
const hasBuild = existsSync(join(root, 'build', 'Release', 'spindle.node'));

if (hasPrebuild || hasBuild || existsSync(join(root, '.git'))) process.exit(0);
console.log(`spindle: no prebuilt binary for ${process.platform}-${process.arch}; building from source with node-gyp`);
const r = spawnSync('npx', ['--yes', 'node-gyp', 'rebuild'], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
