#!/usr/bin/env node
// The `spindle` binary (package.json "bin"): runs the dispatcher and exits with its code.
// Invariant: the only place that sets the exit code; subcommands are registered in ./commands.ts.
import { runCli } from './dispatch.js';

runCli(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e: unknown) => {
    process.stderr.write(`spindle: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
