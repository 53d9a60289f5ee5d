// One hub file into the store as a verified blob: downloaded to blobs/sha256-<hex>-partial, resumed with an HTTP
// range request after a dropped connection (or in a later run), checked against the expected size and sha256
// (the LFS oid the hub lists, which is also its X-Linked-Etag), then renamed to blobs/sha256-<hex>.
// Coalescing: one download per blob in a process (later callers await the first; a caller's signal cancels its own
// wait, and the download stops only when every caller has cancelled), and across processes a lock file
// (blobs/sha256-<hex>.lock, holding the owner's pid) that other processes wait on; a lock whose owner is gone is
// taken over.
// Invariants: a blob name appears only for verified bytes; a corrupt download is deleted, never renamed; a write
// failure (a full disk) leaves at most the -partial file, and the error says how much space was needed.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, openSync, closeSync, readFileSync, renameSync, rmSync, statSync, writeSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { HubError, hubFetch, type HubConfig } from './hub-client.js';

export type Progress = (event: { file: string; done: number; total: number; phase: 'download' | 'verify' | 'done' }) => void;

export interface DownloadOptions {
  cfg: HubConfig;
  onProgress?: Progress;
  signal?: AbortSignal;
  attempts?: number; // tries per file, resuming each time (default 4)
  /** Free bytes where the blob goes (tests simulate a full disk); default statfs. */
  freeBytes?: (dir: string) => number;
}

export class DownloadError extends Error {
  readonly code: 'verify' | 'disk_full' | 'write' | 'interrupted';
  constructor(code: DownloadError['code'], message: string) {
    super(message);
    this.name = 'DownloadError';
    this.code = code;
  }
}

/** One blob's download in this process and how many callers still wait for it. */
interface Shared {
  promise: Promise<string>;
  controller: AbortController; // aborted when the last waiter cancels
  waiters: number;
}
const inFlight = new Map<string, Shared>();

/** Ensures blobs/<digest> holds the file at `url` (size bytes, sha256 `sha`); returns the blob path. */
export function ensureBlob(blobsDir: string, url: string, file: string, size: number, sha: string, opts: DownloadOptions): Promise<string> {
  const blob = join(blobsDir, `sha256-${sha}`);
  if (existsSync(blob)) return Promise.resolve(blob);
  let s = inFlight.get(blob);
  if (!s) {
    const controller = new AbortController();
    const promise = withLock(blob, () => download(blob, url, file, size, sha, { ...opts, signal: controller.signal }), controller.signal)
      .finally(() => inFlight.delete(blob));
    promise.catch(() => {}); // every waiter may have left: then nobody handles its rejection
    s = { promise, controller, waiters: 0 };
    inFlight.set(blob, s);
  }
  return waitFor(s, file, opts.signal);
}

