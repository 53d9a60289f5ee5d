// Loads the native addon: a prebuilt binary from prebuilds/<platform>-<arch>/ when one matches, else the
// local build (build/Release) made by cmake-js or node-gyp. Mirrors native/napi/ by hand.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

export interface NativeAddon {
  version(): string;
}

let cached: NativeAddon | undefined;

export function loadNative(): NativeAddon {
  if (!cached) {
    const nodeGypBuild = require('node-gyp-build') as (dir: string) => NativeAddon;
    cached = nodeGypBuild(packageRoot);
  }
  return cached;
}
