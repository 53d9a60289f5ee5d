// Loading image bytes as a request gives them (lib/vision/fetch.ts): data URLs, http(s) against a local server
// on 127.0.0.1 (statuses, content types, redirects, size limits, timeouts), the address and domain checks
// (link-local and metadata refused before connecting, the checked address is the one connected to), local
// files inside / outside --allowed-local-media-path, and bytes. Every failure is a MediaFetchError with a code.
import t from 'tap';
import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { loadMediaBytes, MediaFetchError, DEFAULT_MEDIA_FETCH_OPTIONS } from '../lib/vision/fetch.js';
import { fetchHttpBytes, ResolveHost } from '../lib/vision/fetch-http.js';
import { forbiddenAddressKind } from '../lib/vision/fetch-address.js';

const png = await sharp({ create: { width: 2, height: 2, channels: 3, background: { r: 255, g: 0, b: 0 } } }).png().toBuffer();
const pngDataUrl = `data:image/png;base64,${png.toString('base64')}`;

// ---- a local server --------------------------------------------------------------------------------------
let requests = 0;
const server = http.createServer((req, res) => {
  requests++;
  const u = new URL(req.url ?? '/', 'http://x');
  const redirect = /^\/redirect\/(\d+)$/.exec(u.pathname);
  if (redirect) {
    const n = Number(redirect[1]);
    res.writeHead(302, { location: n === 0 ? '/png' : `/redirect/${n - 1}` }).end();
    return;
  }
  switch (u.pathname) {
    case '/png': res.writeHead(200, { 'content-type': 'image/png; charset=binary' }).end(png); return;
    case '/octet': res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(png); return;
    case '/untyped': res.writeHead(200).end(png); return;
    case '/html': res.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>'); return;
    case '/gzip': res.writeHead(200, { 'content-type': 'image/png', 'content-encoding': 'gzip' }).end(png); return;
    case '/missing': res.writeHead(404).end('no'); return;
    case '/redirect-nowhere': res.writeHead(301).end(); return;
    case '/redirect-file': res.writeHead(302, { location: 'file:///etc/passwd' }).end(); return;
    case '/redirect-metadata': res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end(); return;
    case '/redirect-other': res.writeHead(302, { location: `http://other.test:${port}/png` }).end(); return;
    case '/slow': res.writeHead(200, { 'content-type': 'image/png' }); res.write(png.subarray(0, 8)); return; // never ends
    case '/huge-length': res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(2 ** 40) }).flushHeaders(); return;
    case '/short': // announces 1000 bytes, sends 10, hangs up
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': '1000' });
      res.write(Buffer.alloc(10), () => res.socket?.destroy());
      return;
    case '/chunked-big': {
      res.writeHead(200, { 'content-type': 'image/png' }); // no Content-Length: chunked
      let sent = 0;
      const more = () => {
        while (sent < 1 << 20) {
          sent += 16384;
          if (!res.write(Buffer.alloc(16384, 7))) { res.once('drain', more); return; }
        }
        res.end();
      };
      more();
      return;
    }
    default: res.writeHead(500).end();
  }
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;
const base = `http://127.0.0.1:${port}`;
t.teardown(() => { server.closeAllConnections(); server.close(); });

/** What rejectsWith uses of a (sub)test. */
type Checks = Pick<typeof t, 'ok' | 'equal' | 'match'>;

async function rejectsWith(t: Checks, p: Promise<unknown>, code: string, message?: RegExp): Promise<MediaFetchError> {
  const e = await p.then(() => null, (err: unknown) => err);
  t.ok(e instanceof MediaFetchError, `a MediaFetchError (${code})`);
  t.equal((e as MediaFetchError)?.code, code, (e as Error)?.message);
  if (message) t.match((e as Error)?.message, message);
  return e as MediaFetchError;
}

