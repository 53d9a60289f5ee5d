// http(s) image URLs -> bytes, with node's http/https modules so that name resolution is ours.
// Invariant: before a hop connects, its scheme is http(s), its host is in allowedDomains (when set) and every
// address the host resolves to passes forbiddenAddressKind (unless allowLinkLocal); the socket then connects
// to exactly those addresses (a pinned `lookup`), so a second DNS answer cannot slip in between check and
// connect. One timer bounds the whole fetch (DNS, connects, redirect hops, bodies); on every exit the request
// is destroyed and the timer cleared, so nothing keeps the process alive.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { domainToASCII } from 'node:url';
import { forbiddenAddressKind } from './fetch-address.js';
import { isAcceptedImageType, mediaTypeEssence } from './fetch-data.js';
import { LoadedMedia, MediaFetchError, MediaFetchOptions, shortSrc } from './fetch-options.js';

export interface ResolvedAddress { address: string; family: number }
/** All addresses of a host name (never called for literal IP hosts). */
export type ResolveHost = (host: string) => Promise<ResolvedAddress[]>;

export const lookupAllAddresses: ResolveHost = (host) => dns.promises.lookup(host, { all: true, verbatim: true });

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const REQUEST_HEADERS = {
  'user-agent': 'spindle',
  accept: 'image/*, application/octet-stream;q=0.9',
  'accept-encoding': 'identity',
};

type Hop = { kind: 'body'; bytes: Buffer; contentType: string | null } | { kind: 'redirect'; location: string };

/** A URL for an error message: any password hidden, long ones cut. */
function showUrl(url: URL): string {
  if (url.password === '') return shortSrc(url.href);
  const copy = new URL(url.href);
  copy.password = '***';
  return shortSrc(copy.href);
}

function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

function normalizeHost(host: string): string {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  return domainToASCII(h) || h; // a Unicode name in the list matches its punycode form in the URL
}

