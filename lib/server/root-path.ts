// --root-path / SPINDLE_ROOT_PATH: a path prefix such as `/<org_id>/<app_id>` under which every route also answers,
// for platforms that forward `{base}/<org_id>/<app_id>/v1/...` to the container without stripping the prefix (a
// proxy that strips it reaches the routes at the root, which keep answering).
// Invariants: a root path is '/' followed by one or more segments of URL-safe characters (no '.' or '..' segment,
// no '%', '?', '#' or empty segment), stored without a trailing slash; a request URL loses the prefix only when the
// prefix is a whole leading segment run (`/org/app`, `/org/app/...`, `/org/app?...`), once, so `/org/apps/...`,
// `/org/other/...` and `/org/app/org/app/...` reach no route under the prefix.

export class RootPathError extends Error {
  override name = 'RootPathError';
}

const SEGMENT = /^[A-Za-z0-9_~-][A-Za-z0-9._~-]*$/;

/** The normalized prefix ('' for none), or a RootPathError naming the value and what is allowed. */
export function parseRootPath(value: string, source = '--root-path'): string {
  const v = value.trim();
  if (v === '' || v === '/') return '';
  const allowed = `a path such as /org_id/app_id: '/' then segments of letters, digits, '-', '_', '.', '~' (no '.' or '..' segment)`;
  if (!v.startsWith('/')) throw new RootPathError(`${source} must start with '/': ${allowed} (got '${value}')`);
  const segments = v.replace(/\/$/, '').slice(1).split('/');
  for (const s of segments) {
    if (!SEGMENT.test(s)) throw new RootPathError(`${source} must be ${allowed} (got '${value}')`);
  }
  return `/${segments.join('/')}`;
}

/** Whether `url` (path and query) is under `rootPath` ('' never is). */
export function isUnderRootPath(url: string, rootPath: string): boolean {
  if (rootPath === '' || !url.startsWith(rootPath)) return false;
  const next = url.charAt(rootPath.length);
  return next === '' || next === '/' || next === '?';
}

/** `url` with the prefix removed when it is under `rootPath` (`/org/app` -> `/`, `/org/app?x` -> `/?x`); else `url`. */
export function stripRootPath(url: string, rootPath: string): string {
  if (!isUnderRootPath(url, rootPath)) return url;
  const rest = url.slice(rootPath.length);
  return rest === '' || rest.startsWith('?') ? `/${rest}` : rest;
}
