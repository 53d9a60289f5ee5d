// The Hugging Face hub's HTTP API as Spindle uses it: a repository's file list (`/api/models/<repo>/tree/<rev>`,
// with each LFS file's sha256) and a file's resolve URL (`/<repo>/resolve/<rev>/<path>`). HF_ENDPOINT sets the
// base URL (default https://huggingface.co), HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) authenticates (gated and
// private repositories); the token is never sent to another host (redirects to a CDN drop it).
// Invariant: every failure is a HubError whose code says which (not_found, gated, unauthorized, network, http)
// and whose message names the repository and what to do.

export interface HubConfig {
  endpoint: string; // no trailing slash
  token: string | null;
  timeoutMs: number; // per API request; 0: none (file bodies)
}

export function hubConfig(env: NodeJS.ProcessEnv = process.env): HubConfig {
  return {
    endpoint: (env.HF_ENDPOINT || 'https://huggingface.co').replace(/\/+$/, ''),
    token: env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || null,
    timeoutMs: 30_000,
  };
}

export type HubErrorCode = 'not_found' | 'gated' | 'unauthorized' | 'network' | 'http' | 'no_file' | 'bad_response';

export class HubError extends Error {
  readonly code: HubErrorCode;
  constructor(code: HubErrorCode, message: string) {
    super(message);
    this.name = 'HubError';
    this.code = code;
  }
}

export interface HubFile {
  path: string;
  size: number;
  sha256: string | null; // LFS files: the content's sha256 (what the blob is verified against)
}

export function authHeaders(cfg: HubConfig): Record<string, string> {
  return cfg.token ? { authorization: `Bearer ${cfg.token}` } : {};
}

/** Maps a hub error response to a HubError (401/403 with X-Error-Code GatedRepo: gated; 404 / RepoNotFound). */
export function hubStatusError(repo: string, res: Response): HubError {
  const code = res.headers.get('x-error-code') ?? '';
  if (code === 'GatedRepo') {
    return new HubError('gated', `hf.co/${repo} is a gated repository: accept its terms on the hub and set HF_TOKEN to a token with access`);
  }
  if (res.status === 404 || code === 'RepoNotFound' || code === 'RevisionNotFound') {
    return new HubError('not_found', `hf.co/${repo} was not found on ${new URL(res.url).origin} (check the name; a private repository needs HF_TOKEN)`);
  }
  if (res.status === 401 || res.status === 403) {
    return new HubError('unauthorized', `hf.co/${repo}: the hub refused access (HTTP ${res.status}); set HF_TOKEN to a token that can read it`);
  }
  return new HubError('http', `hf.co/${repo}: the hub answered HTTP ${res.status}`);
}

export async function hubFetch(url: string, cfg: HubConfig, init: RequestInit = {}): Promise<Response> {
  try {
    const signal = init.signal ?? (cfg.timeoutMs > 0 ? AbortSignal.timeout(cfg.timeoutMs) : undefined);
    return await fetch(url, { ...init, headers: { ...authHeaders(cfg), ...(init.headers as Record<string, string> | undefined) }, redirect: 'follow', signal });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new HubError('network', `could not reach ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? (e as Error).message}`);
  }
}

/** Every file of `repo` at `revision` (recursive). */
export async function listRepoFiles(repo: string, cfg: HubConfig, revision = 'main'): Promise<HubFile[]> {
  const url = `${cfg.endpoint}/api/models/${repo}/tree/${encodeURIComponent(revision)}?recursive=true`;
  const res = await hubFetch(url, cfg);
  if (!res.ok) throw hubStatusError(repo, res);
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    throw new HubError('bad_response', `hf.co/${repo}: the hub's file list is not JSON`);
  }
  if (!Array.isArray(body)) throw new HubError('bad_response', `hf.co/${repo}: the hub's file list is not an array`);
  const out: HubFile[] = [];
  for (const e of body as Record<string, unknown>[]) {
    if (e?.type !== 'file' || typeof e.path !== 'string') continue;
    const lfs = e.lfs as { oid?: unknown; size?: unknown } | undefined;
    const size = typeof lfs?.size === 'number' ? lfs.size : typeof e.size === 'number' ? e.size : 0;
    out.push({ path: e.path, size, sha256: typeof lfs?.oid === 'string' && /^[0-9a-f]{64}$/.test(lfs.oid) ? lfs.oid : null });
  }
  return out;
}

export function resolveUrl(repo: string, path: string, cfg: HubConfig, revision = 'main'): string {
  return `${cfg.endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${path.split('/').map(encodeURIComponent).join('/')}`;
}
