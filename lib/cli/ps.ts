// `spindle ps`: the models a running server has loaded, as `ollama ps` prints them: NAME, ID (12 hex digits of
// the model's digest), SIZE, PROCESSOR (100% CPU / 100% GPU / the split), UNTIL (when keep-alive unloads it:
// "4 minutes from now", "Forever", "Stopping..."). It asks GET /api/ps of the server at SPINDLE_HOST
// (default http://127.0.0.1:11434, where `spindle serve --ollama` listens).
// Invariant: returns an exit code (0, 1 when no server answers or it answers an error, 2 for usage); every error
// is one line on stderr naming the address.
import { hostUrl } from '../server/host-env.js';
import type { CommandIo } from './io.js';
import { table } from './models/common.js';

const HELP = `Usage: spindle ps

Lists the models loaded by the running server (spindle serve --ollama) at SPINDLE_HOST (default
127.0.0.1:11434): NAME, ID, SIZE, PROCESSOR, UNTIL.
`;

const TIMEOUT_MS = 5_000;

interface PsModel {
  name: string;
  digest?: string;
  size?: number;
  size_vram?: number;
  expires_at?: string;
}

/** Ollama's format.HumanBytes: decimal units, '2.0 GB', '15 MB', '512 B'. */
export function humanBytes(b: number): string {
  const units: Array<[number, string]> = [[1e12, 'TB'], [1e9, 'GB'], [1e6, 'MB'], [1e3, 'KB']];
  const found = units.find(([n]) => b >= n);
  if (!found) return `${b} B`;
  const v = b / found[0];
  return v >= 10 ? `${Math.trunc(v)} ${found[1]}` : v !== Math.trunc(v) ? `${v.toFixed(1)} ${found[1]}` : `${v} ${found[1]}`;
}

/** Ollama's format.HumanDuration. */
export function humanDuration(ms: number): string {
  const s = Math.trunc(ms / 1000);
  if (s < 1) return 'Less than a second';
  if (s === 1) return '1 second';
  if (s < 60) return `${s} seconds`;
  const m = Math.trunc(s / 60);
  if (m === 1) return 'About a minute';
  if (m < 60) return `${m} minutes`;
  const h = Math.round(ms / 3_600_000);
  if (h === 1) return 'About an hour';
  if (h < 48) return `${h} hours`;
  if (h < 24 * 14) return `${Math.trunc(h / 24)} days`;
  if (h < 24 * 60) return `${Math.trunc(h / 24 / 7)} weeks`;
  if (h < 24 * 730) return `${Math.trunc(h / 24 / 30)} months`;
  return `${Math.trunc(ms / 3_600_000 / 24 / 365)} years`;
}

export function processor(size: number, vram: number): string {
  if (vram === 0) return '100% CPU';
  if (vram === size) return '100% GPU';
  if (vram > size || size === 0) return 'Unknown';
  const cpu = Math.round(((size - vram) / size) * 100);
  return `${cpu}%/${100 - cpu}% CPU/GPU`;
}

export function until(expiresAt: string | undefined, now = Date.now()): string {
  const t = expiresAt ? Date.parse(expiresAt) : NaN;
  if (Number.isNaN(t)) return 'Never';
  if (t <= now) return 'Stopping...';
  if ((t - now) / (365 * 86_400_000) > 20) return 'Forever';
  return `${humanDuration(t - now)} from now`;
}

export function psTable(models: PsModel[], now = Date.now()): string {
  const rows = [['NAME', 'ID', 'SIZE', 'PROCESSOR', 'UNTIL']];
  for (const m of models) {
    const size = m.size ?? 0;
    rows.push([m.name, (m.digest ?? '').replace(/^sha256[:-]/, '').slice(0, 12), humanBytes(size), processor(size, m.size_vram ?? 0), until(m.expires_at, now)]);
  }
  return table(rows);
}

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help') || argv.length > 0) {
    const help = argv.includes('-h') || argv.includes('--help');
    (help ? io.stdout : io.stderr).write(HELP);
    return help ? 0 : 2;
  }
  let base: string;
  try {
    base = hostUrl();
  } catch (e) {
    io.stderr.write(`spindle ps: ${(e as Error).message}\n`);
    return 1;
  }
  let res: Response;
  try {
    res = await fetch(`${base}/api/ps`, { signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (e) {
    const why = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
    io.stderr.write(`spindle ps: no server answered at ${base} (${why}); start one with \`spindle serve --ollama\` or set SPINDLE_HOST\n`);
    return 1;
  }
  let body: { models?: PsModel[]; error?: unknown };
  try {
    body = await res.json() as typeof body;
  } catch {
    io.stderr.write(`spindle ps: the server at ${base} answered ${res.status} without JSON; is it a Spindle or Ollama server?\n`);
    return 1;
  }
  if (!res.ok || !Array.isArray(body.models)) {
    const msg = typeof body.error === 'string' ? body.error : (body.error as { message?: string } | undefined)?.message ?? `HTTP ${res.status}`;
    io.stderr.write(`spindle ps: the server at ${base} answered: ${msg}\n`);
    return 1;
  }
  io.stdout.write(psTable(body.models));
  return 0;
}
