// A local stand-in for the Hugging Face hub, for the model-store tests: the routes Spindle uses
// (GET /api/models/<org>/<repo>/tree/<rev>, GET|HEAD /<org>/<repo>/resolve/<rev>/<path> with ETag /
// X-Linked-Etag / range requests), a gated repository (401 GatedRepo without the token), unknown repositories
// (404 RepoNotFound), and faults: drop the connection after N bytes, corrupt a byte, serve slowly. Every request
// is logged so tests can count downloads and assert that none was made.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HubRepoFile {
  path: string;
  bytes: Buffer;
}

export interface HubRepo {
  files: HubRepoFile[];
  gatedToken?: string; // requests need `Authorization: Bearer <token>`
}

export interface HubFaults {
  dropAfter?: Map<string, number>; // path -> bytes sent before the socket is destroyed (once per path)
  corrupt?: Set<string>; // paths served with one byte flipped
  bytesPerMs?: number; // throttle file bodies
}

export interface HubLogEntry {
  method: string;
  url: string;
  range: string | null;
  auth: string | null;
}

export interface HubServer {
  url: string;
  log: HubLogEntry[];
  repos: Map<string, HubRepo>;
  faults: HubFaults;
  close(): Promise<void>;
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

export async function startHubServer(repos: Map<string, HubRepo>): Promise<HubServer> {
  const log: HubLogEntry[] = [];
  const faults: HubFaults = {};
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    log.push({ method: req.method ?? '', url: url.pathname, range: (req.headers.range as string | undefined) ?? null, auth: (req.headers.authorization as string | undefined) ?? null });
    const deny = (repo: HubRepo | undefined): boolean => {
      if (!repo) {
        res.writeHead(404, { 'x-error-code': 'RepoNotFound', 'content-type': 'application/json' });
        res.end('{"error":"Repository not found"}');
        return true;
      }
      if (repo.gatedToken && req.headers.authorization !== `Bearer ${repo.gatedToken}`) {
        res.writeHead(401, { 'x-error-code': 'GatedRepo', 'content-type': 'application/json' });
        res.end('{"error":"Access to this model is restricted"}');
        return true;
      }
      return false;
    };
    const tree = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)$/.exec(url.pathname);
    if (tree) {
      const repo = repos.get(decodeURIComponent(tree[1]));
      if (deny(repo)) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(repo!.files.map((f) => ({
        type: 'file', oid: sha(f.bytes).slice(0, 40), size: f.bytes.length, path: f.path,
        lfs: { oid: sha(f.bytes), size: f.bytes.length, pointerSize: 134 },
      }))));
      return;
    }
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (resolve) {
      const repo = repos.get(decodeURIComponent(resolve[1]));
      if (deny(repo)) return;
      const path = resolve[3].split('/').map(decodeURIComponent).join('/');
      const file = repo!.files.find((f) => f.path === path);
      if (!file) {
        res.writeHead(404, { 'x-error-code': 'EntryNotFound' });
        res.end();
        return;
      }
      let body = file.bytes;
      if (faults.corrupt?.has(path)) {
        body = Buffer.from(body);
        body[body.length >> 1] ^= 0xff;
      }
      const m = /^bytes=(\d+)-$/.exec((req.headers.range as string | undefined) ?? '');
      const start = m ? Number(m[1]) : 0;
      const headers: Record<string, string> = {
        'content-type': 'application/octet-stream', 'accept-ranges': 'bytes', etag: `"${sha(file.bytes)}"`,
        'x-linked-etag': `"${sha(file.bytes)}"`, 'x-linked-size': String(file.bytes.length), 'x-repo-commit': 'c0ffee'.padEnd(40, '0'),
      };
      if (m) {
        res.writeHead(206, { ...headers, 'content-length': String(body.length - start), 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` });
      } else {
        res.writeHead(200, { ...headers, 'content-length': String(body.length) });
      }
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      const drop = faults.dropAfter?.get(path);
      if (drop !== undefined) faults.dropAfter!.delete(path);
      const send = body.subarray(start, drop !== undefined ? Math.max(start, drop) : body.length);
      const finish = () => (drop !== undefined ? res.destroy() : res.end());
      if (!faults.bytesPerMs) {
        res.write(send, finish);
        return;
      }
      let at = 0;
      const tick = () => {
        if (res.destroyed) return;
        const n = Math.min(send.length - at, Math.max(1, Math.round(faults.bytesPerMs! * 20)));
        res.write(send.subarray(at, at + n));
        at += n;
        if (at < send.length) setTimeout(tick, 20);
        else finish();
      };
      tick();
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    log, repos, faults,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