// ---- data URLs -------------------------------------------------------------------------------------------
t.test('data URLs: base64 images decode exactly; bad, non-image and oversized ones are refused', async (t) => {
  const got = await loadMediaBytes(pngDataUrl);
  t.ok(got.bytes.equals(png));
  t.same([got.contentType, got.source], ['image/png', 'data']);
  t.ok((await loadMediaBytes(`DATA:Image/PNG;BASE64,${png.toString('base64')}`)).bytes.equals(png), 'case-insensitive');
  t.equal((await loadMediaBytes(`data:;base64,${png.toString('base64')}`)).contentType, null, 'no media type');
  t.ok((await loadMediaBytes(`data:application/octet-stream;base64,${png.toString('base64')}`)).bytes.equals(png));
  t.same([...(await loadMediaBytes('data:image/png;base64,AAE')).bytes], [0, 1], 'padding may be left out');
  const pct = await loadMediaBytes('data:image/svg+xml,%3Csvg%2F%3E%00%ff');
  t.same([...pct.bytes], [...Buffer.from('<svg/>'), 0, 255], 'percent-encoded payload, byte by byte');

  await rejectsWith(t, loadMediaBytes('data:image/png;base64,iVBO!!!!'), 'bad_url', /character '!' at offset 4/);
  await rejectsWith(t, loadMediaBytes('data:image/png;base64,iVB=ORw0'), 'bad_url', /character '=' at offset 3/);
  await rejectsWith(t, loadMediaBytes('data:image/png;base64,iVBOR'), 'bad_url', /truncated/);
  await rejectsWith(t, loadMediaBytes('data:image/png;base64,iVBOR w0'), 'bad_url', /U\+0020/);
  await rejectsWith(t, loadMediaBytes('data:image/png;base64'), 'bad_url', /no ','/);
  await rejectsWith(t, loadMediaBytes('data:image/png,%3C%zz'), 'bad_url', /percent-escape/);
  await rejectsWith(t, loadMediaBytes(`data:text/html;base64,${Buffer.from('<p>').toString('base64')}`), 'content_type', /'text\/html' is not an image/);
  await rejectsWith(t, loadMediaBytes('data:text/plain,hello'), 'content_type');
  await rejectsWith(t, loadMediaBytes(pngDataUrl, { maxBytes: 10 }), 'too_many_bytes', new RegExp(`holds ${png.length} bytes; at most 10`));
  await rejectsWith(t, loadMediaBytes('data:image/png,0123456789ab', { maxBytes: 10 }), 'too_many_bytes');
  const huge = `data:image/png;base64,${'A'.repeat(30_000_000)}`; // 22.5 MB decoded: refused from its length
  const start = Date.now();
  await rejectsWith(t, loadMediaBytes(huge), 'too_many_bytes', /22500000 bytes/);
  t.ok(Date.now() - start < 500, 'without decoding or scanning it');
});

t.test('bytes are returned as they are, size-checked', async (t) => {
  const got = await loadMediaBytes(png);
  t.equal(got.bytes, png, 'the same Buffer');
  t.same([got.contentType, got.source], [null, 'buffer']);
  const u8 = new Uint8Array(png);
  const view = await loadMediaBytes(u8);
  t.ok(Buffer.isBuffer(view.bytes) && view.bytes.equals(png));
  t.equal(view.bytes.buffer, u8.buffer, 'no copy');
  await rejectsWith(t, loadMediaBytes(png, { maxBytes: 10 }), 'too_many_bytes');
});

t.test('bad sources and bad options are named', async (t) => {
  await rejectsWith(t, loadMediaBytes(42 as unknown as string), 'bad_url', /not number/);
  await rejectsWith(t, loadMediaBytes(''), 'bad_url', /empty/);
  await rejectsWith(t, loadMediaBytes('ftp://example.com/a.png'), 'bad_url', /'ftp:'.*allowed: http:, https:, data:/);
  await rejectsWith(t, loadMediaBytes('http://'), 'bad_url', /not a valid URL/);
  await rejectsWith(t, loadMediaBytes(pngDataUrl, { maxBytes: -1 }), 'bad_option', /maxBytes = -1/);
  await rejectsWith(t, loadMediaBytes(pngDataUrl, { timeoutMs: 0 }), 'bad_option', /timeoutMs/);
  await rejectsWith(t, loadMediaBytes(pngDataUrl, { allowedDomains: 'a.com' as unknown as string[] }), 'bad_option', /allowedDomains/);
  await rejectsWith(t, loadMediaBytes(pngDataUrl, { maxBytez: 1 } as never), 'bad_option', /maxBytez/);
  t.equal(DEFAULT_MEDIA_FETCH_OPTIONS.maxBytes, 20 * 1024 * 1024);
  t.ok(Object.isFrozen(DEFAULT_MEDIA_FETCH_OPTIONS));
});

