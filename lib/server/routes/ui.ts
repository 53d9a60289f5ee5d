// GET / and GET /ui/*: the web UI (a chat app and a server panel, built from ui/ into dist/ui by
// `npm run build:ui`) as static files. It calls only the public HTTP API; with --api-key it asks the user for
// the key, so its own files are open (the auth plugin lets `/` and `/ui/*` through). `--no-ui` leaves these
// routes out.
// Invariants: only files that the build wrote under dist/ui are served (the list is read once, at startup; no
// request path reaches the file system); hashed assets are cached for good, index.html never; a client that
// takes gzip gets the gzipped bytes (compressed once per file, on first request). Under a root path
// (--root-path /org/app) the page is a copy whose `/ui/` asset URLs start with the root path, so the browser loads
// them through the same prefix.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../api-error.js';
import { isUnderRootPath } from '../root-path.js';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon', '.json': 'application/json', '.woff2': 'font/woff2',
};

// The page may load its own scripts and styles only, and talk only to this server; images may be data: URLs
// (pasted and dropped images) and blob: URLs.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
  "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

interface UiFile {
  body: Buffer;
  gzipped?: Buffer;
  type: string;
}

/** Where the built UI is: dist/ui beside the compiled server (dist/server/routes -> dist/ui), or from lib/ (tests) the repository's dist/ui. */
export function uiDir(): string | null {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const dir of [join(here, '..', '..', 'ui'), join(here, '..', '..', '..', 'dist', 'ui')]) {
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return null;
}

function readTree(dir: string, root = dir, out = new Map<string, UiFile>()): Map<string, UiFile> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) readTree(path, root, out);
    else out.set(relative(root, path).split(sep).join('/'), { body: readFileSync(path), type: TYPES[extname(name)] ?? 'application/octet-stream' });
  }
  return out;
}

function send(request: FastifyRequest, reply: FastifyReply, file: UiFile, cache: string): FastifyReply {
  reply.header('content-type', file.type).header('cache-control', cache).header('x-content-type-options', 'nosniff')
    .header('vary', 'Accept-Encoding');
  const accepts = String(request.headers['accept-encoding'] ?? '');
  if (/\bgzip\b/.test(accepts) && file.body.length > 1024) {
    file.gzipped ??= gzipSync(file.body);
    return reply.header('content-encoding', 'gzip').send(file.gzipped);
  }
  return reply.send(file.body);
}

/** index.html with its `/ui/` URLs (src="/ui/...", href="/ui/...") under `rootPath`, and the root path in a
 *  `<meta name="spindle-root-path">` the app puts before its API calls (ui/src/api.ts). */
function indexUnderRootPath(index: UiFile, rootPath: string): UiFile {
  const html = index.body.toString('utf8').replace(/(\s(?:src|href)=")\/ui\//g, `$1${rootPath}/ui/`)
    .replace('<head>', `<head>\n    <meta name="spindle-root-path" content="${rootPath}">`);
  return { body: Buffer.from(html, 'utf8'), type: index.type };
}

export default async function uiRoute(app: FastifyInstance, opts: { dir?: string | null; rootPath?: string }): Promise<void> {
  const dir = opts.dir === undefined ? uiDir() : opts.dir;
  const files = dir ? readTree(dir) : new Map<string, UiFile>();
  const rootPath = opts.rootPath ?? '';
  const rootIndex = files.get('index.html');
  const prefixedIndex = rootIndex && rootPath !== '' ? indexUnderRootPath(rootIndex, rootPath) : undefined;
  app.get('/', async (request, reply) => {
    const index = prefixedIndex && isUnderRootPath(request.originalUrl, rootPath) ? prefixedIndex : rootIndex;
    if (!index) {
      throw new ApiError(404, 'the web UI is not built: run `npm run build:ui` (the API is under /v1 and /api)', { code: 'ui_not_built' });
    }
    reply.header('content-security-policy', CSP).header('referrer-policy', 'no-referrer');
    return send(request, reply, index, 'no-cache');
  });
  app.get<{ Params: { '*': string } }>('/ui/*', async (request, reply) => {
    const name = request.params['*'];
    const file = files.get(name);
    if (!file || name === 'index.html') throw new ApiError(404, `no such file of the web UI: /ui/${name}`, { code: 'not_found' });
    return send(request, reply, file, name.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
  });
}
