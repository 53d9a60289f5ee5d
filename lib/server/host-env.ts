// SPINDLE_HOST, read as Ollama reads OLLAMA_HOST: '[scheme://]host[:port][/path]' with the port 11434 by default
// (80 / 443 for an explicit http:// / https://), an IPv6 address in brackets, and an empty host meaning 127.0.0.1.
// The server listens there (`spindle serve`), and `spindle ps` asks there.
// Invariant: a value that cannot be an address is a HostEnvError naming it (never a silent fallback).

export const OLLAMA_PORT = 11434;

export class HostEnvError extends Error {
  override name = 'HostEnvError';
}

export interface HostAddress {
  scheme: 'http' | 'https';
  host: string; // no brackets
  port: number;
}

export function parseHostEnv(value: string): HostAddress {
  let rest = value.trim();
  let scheme: 'http' | 'https' = 'http';
  let defaultPort = OLLAMA_PORT;
  const sep = rest.indexOf('://');
  if (sep >= 0) {
    const s = rest.slice(0, sep).toLowerCase();
    if (s !== 'http' && s !== 'https') throw new HostEnvError(`SPINDLE_HOST: the scheme '${s}' is not http or https (got '${value}')`);
    scheme = s;
    defaultPort = s === 'https' ? 443 : 80;
    rest = rest.slice(sep + 3);
  }
  rest = rest.split('/')[0];
  const m = /^(?:\[([^\]]*)\]|([^:]*))(?::(\d*))?$/.exec(rest);
  if (!m) throw new HostEnvError(`SPINDLE_HOST: '${value}' is not host[:port]`);
  const host = (m[1] ?? m[2] ?? '') || '127.0.0.1';
  const port = m[3] ? Number(m[3]) : defaultPort;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new HostEnvError(`SPINDLE_HOST: the port of '${value}' is not in [0, 65535]`);
  return { scheme, host, port };
}

/** The base URL a client uses for SPINDLE_HOST (default http://127.0.0.1:11434); 0.0.0.0 / :: mean this machine. */
export function hostUrl(env: NodeJS.ProcessEnv = process.env): string {
  const a = parseHostEnv(env.SPINDLE_HOST ?? '');
  const host = a.host === '0.0.0.0' ? '127.0.0.1' : a.host === '::' ? '::1' : a.host;
  return `${a.scheme}://${host.includes(':') ? `[${host}]` : host}:${a.port}`;
}