// ---- http ------------------------------------------------------------------------------------------------
t.test('http: images arrive; image/*, octet-stream or no Content-Type', async (t) => {
  const got = await loadMediaBytes(`${base}/png`);
  t.ok(got.bytes.equals(png));
  t.same([got.contentType, got.source], ['image/png', 'http']);
  t.equal((await loadMediaBytes(`${base}/octet`)).contentType, 'application/octet-stream');
  t.equal((await loadMediaBytes(`${base}/untyped`)).contentType, null);
});

t.test('http: statuses, content types and encodings that are not an image are refused', async (t) => {
  await rejectsWith(t, loadMediaBytes(`${base}/missing`), 'http_status', /HTTP 404 Not Found/);
  await rejectsWith(t, loadMediaBytes(`${base}/html`), 'content_type', /'text\/html', which is not an image \(allowed: image\/\*/);
  await rejectsWith(t, loadMediaBytes(`${base}/gzip`), 'content_type', /Content-Encoding 'gzip'/);
  await rejectsWith(t, loadMediaBytes(`${base}/redirect-nowhere`), 'http_status', /without a Location/);
  await rejectsWith(t, loadMediaBytes(`${base}/short`), 'unreachable', /closed the connection/);
  await rejectsWith(t, loadMediaBytes(`http://127.0.0.1:1/png`), 'unreachable', /ECONNREFUSED/);
});

t.test('http: redirects are followed up to maxRedirects, each hop checked again', async (t) => {
  t.ok((await loadMediaBytes(`${base}/redirect/4`)).bytes.equals(png), '5 redirects: the default limit');
  await rejectsWith(t, loadMediaBytes(`${base}/redirect/5`), 'too_many_redirects', /more than 5 times/);
  await rejectsWith(t, loadMediaBytes(`${base}/redirect/0`, { maxRedirects: 0 }), 'too_many_redirects');
  await rejectsWith(t, loadMediaBytes(`${base}/redirect-file`), 'forbidden', /'file:' URL; redirects may only lead to http: or https:/);
  const start = Date.now();
  await rejectsWith(t, loadMediaBytes(`${base}/redirect-metadata`), 'forbidden', /'169.254.169.254' is a cloud metadata address/);
  t.ok(Date.now() - start < 1000, 'refused before connecting');
});

t.test('http: size limits from Content-Length and while streaming; the timeout covers the whole fetch', async (t) => {
  let start = Date.now();
  await rejectsWith(t, loadMediaBytes(`${base}/huge-length`), 'too_many_bytes', /announces 1099511627776 bytes \(Content-Length\)/);
  t.ok(Date.now() - start < 1000, 'refused from the header, not after a timeout');
  await rejectsWith(t, loadMediaBytes(`${base}/chunked-big`, { maxBytes: 100_000 }), 'too_many_bytes', /sent more than 100000 bytes/);
  t.ok((await loadMediaBytes(`${base}/png`, { maxBytes: png.length })).bytes.equals(png), 'exactly maxBytes is fine');
  start = Date.now();
  await rejectsWith(t, loadMediaBytes(`${base}/slow`, { timeoutMs: 200 }), 'timeout', /longer than 200 ms/);
  const took = Date.now() - start;
  t.ok(took >= 190 && took < 1000, `timed out after ${took} ms`);
});

t.test('addresses: link-local and metadata destinations are refused without connecting', async (t) => {
  const before = requests;
  for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://[fe80::1]/', 'http://[::ffff:169.254.169.254]/',
    'http://2852039166/', 'https://100.100.100.200/', 'http://[fd00:ec2::254]/', 'http://0.0.0.0/', 'http://[::]/']) {
    const start = Date.now();
    await rejectsWith(t, loadMediaBytes(url, { timeoutMs: 5000 }), 'forbidden', /link-local, cloud-metadata and unspecified addresses are refused/);
    t.ok(Date.now() - start < 500, `${url} refused at once`);
  }
  t.equal(requests, before);
  for (const [a, kind] of [['169.254.169.254', 'metadata'], ['169.254.3.4', 'link-local'], ['::ffff:a9fe:101', 'link-local'],
    ['64:ff9b::a9fe:a9fe', 'metadata'], ['0.0.0.0', 'unspecified'], ['::', 'unspecified']] as const) {
    t.match(forbiddenAddressKind(a), kind, a);
  }
  for (const a of ['127.0.0.1', '::1', '10.1.2.3', '192.168.0.1', '172.16.0.1', 'fd12::1', '8.8.8.8', '100.100.100.201']) {
    t.equal(forbiddenAddressKind(a), null, `${a} allowed`);
  }
});

