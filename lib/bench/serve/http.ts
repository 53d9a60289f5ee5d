// Minimal HTTP client over node:http / node:https for the benchmark: a streaming POST and a JSON GET.
// Invariant: no client-side timeouts or connection caps (the benchmark's own semaphore is the only limit
// on in-flight requests, and a long queue on the server must not turn into client errors); a non-2xx
// answer resolves with its status and the start of its body, a transport failure rejects.
import http from 'node:http';
import https from 'node:https';

export type Agents = { http: http.Agent; https: https.Agent };

/** Keep-alive agents without a socket cap; destroy() them when the run ends. */
export function createAgents(): Agents {
  return {
    http: new http.Agent({ keepAlive: true, maxSockets: Infinity }),
    https: new https.Agent({ keepAlive: true, maxSockets: Infinity }),
  };
}

export function destroyAgents(agents: Agents): void {
  agents.http.destroy();
  agents.https.destroy();
}

export interface HttpResult {
  status: number;
  statusMessage: string;
  /** the body, when the status was not 2xx (first 8 KiB), for the error message */
  errorBody: string;
}

const ERROR_BODY_LIMIT = 8192; // bytes

function open(method: 'GET' | 'POST', url: string, headers: Record<string, string>, agents: Agents) {
  const u = new URL(url);
  const lib = u.protocol === 'https:' ? https : u.protocol === 'http:' ? http : null;
  if (!lib) throw new Error(`unsupported URL scheme in ${url} (use http:// or https://)`);
  const agent = u.protocol === 'https:' ? agents.https : agents.http;
  return lib.request(u, { method, headers, agent });
}

/**
 * POSTs `body` and hands each body chunk of a 2xx answer to onData as it arrives. Resolves when the
 * body has ended; rejects on a connection error or a body cut short.
 */
export function postStream(url: string, headers: Record<string, string>, body: string, agents: Agents,
  onData: (chunk: Buffer) => void): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = open('POST', url, { 'Content-Type': 'application/json', ...headers }, agents);
    } catch (e) {
      reject(e);
      return;
    }
    req.on('error', reject);
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const ok = status >= 200 && status < 300;
      let errorBody = '';
      res.on('data', (chunk: Buffer) => {
        if (ok) onData(chunk);
        else if (errorBody.length < ERROR_BODY_LIMIT) errorBody += chunk.toString('utf8');
      });
      res.on('end', () => resolve({ status, statusMessage: res.statusMessage ?? '', errorBody: errorBody.slice(0, ERROR_BODY_LIMIT) }));
      res.on('close', () => { if (!res.complete) reject(new Error('connection closed before the response ended')); });
      res.on('error', reject);
    });
    req.end(body);
  });
}

/** GETs a JSON document; throws with the status and body on a non-2xx answer. */
export async function getJson(url: string, headers: Record<string, string>, agents: Agents): Promise<unknown> {
  const text = await new Promise<string>((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = open('GET', url, headers, agents);
    } catch (e) {
      reject(e);
      return;
    }
    req.on('error', reject);
    req.on('response', (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { data += c; });
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) resolve(data);
        else reject(new Error(`GET ${url} answered ${status} ${res.statusMessage ?? ''}: ${data.slice(0, 300)}`));
      });
      res.on('error', reject);
    });
    req.end();
  });
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`GET ${url} did not answer JSON: ${text.slice(0, 200)}`);
  }
}
