// What the model commands (pull, list, show, rm, cp, run, create) share: the store, reference -> store key,
// error printing (one line naming the problem, exit code 1), and human-readable sizes and ages.
import { ModelRefError, parseModelRef } from '../../models/ref.js';
import { hubKey, localKey, userStore, type ModelStore, type StoreKey } from '../../models/store.js';
import type { CommandIo } from '../io.js';

export function openStore(): ModelStore {
  return userStore();
}

/** The store keys a reference may name, most specific first (a local name before the hub pull of org/repo). */
export function storeKeys(ref: string): StoreKey[] {
  const r = parseModelRef(ref);
  if (r.kind === 'path') throw new ModelRefError(`'${ref}' is a file path, not a model name`);
  if (r.kind === 'hub') return [hubKey(r.repo, r.quant)];
  const keys = [localKey(r.namespace, r.name, r.tag)];
  if (r.hubRepo) keys.push(hubKey(r.hubRepo, r.explicitTag ? r.tag : null));
  return keys;
}

/** Prints an Error (ModelRefError, HubError, DownloadError, ModelfileError, ...) as one line and returns exit code 1;
 * rethrows anything else. */
export function reportError(e: unknown, io: CommandIo, command: string): number {
  if (e instanceof Error) {
    io.stderr.write(`spindle ${command}: ${e.message}\n`);
    return 1;
  }
  throw e;
}

export function humanSize(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(0)} MB`;
  return `${(n / 1e3).toFixed(0)} KB`;
}

export function humanAge(d: Date, now = Date.now()): string {
  const s = Math.max(0, (now - d.getTime()) / 1000);
  if (s < 60) return 'Less than a minute ago';
  if (s < 3600) return `${Math.floor(s / 60)} minute${s < 120 ? '' : 's'} ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} hour${s < 7200 ? '' : 's'} ago`;
  return `${Math.floor(s / 86400)} day${s < 172800 ? '' : 's'} ago`;
}

/** Fixed-width columns, as `ollama list` prints them. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] + 4))).join('').trimEnd()).join('\n') + '\n';
}