t.test('DNS: every resolved address is checked, and the checked one is the one connected to', async (t) => {
  const names: Record<string, string[]> = {
    'img.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'], 'mixed.test': ['127.0.0.1', '169.254.169.254'], 'v6meta.test': ['fd00:ec2::254'],
  };
  const resolve: ResolveHost = async (host) => {
    const found = names[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  const opts = { ...DEFAULT_MEDIA_FETCH_OPTIONS };
  // 'img.test' exists in no real DNS: success shows the pinned address was used
  t.ok((await fetchHttpBytes(`http://img.test:${port}/png`, opts, resolve)).bytes.equals(png));
  await rejectsWith(t, fetchHttpBytes(`http://mixed.test:${port}/png`, opts, resolve), 'forbidden', /'mixed.test' resolves to 169.254.169.254, a cloud metadata address/);
  await rejectsWith(t, fetchHttpBytes(`http://v6meta.test:${port}/png`, opts, resolve), 'forbidden');
  // allowLinkLocal lifts the check (the first address, the local server, answers; nothing else is contacted)
  t.ok((await fetchHttpBytes(`http://mixed.test:${port}/png`, { ...opts, allowLinkLocal: true }, resolve)).bytes.equals(png));
  await rejectsWith(t, fetchHttpBytes(`http://nowhere.test/png`, opts, resolve), 'unreachable', /could not be resolved \(ENOTFOUND\)/);
  const slowDns: ResolveHost = () => new Promise((resolve) => setTimeout(() => resolve([{ address: '127.0.0.1', family: 4 }]), 400));
  await rejectsWith(t, fetchHttpBytes(`http://img.test:${port}/png`, { ...opts, timeoutMs: 100 }, slowDns), 'timeout', /100 ms/);
});

t.test('https: the pinned address is used with the URL host for SNI and certificate checks', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'spindle-fetch-tls-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '2', '-subj', '/CN=img.test',
      '-addext', 'subjectAltName=DNS:img.test'], { stdio: 'ignore' });
  } catch {
    t.skip('openssl is not available to make a certificate');
    return;
  }
  let sni: string | undefined;
  const tls = https.createServer({
    key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')),
    SNICallback: (name, cb) => { sni = name; cb(null, undefined); },
  }, (_req, res) => { res.writeHead(200, { 'content-type': 'image/png' }).end(png); });
  await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
  t.teardown(() => { tls.closeAllConnections(); tls.close(); });
  const tlsPort = (tls.address() as AddressInfo).port;
  const resolve: ResolveHost = async () => [{ address: '127.0.0.1', family: 4 }];
  // the certificate is self-signed, so verification (which stays on) refuses it
  await rejectsWith(t, fetchHttpBytes(`https://img.test:${tlsPort}/png`, { ...DEFAULT_MEDIA_FETCH_OPTIONS }, resolve), 'unreachable', /self-signed certificate/);
  t.equal(sni, 'img.test');
});

t.test('allowedDomains: exact host, case-insensitive, checked on every hop', async (t) => {
  const resolve: ResolveHost = async () => [{ address: '127.0.0.1', family: 4 }];
  const opts = { ...DEFAULT_MEDIA_FETCH_OPTIONS, allowedDomains: ['IMG.test', 'cdn.test'] };
  t.ok((await fetchHttpBytes(`http://img.test:${port}/png`, opts, resolve)).bytes.equals(png));
  t.ok((await fetchHttpBytes(`http://Img.Test.:${port}/png`, opts, resolve)).bytes.equals(png), 'a trailing dot is the same host');
  await rejectsWith(t, fetchHttpBytes(`http://sub.img.test:${port}/png`, opts, resolve), 'forbidden',
    /host 'sub.img.test' is not in --allowed-media-domains \(allowed: IMG.test, cdn.test\)/);
  await rejectsWith(t, fetchHttpBytes(`http://img.test:${port}/redirect-other`, opts, resolve), 'forbidden', /'other.test' is not in/);
  await rejectsWith(t, loadMediaBytes(`${base}/png`, { allowedDomains: ['img.test'] }), 'forbidden', /'127.0.0.1'/);
  await rejectsWith(t, loadMediaBytes(`${base}/png`, { allowedDomains: [] }), 'forbidden', /allowed: none/);
  t.ok((await loadMediaBytes(`${base}/png`, { allowedDomains: ['127.0.0.1'] })).bytes.equals(png));
  t.ok((await loadMediaBytes(pngDataUrl, { allowedDomains: [] })).bytes.equals(png), 'data URLs are not hosts');
});

