// The environment variables `spindle serve` reads as defaults for its flags (what containers and platforms set):
//   SPINDLE_MODEL       the model, when none is given as an argument or with --model (ignored with --ollama)
//   SPINDLE_API_KEY     --api-key (one key; vLLM's VLLM_API_KEY when SPINDLE_API_KEY is not set)
//   SPINDLE_ROOT_PATH   --root-path
//   SPINDLE_LOG_FORMAT  --log-format
//   SPINDLE_HOST        the address (host-env.ts; also turns on runner mode when no model is given)
// Precedence, as vLLM's `--api-key` over VLLM_API_KEY and every 12-factor CLI: a flag given on the command line
// wins; else the variable, when set and not empty; else the default. So an image's CMD can carry flags and a
// deployment's env fills in what the CMD leaves out; to let the env decide, leave the flag out of the CMD.
// Invariant: a variable is read only where its flag is absent, and a bad value is an error naming the variable.
import { parseLogFormat, type LogFormat } from './log-format.js';
import { parseRootPath } from './root-path.js';

/** The variable's value when set and not blank, else undefined. */
function envValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v !== undefined && v.trim() !== '' ? v.trim() : undefined;
}

/** --api-key values, else SPINDLE_API_KEY (else vLLM's VLLM_API_KEY) as the one key, else none. */
export function apiKeysFrom(flags: string[] | undefined, env: NodeJS.ProcessEnv): string[] {
  if (flags !== undefined) return flags;
  const key = envValue(env, 'SPINDLE_API_KEY') ?? envValue(env, 'VLLM_API_KEY');
  return key === undefined ? [] : [key];
}

/** --root-path, else SPINDLE_ROOT_PATH, else none (''); normalized, or an error naming its source. */
export function rootPathFrom(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  if (flag !== undefined) return parseRootPath(flag, '--root-path');
  const v = envValue(env, 'SPINDLE_ROOT_PATH');
  return v === undefined ? '' : parseRootPath(v, 'SPINDLE_ROOT_PATH');
}

/** --log-format, else SPINDLE_LOG_FORMAT, else 'text'. */
export function logFormatFrom(flag: string | undefined, env: NodeJS.ProcessEnv): LogFormat {
  if (flag !== undefined) return parseLogFormat(flag, '--log-format');
  const v = envValue(env, 'SPINDLE_LOG_FORMAT');
  return v === undefined ? 'text' : parseLogFormat(v, 'SPINDLE_LOG_FORMAT');
}

/** The model of the command line, else SPINDLE_MODEL (not in runner mode, which serves the store's models). */
export function modelFrom(given: string | undefined, ollama: boolean, env: NodeJS.ProcessEnv): string | undefined {
  if (given !== undefined || ollama) return given;
  return envValue(env, 'SPINDLE_MODEL');
}
