// Where a `spindle` subcommand writes: its stdout and stderr (the process's, or buffers in tests). Shared by
// the dispatcher (cli/commands.ts, cli/dispatch.ts) and the command modules it loads lazily (server/command.ts,
// bench/offline/command.ts, bench/serve/command.ts), so that no command module imports the dispatcher's table.
import type { Writable } from 'node:stream';

export interface CommandIo {
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
}
