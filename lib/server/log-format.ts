// --log-format text|json (SPINDLE_LOG_FORMAT): how `spindle serve` writes its log.
// text (default): the `spindle serve: ...` lines on stderr, no per-request lines.
// json: one JSON object per line on stdout (pino's format: level as a number, time in ms since the epoch, msg),
// the server's own lines and, per request, `incoming request` and `request completed` with its `reqId` (see
// request-id.ts), method, URL, status and `responseTime` (ms); what log collectors of container platforms parse.
// Invariant: in json mode every line written to stdout is one complete JSON object.
import type { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { LOG_LEVELS, type LogLevel } from './launch-compat.js';

export const LOG_FORMATS = ['text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export function parseLogFormat(value: string, source = '--log-format'): LogFormat {
  const v = value.trim().toLowerCase();
  if ((LOG_FORMATS as readonly string[]).includes(v)) return v as LogFormat;
  throw new Error(`${source} must be one of ${LOG_FORMATS.join(', ')} (got '${value}')`);
}

/** The json-mode logger: pino writing synchronously to `out` (the process's stdout, or a buffer in tests). */
export function jsonLogger(out: Writable, level: LogLevel = 'info'): Logger {
  return pino({ level: PINO_LEVEL[level], base: { name: 'spindle' } }, out);
}

// vLLM's / uvicorn's level names (--log-level, --uvicorn-log-level) as pino's.
const PINO_LEVEL: Record<LogLevel, string> = {
  trace: 'trace', debug: 'debug', info: 'info', warning: 'warn', error: 'error', critical: 'fatal',
};

export interface ServeLog {
  info(line: string, fields?: Record<string, unknown>): void;
  /** Lines the operator should see at --log-level warning (flags accepted without effect, random weights). */
  warn(line: string, fields?: Record<string, unknown>): void;
  /** Written whatever the level (a server that cannot start says why). */
  error(line: string, fields?: Record<string, unknown>): void;
  /** A line written whatever the level (where the server listens: scripts wait for it). */
  announce(line: string, fields?: Record<string, unknown>): void;
  /** The logger Fastify uses for the request lines (json mode), or null (text mode: no request lines). */
  requestLogger: Logger | null;
}

export interface ServeLogOptions {
  level?: LogLevel; // the server's own lines below it are not written (default info); errors always are
  httpLevel?: LogLevel; // the request lines' level (vLLM's --uvicorn-log-level, SGLang's --log-level-http; default: level)
}

/** The server's log in the given format; text lines go to `stderr` as before, json lines to `stdout`. */
export function serveLog(format: LogFormat, stdout: Writable, stderr: Writable, options: ServeLogOptions = {}): ServeLog {
  const level = options.level ?? 'info';
  if (format === 'json') {
    const logger = jsonLogger(stdout, level);
    const always = level === 'info' ? logger : jsonLogger(stdout);
    const http = options.httpLevel === undefined || options.httpLevel === level ? logger : jsonLogger(stdout, options.httpLevel);
    return {
      info: (line, fields) => logger.info(fields ?? {}, line),
      warn: (line, fields) => logger.warn(fields ?? {}, line),
      error: (line, fields) => always.error(fields ?? {}, line),
      announce: (line, fields) => always.info(fields ?? {}, line),
      requestLogger: http,
    };
  }
  const write = (line: string): void => { stderr.write(`spindle serve: ${line}\n`); };
  const shown = (at: LogLevel) => (LOG_LEVELS.indexOf(at) >= LOG_LEVELS.indexOf(level) ? write : () => {});
  return { info: shown('info'), warn: shown('warning'), error: write, announce: write, requestLogger: null };
}
