// --log-format text|json (SPINDLE_LOG_FORMAT): how `spindle serve` writes its log.
// text (default): the `spindle serve: ...` lines on stderr, no per-request lines.
// json: one JSON object per line on stdout (pino's format: level as a number, time in ms since the epoch, msg),
// the server's own lines and, per request, `incoming request` and `request completed` with its `reqId` (see
// request-id.ts), method, URL, status and `responseTime` (ms); what log collectors of container platforms parse.
// Invariant: in json mode every line written to stdout is one complete JSON object.
import type { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

export const LOG_FORMATS = ['text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export function parseLogFormat(value: string, source = '--log-format'): LogFormat {
  const v = value.trim().toLowerCase();
  if ((LOG_FORMATS as readonly string[]).includes(v)) return v as LogFormat;
  throw new Error(`${source} must be one of ${LOG_FORMATS.join(', ')} (got '${value}')`);
}

/** The json-mode logger: pino writing synchronously to `out` (the process's stdout, or a buffer in tests). */
export function jsonLogger(out: Writable): Logger {
  return pino({ level: 'info', base: { name: 'spindle' } }, out);
}

export interface ServeLog {
  info(line: string, fields?: Record<string, unknown>): void;
  error(line: string, fields?: Record<string, unknown>): void;
  /** The logger Fastify uses for the request lines (json mode), or null (text mode: no request lines). */
  requestLogger: Logger | null;
}

/** The server's log in the given format; text lines go to `stderr` as before, json lines to `stdout`. */
export function serveLog(format: LogFormat, stdout: Writable, stderr: Writable): ServeLog {
  if (format === 'json') {
    const logger = jsonLogger(stdout);
    return {
      info: (line, fields) => logger.info(fields ?? {}, line),
      error: (line, fields) => logger.error(fields ?? {}, line),
      requestLogger: logger,
    };
  }
  const write = (line: string): void => { stderr.write(`spindle serve: ${line}\n`); };
  return { info: write, error: write, requestLogger: null };
}