/** A caller's wait for a shared download: its own signal rejects it at once; the last one to leave stops the download. */
function waitFor(s: Shared, file: string, signal?: AbortSignal): Promise<string> {
  s.waiters++;
  let left = false;
  const leave = (): void => {
    if (left) return;
    left = true;
    s.waiters--;
  };
  return new Promise<string>((resolve, reject) => {
    const onAbort = (): void => {
      leave();
      if (s.waiters === 0) s.controller.abort();
      reject(new DownloadError('interrupted', `the download of ${file} was cancelled (resumable: run the pull again)`));
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    s.promise.then((v) => {
      leave();
      signal?.removeEventListener('abort', onAbort);
      resolve(v);
    }, (e: unknown) => {
      leave();
      signal?.removeEventListener('abort', onAbort);
      reject(e);
    });
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function withLock(blob: string, fn: () => Promise<string>, signal?: AbortSignal): Promise<string> {
  mkdirSync(join(blob, '..'), { recursive: true });
  const lock = `${blob}.lock`;
  for (;;) {
    if (existsSync(blob)) return blob; // another process finished it
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      let owner = NaN;
      try {
        owner = Number(readFileSync(lock, 'utf8'));
      } catch {
        continue; // released meanwhile
      }
      if (Number.isInteger(owner) && owner > 0 && !pidAlive(owner)) {
        rmSync(lock, { force: true }); // its owner died: take over (the -partial file resumes)
        continue;
      }
      if (signal?.aborted) throw new DownloadError('interrupted', 'the download was cancelled');
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return existsSync(blob) ? blob : await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

async function hashFile(path: string, hash: ReturnType<typeof createHash>): Promise<void> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

async function download(blob: string, url: string, file: string, size: number, sha: string, opts: DownloadOptions): Promise<string> {
  const partial = `${blob}-partial`;
  const attempts = opts.attempts ?? 4;
  const free = opts.freeBytes ?? ((dir: string) => { const s = statfsSync(dir); return Number(s.bavail) * Number(s.bsize); });
  let lastError: unknown = null;
  for (let attempt = 0; attempt < attempts; attempt++) {
    let have = existsSync(partial) ? statSync(partial).size : 0;
    if (have > size) {
      rmSync(partial, { force: true });
      have = 0;
    }
    const need = size - have;
    const avail = free(join(blob, '..'));
    if (need > avail) {
      throw new DownloadError('disk_full', `not enough disk space for ${file}: ${need} more bytes are needed in ${join(blob, '..')}, ${avail} are free (set SPINDLE_HOME to a larger disk)`);
    }
    try {
      if (have < size) await fetchInto(partial, url, file, have, size, opts);
      // Verify the whole file (resumed bytes included) before it may become a blob.
      opts.onProgress?.({ file, done: size, total: size, phase: 'verify' });
      const got = statSync(partial).size;
      const hash = createHash('sha256');
      await hashFile(partial, hash);
      const digest = hash.digest('hex');
      if (got !== size || digest !== sha) {
        rmSync(partial, { force: true });
        throw new DownloadError('verify', `${file} failed verification (${got} bytes, sha256 ${digest}; expected ${size} bytes, sha256 ${sha}); the download was discarded`);
      }
      renameSync(partial, blob);
      opts.onProgress?.({ file, done: size, total: size, phase: 'done' });
      return blob;
    } catch (e) {
      if (e instanceof DownloadError || (e instanceof HubError && e.code !== 'network')) throw e;
      if (opts.signal?.aborted) throw new DownloadError('interrupted', `the download of ${file} was cancelled (resumable: run the pull again)`);
      lastError = e;
    }
  }
  throw new HubError('network', `downloading ${file} failed after ${attempts} attempts (${(lastError as Error)?.message ?? lastError}); the partial file is kept and the next pull resumes it`);
}

async function fetchInto(partial: string, url: string, file: string, have: number, size: number, opts: DownloadOptions): Promise<void> {
  const res = await hubFetch(url, { ...opts.cfg, timeoutMs: 0 }, {
    headers: have > 0 ? { range: `bytes=${have}-` } : {},
    signal: opts.signal,
  });
  if (res.status === 401 || res.status === 403 || res.status === 404) throw new HubError(res.status === 404 ? 'not_found' : 'unauthorized', `${file}: the hub answered HTTP ${res.status} for the file`);
  if (!res.ok || !res.body) throw new HubError('network', `${file}: HTTP ${res.status}`);
  let start = 0;
  if (res.status === 206) {
    const m = /bytes (\d+)-/.exec(res.headers.get('content-range') ?? '');
    start = m ? Number(m[1]) : NaN;
    if (start !== have) throw new HubError('network', `${file}: the server resumed at byte ${start}, not ${have}`);
  } else if (have > 0) {
    rmSync(partial, { force: true }); // no range support: start over
  }
  const out = createWriteStream(partial, { flags: start > 0 ? 'a' : 'w' });
  const failed = new Promise<never>((_, reject) => out.once('error', (e: NodeJS.ErrnoException) => reject(
    e.code === 'ENOSPC' ? new DownloadError('disk_full', `the disk filled up while writing ${file} (${size} bytes needed); the partial file is kept for a later resume`)
      : new DownloadError('write', `writing ${file} failed: ${e.message}`))));
  failed.catch(() => {});
  let done = start;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { value, done: end } = await Promise.race([reader.read(), failed]);
      if (end) break;
      if (!out.write(value)) await Promise.race([new Promise<void>((r) => out.once('drain', () => r())), failed]);
      done += value.length;
      opts.onProgress?.({ file, done, total: size, phase: 'download' });
    }
  } catch (e) {
    if (e instanceof DownloadError) throw e;
    throw new HubError('network', `${file}: the connection dropped at byte ${done} of ${size} (${(e as Error).message})`);
  } finally {
    await new Promise<void>((r) => out.end(() => r()));
  }
  await Promise.race([Promise.resolve(), failed]);
  if (done < size) throw new HubError('network', `${file}: the connection ended at byte ${done} of ${size}`);
}
