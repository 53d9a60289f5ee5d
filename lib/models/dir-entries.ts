// Directory listings of the model stores (store.ts, ollama-store.ts): names of subdirectories or of files; a missing
// or unreadable directory lists nothing.
import { readdirSync } from 'node:fs';

/** Names of the subdirectories of `p`. */
export function subdirs(p: string): string[] {
  try {
    return readdirSync(p, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch {
    return [];
  }
}

/** Names of the files of `p`, without the temporary `*.tmp` ones a writer has not renamed yet. */
export function files(p: string): string[] {
  try {
    return readdirSync(p, { withFileTypes: true }).filter((d) => d.isFile() && !d.name.endsWith('.tmp')).map((d) => d.name);
  } catch {
    return [];
  }
}