// ---- local files -----------------------------------------------------------------------------------------
t.test('local files: only inside allowedLocalMediaPath, after realpath', async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'spindle-fetch-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  const allowed = path.join(root, 'allowed');
  const outside = path.join(root, 'outside');
  fs.mkdirSync(path.join(allowed, 'sub'), { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(allowed, 'sub', 'cat.png'), png);
  fs.writeFileSync(path.join(outside, 'secret.png'), png);
  fs.symlinkSync(path.join(outside, 'secret.png'), path.join(allowed, 'escape.png'));
  fs.symlinkSync(outside, path.join(allowed, 'dirlink'));
  fs.symlinkSync(path.join(allowed, 'sub', 'cat.png'), path.join(allowed, 'inner.png'));
  fs.symlinkSync(allowed, path.join(root, 'alias'));
  const opts = { allowedLocalMediaPath: allowed };
  const cat = path.join(allowed, 'sub', 'cat.png');

  const got = await loadMediaBytes(cat, opts);
  t.ok(got.bytes.equals(png));
  t.same([got.contentType, got.source], ['image/png', 'file']);
  t.ok((await loadMediaBytes(pathToFileURL(cat).href, opts)).bytes.equals(png), 'file:// URL');
  t.ok((await loadMediaBytes(path.relative(process.cwd(), cat), opts)).bytes.equals(png), 'relative path');
  t.ok((await loadMediaBytes(path.join(allowed, 'inner.png'), opts)).bytes.equals(png), 'a symlink that stays inside');
  t.ok((await loadMediaBytes(`${allowed}/sub/../sub/cat.png`, opts)).bytes.equals(png), "'..' that stays inside");
  t.ok((await loadMediaBytes(path.join(root, 'alias', 'sub', 'cat.png'), { allowedLocalMediaPath: path.join(root, 'alias') })).bytes.equals(png),
    'the allowed directory given through a symlink');

  await rejectsWith(t, loadMediaBytes(cat), 'forbidden', /local files are refused.*--allowed-local-media-path/);
  await rejectsWith(t, loadMediaBytes(pathToFileURL(cat).href), 'forbidden');
  await rejectsWith(t, loadMediaBytes(`${allowed}/../outside/secret.png`, opts), 'forbidden', /is outside --allowed-local-media-path/);
  await rejectsWith(t, loadMediaBytes(`file://${allowed}/%2e%2e/outside/secret.png`, opts), 'forbidden');
  await rejectsWith(t, loadMediaBytes(path.join(allowed, 'escape.png'), opts), 'forbidden', /is outside/);
  await rejectsWith(t, loadMediaBytes(path.join(allowed, 'dirlink', 'secret.png'), opts), 'forbidden', /is outside/);
  await rejectsWith(t, loadMediaBytes(path.join(outside, 'nothing.png'), opts), 'forbidden', /is outside/);
  await rejectsWith(t, loadMediaBytes(path.join(allowed, 'nothing.png'), opts), 'unreachable', /does not exist/);
  await rejectsWith(t, loadMediaBytes(path.join(allowed, 'sub'), opts), 'bad_url', /not a regular file/);
  await rejectsWith(t, loadMediaBytes(cat, { ...opts, maxBytes: 10 }), 'too_many_bytes', new RegExp(`is ${png.length} bytes; at most 10`));
  await rejectsWith(t, loadMediaBytes(`file://elsewhere${cat}`, opts), 'bad_url', /file URL/);
  await rejectsWith(t, loadMediaBytes(cat, { allowedLocalMediaPath: path.join(root, 'no-such-dir') }), 'bad_option', /not an existing directory/);
});
