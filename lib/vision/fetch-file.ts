// Local image files (file:// URLs and plain paths), as vLLM's --allowed-local-media-path allows them.
// Invariant: nothing is read unless allowedLocalMediaPath is set and the file, after realpath, lies inside its
// realpath: a path that leaves the directory by '..' is refused before the file system is asked anything, a
// symlink that leads out is refused after realpath; only a regular file of at most maxBytes (fstat of the
// opened file) is read, and never more than the size fstat gave.
import { constants, promises as fsp } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LoadedMedia, MediaFetchError, MediaFetchOptions, shortSrc } from './fetch-options.js';

const TYPE_BY_EXTENSION: Record<string, string> = {
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.webp': 'image/webp', '.gif': 'image/gif',
  '.bmp': 'image/bmp', '.tif': 'image/tiff', '.tiff': 'image/tiff',
};

/** Whether p is dir or lies under it (both absolute and normalized). */
function isInside(dir: string, p: string): boolean {
  const rel = path.relative(dir, p);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

function errnoCode(e: unknown): string {
  return (e as NodeJS.ErrnoException)?.code ?? 'unknown error';
}

/** file:// URL -> absolute path; the URL must not name a host other than localhost. */
export function filePathFromUrl(url: string): string {
  try {
    return fileURLToPath(new URL(url));
  } catch (e) {
    throw new MediaFetchError('bad_url',
      `the file URL '${shortSrc(url)}' is not a local absolute path (${(e as Error).message}; expected file:///absolute/path)`);
  }
}

export async function loadLocalFile(given: string, opts: MediaFetchOptions): Promise<LoadedMedia> {
  const allowed = opts.allowedLocalMediaPath;
  if (allowed === null) {
    throw new MediaFetchError('forbidden',
      `the image '${shortSrc(given)}' names a local file (a file: URL or a path without a scheme), and local files are refused: use an http:, https: or data: URL, or start the server with --allowed-local-media-path <dir> to allow files inside <dir>`);
  }
  if (given.includes('\0')) throw new MediaFetchError('bad_url', 'the image path contains a NUL character');
  const root = path.resolve(allowed);
  let rootReal: string;
  try {
    rootReal = await fsp.realpath(root);
    if (!(await fsp.stat(rootReal)).isDirectory()) throw Object.assign(new Error(), { code: 'ENOTDIR' });
  } catch (e) {
    throw new MediaFetchError('bad_option', `--allowed-local-media-path '${allowed}' is not an existing directory (${errnoCode(e)})`);
  }
  const outside = () => new MediaFetchError('forbidden',
    `the image path '${shortSrc(given)}' is outside --allowed-local-media-path '${allowed}' (only files inside that directory are allowed)`);
  const abs = path.resolve(given);
  if (!isInside(root, abs) && !isInside(rootReal, abs)) throw outside();
  let real: string;
  try {
    real = await fsp.realpath(abs);
  } catch (e) {
    const code = errnoCode(e);
    const what = code === 'ENOENT' ? 'does not exist' : `cannot be read (${code})`;
    throw new MediaFetchError('unreachable', `the image file '${shortSrc(given)}' ${what}`);
  }
  if (!isInside(rootReal, real)) throw outside(); // a symlink led out
  return { bytes: await readBounded(real, given, opts.maxBytes), contentType: TYPE_BY_EXTENSION[path.extname(real).toLowerCase()] ?? null, source: 'file' };
}

async function readBounded(real: string, given: string, maxBytes: number): Promise<Buffer> {
  let fh: fsp.FileHandle;
  try {
    // O_NONBLOCK: a FIFO must not block the open; O_NOFOLLOW: `real` must not have become a symlink since realpath
    fh = await fsp.open(real, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0));
  } catch (e) {
    throw new MediaFetchError('unreachable', `the image file '${shortSrc(given)}' cannot be opened (${errnoCode(e)})`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new MediaFetchError('bad_url', `the image path '${shortSrc(given)}' is not a regular file`);
    if (st.size > maxBytes) {
      throw new MediaFetchError('too_many_bytes', `the image file '${shortSrc(given)}' is ${st.size} bytes; at most ${maxBytes} are accepted`);
    }
    const bytes = Buffer.alloc(st.size);
    let n = 0;
    while (n < bytes.length) {
      const { bytesRead } = await fh.read(bytes, n, bytes.length - n, n);
      if (bytesRead === 0) break; // shrank since fstat
      n += bytesRead;
    }
    return n === bytes.length ? bytes : bytes.subarray(0, n);
  } catch (e) {
    if (e instanceof MediaFetchError) throw e;
    throw new MediaFetchError('unreachable', `the image file '${shortSrc(given)}' cannot be read (${errnoCode(e)})`);
  } finally {
    await fh.close().catch(() => undefined);
  }
}