function parseHttpUrl(s: string, base: URL | null): URL {
  let url: URL;
  try {
    url = base === null ? new URL(s) : new URL(s, base);
  } catch {
    throw base === null
      ? new MediaFetchError('bad_url', `the image URL '${shortSrc(s)}' is not a valid URL`)
      : new MediaFetchError('bad_url', `the image URL '${showUrl(base)}' redirected to '${shortSrc(s)}', which is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw base === null
      ? new MediaFetchError('bad_url', `the image URL scheme '${url.protocol}' is not supported (allowed: http:, https:)`)
      : new MediaFetchError('forbidden',
        `the image URL '${showUrl(base)}' redirected to a '${url.protocol}' URL; redirects may only lead to http: or https: URLs`);
  }
  if (bareHost(url) === '') throw new MediaFetchError('bad_url', `the image URL '${showUrl(url)}' has no host`);
  return url;
}

function checkDomain(url: URL, allowedDomains: string[] | null): void {
  if (allowedDomains === null) return;
  const host = normalizeHost(url.hostname);
  if (allowedDomains.some((d) => normalizeHost(d) === host)) return;
  const allowed = allowedDomains.length === 0 ? 'none' : allowedDomains.join(', ');
  throw new MediaFetchError('forbidden', `the image URL host '${url.hostname}' is not in --allowed-media-domains (allowed: ${allowed})`);
}

/** p, or the error of `onAbort` as soon as the signal aborts; p's own later failure is then ignored. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal, onAbort: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(onAbort());
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
    p.then(
      (v) => { signal.removeEventListener('abort', abort); resolve(v); },
      (e) => { signal.removeEventListener('abort', abort); reject(e); },
    );
  });
}

async function resolveChecked(url: URL, opts: MediaFetchOptions, resolveHost: ResolveHost, signal: AbortSignal,
  onTimeout: () => Error): Promise<ResolvedAddress[]> {
  const host = bareHost(url);
  let addresses: ResolvedAddress[];
  if (net.isIP(host) !== 0) {
    addresses = [{ address: host, family: net.isIP(host) }];
  } else {
    try {
      const found = await raceAbort(resolveHost(host), signal, onTimeout);
      addresses = found.map((a) => ({ address: a.address, family: net.isIP(a.address) }));
    } catch (e) {
      if (e instanceof MediaFetchError) throw e;
      const why = (e as NodeJS.ErrnoException)?.code ?? (e as Error)?.message ?? String(e);
      throw new MediaFetchError('unreachable', `the image URL host '${host}' could not be resolved (${why})`);
    }
    if (addresses.length === 0 || addresses.some((a) => a.family === 0)) {
      throw new MediaFetchError('unreachable', `the image URL host '${host}' did not resolve to any IP address`);
    }
  }
  if (opts.allowLinkLocal) return addresses;
  for (const { address } of addresses) {
    const kind = forbiddenAddressKind(address);
    if (kind === null) continue;
    const where = address === host ? `is ${kind}` : `resolves to ${address}, ${kind}`;
    throw new MediaFetchError('forbidden',
      `the image URL host '${host}' ${where}; link-local, cloud-metadata and unspecified addresses are refused (loopback, private and public ones are allowed)`);
  }
  return addresses;
}

/** A `lookup` for the request that answers with the checked addresses, whatever DNS says now. */
function pinnedLookup(addresses: ResolvedAddress[]): net.LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, addresses.map((a) => ({ address: a.address, family: a.family })));
    else callback(null, addresses[0].address, addresses[0].family);
  };
}

function requestOptions(url: URL, addresses: ResolvedAddress[]): https.RequestOptions {
  const auth = url.username !== '' || url.password !== ''
    ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined;
  return {
    protocol: url.protocol, hostname: bareHost(url), port: url.port === '' ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`, method: 'GET', headers: REQUEST_HEADERS, auth,
    agent: false, // a socket of its own, closed with the request: no pool keeps the process alive
    lookup: pinnedLookup(addresses),
  };
}

type Settle = (err: Error | null, hop?: Hop) => void;

function onResponse(res: http.IncomingMessage, url: URL, maxBytes: number, settle: Settle): void {
  const status = res.statusCode ?? 0;
  const at = `the image URL '${showUrl(url)}'`;
  if (REDIRECT_STATUSES.has(status)) {
    const location = res.headers.location;
    if (location === undefined || location === '') {
      settle(new MediaFetchError('http_status', `${at} answered HTTP ${status} (a redirect) without a Location header`));
    } else {
      settle(null, { kind: 'redirect', location });
    }
    return;
  }
  if (status < 200 || status > 299) {
    const text = res.statusMessage ? ` ${res.statusMessage}` : '';
    settle(new MediaFetchError('http_status', `${at} answered HTTP ${status}${text} (expected a 2xx status)`));
    return;
  }
  const type = mediaTypeEssence(res.headers['content-type'] ?? '');
  if (!isAcceptedImageType(type)) {
    settle(new MediaFetchError('content_type',
      `${at} answered with Content-Type '${type}', which is not an image (allowed: image/*, application/octet-stream or none)`));
    return;
  }
  const encoding = mediaTypeEssence(res.headers['content-encoding'] ?? '');
  if (encoding !== '' && encoding !== 'identity') {
    settle(new MediaFetchError('content_type', `${at} answered with Content-Encoding '${encoding}' (only identity is accepted)`));
    return;
  }
  const tooMany = (what: string) => new MediaFetchError('too_many_bytes', `${at} ${what}; at most ${maxBytes} bytes are accepted`);
  const announced = Number(res.headers['content-length'] ?? NaN);
  if (announced > maxBytes) {
    settle(tooMany(`announces ${announced} bytes (Content-Length)`));
    return;
  }
  const chunks: Buffer[] = [];
  let total = 0;
  const cut = () => new MediaFetchError('unreachable', `${at} closed the connection before the whole image arrived (${total} bytes)`);
  res.on('data', (chunk: Buffer) => {
    total += chunk.length;
    if (total > maxBytes) settle(tooMany(`sent more than ${maxBytes} bytes`));
    else chunks.push(chunk);
  });
  res.on('end', () => {
    if (!res.complete) settle(cut());
    else settle(null, { kind: 'body', bytes: Buffer.concat(chunks, total), contentType: type === '' ? null : type });
  });
  res.on('error', () => settle(cut()));
  res.on('close', () => settle(cut())); // after 'end' this is a no-op
}

function requestOnce(url: URL, addresses: ResolvedAddress[], opts: MediaFetchOptions, signal: AbortSignal,
  onTimeout: () => Error): Promise<Hop> {
  return new Promise<Hop>((resolve, reject) => {
    let req: http.ClientRequest | undefined;
    let settled = false;
    const onAbort = () => settle(onTimeout());
    const settle: Settle = (err, hop) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      req?.destroy();
      if (err !== null) reject(err);
      else resolve(hop as Hop);
    };
    if (signal.aborted) return settle(onTimeout());
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      req = (url.protocol === 'https:' ? https : http).request(requestOptions(url, addresses));
    } catch (e) {
      return settle(new MediaFetchError('bad_url', `the image URL '${showUrl(url)}' cannot be requested (${(e as Error).message})`));
    }
    req.on('error', (e) => settle(new MediaFetchError('unreachable', `the image URL '${showUrl(url)}' could not be fetched (${e.message})`)));
    req.on('response', (res) => onResponse(res, url, opts.maxBytes, settle));
    req.end();
  });
}

export async function fetchHttpBytes(src: string, opts: MediaFetchOptions,
  resolveHost: ResolveHost = lookupAllAddresses): Promise<LoadedMedia> {
  const first = parseHttpUrl(src, null);
  let url = first;
  const onTimeout = () => new MediaFetchError('timeout',
    `fetching the image URL '${showUrl(url)}' took longer than ${opts.timeoutMs} ms (the limit for DNS, connecting, redirects and the body together)`);
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), opts.timeoutMs);
  try {
    for (let redirects = 0; ; redirects++) {
      checkDomain(url, opts.allowedDomains);
      const addresses = await resolveChecked(url, opts, resolveHost, abort.signal, onTimeout);
      const hop = await requestOnce(url, addresses, opts, abort.signal, onTimeout);
      if (hop.kind === 'body') return { bytes: hop.bytes, contentType: hop.contentType, source: 'http' };
      if (redirects >= opts.maxRedirects) {
        throw new MediaFetchError('too_many_redirects',
          `the image URL '${showUrl(first)}' redirected more than ${opts.maxRedirects} times (at most ${opts.maxRedirects} redirects are followed)`);
      }
      url = parseHttpUrl(hop.location, url);
    }
  } finally {
    clearTimeout(timer);
  }
}
