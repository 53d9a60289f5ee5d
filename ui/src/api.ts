// The server's public HTTP API as the app uses it: every call carries the API key when one is set, and every
// failure becomes an ApiRequestError whose message a person can read (the server's own `error.message` when it
// sent one, else what went wrong with the connection).
import { loadApiKey } from './api-key';

export class ApiRequestError extends Error {
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

export function authHeaders(): Record<string, string> {
  const key = loadApiKey();
  return key ? { authorization: `Bearer ${key}` } : {};
}

/** The readable message of an error response: `{ error: { message } }` (OpenAI), `{ error: '...' }` (Ollama), or the status. */
export async function errorMessage(response: Response): Promise<string> {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { message?: string } | string };
    if (typeof body.error === 'string') return body.error;
    if (body.error?.message) return body.error.message;
  } catch {
    // not JSON: fall through to the status line
  }
  return `the server answered ${response.status} ${response.statusText}${text ? `: ${text.slice(0, 200)}` : ''}`;
}

/** The server's --root-path when the page was served under it ('' at the root): API paths go under it too. */
export function rootPath(): string {
  return document.querySelector('meta[name="spindle-root-path"]')?.getAttribute('content') ?? '';
}

/** This server's base URL as clients should use it: the origin, plus the root path when the page came under it. */
export function serverUrl(): string {
  return location.origin + rootPath();
}

export async function apiFetch(path: string, init: RequestInit = {}): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(rootPath() + path, { ...init, headers: { ...authHeaders(), ...(init.headers as Record<string, string> | undefined) } });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiRequestError(`could not reach the server (${(e as Error).message})`, 0);
  }
  if (!response.ok) throw new ApiRequestError(await errorMessage(response), response.status);
  return response;
}

export async function apiJson<T>(path: string, body?: unknown, method?: string): Promise<T> {
  const init: RequestInit = body === undefined ? { method: method ?? 'GET' }
    : { method: method ?? 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
  return (await apiFetch(path, init)).json() as Promise<T>;
}
