// The lines `spindle serve` prints once it is up: where it listens (tests and scripts wait for
// `listening on <url> `, in text and in json mode alike) and how long it took to become ready.
import type { CommandIo } from '../cli/io.js';
import type { LogFormat, ServeLog } from './log-format.js';
import type { ReadyTimings } from './plugins/engine.js';

/** The line that says where the server listens (tests and scripts wait for `listening on <url> `). */
export function listening(slog: ServeLog, io: CommandIo, format: LogFormat, base: string, apis: string): void {
  const line = `listening on ${base} (${apis})`;
  if (format === 'json') slog.announce(line, { url: base });
  else io.stdout.write(`spindle serve: ${line}\n`);
}

/** The readiness line: time since the process started, the load and the warm-up (ms, also as fields in json mode). */
export function readyLine(slog: ServeLog, t: ReadyTimings | undefined): void {
  const sinceStart = Math.round(process.uptime() * 1000);
  if (!t) return;
  const warm = t.warmupMs > 0 ? `, warm-up generation ${Math.round(t.warmupMs)} ms` : ' (warm-up skipped)';
  slog.info(`ready ${sinceStart} ms after start: model loaded in ${Math.round(t.loadMs)} ms${warm}; /health answers 200`,
    { readyMs: sinceStart, loadMs: Math.round(t.loadMs), warmupMs: Math.round(t.warmupMs) });
}
