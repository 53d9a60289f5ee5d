// The installed package's version (package.json beside dist/), read once.
import { readFileSync } from 'node:fs';

let cached: string | null | undefined;

/** The version in package.json, or `fallback` when it cannot be read. */
export function spindleVersion(fallback = 'unknown'): string {
  if (cached === undefined) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
      cached = pkg.version ?? null;
    } catch {
      cached = null;
    }
  }
  return cached ?? fallback;
}
