// The `spindle` command dispatcher: picks the longest registered command whose words start argv, and
// hands it the rest; prints the command list for --help, a bare group ('spindle bench') or a typo.
// Invariant: returns an exit code (0 ok, 2 usage error) and never calls process.exit itself.
import { spindleVersion } from '../version.js';
import { COMMANDS, type CommandEntry } from './commands.js';
import type { CommandIo } from './io.js';


/** Leading argv words that are not flags. */
function words(argv: string[]): string[] {
  const out: string[] = [];
  for (const a of argv) {
    if (a.startsWith('-')) break;
    out.push(a);
  }
  return out;
}

export function usage(prefix: string[] = [], commands: CommandEntry[] = COMMANDS): string {
  const list = commands.filter((c) => prefix.every((w, i) => c.name.split(' ')[i] === w));
  const width = Math.max(...list.map((c) => c.name.length), 0);
  const lines = [`Usage: spindle ${prefix.length ? prefix.join(' ') + ' ' : ''}<command> [flags]`, '', 'Commands:'];
  for (const c of list) lines.push(`  spindle ${c.name.padEnd(width)}  ${c.summary}`);
  lines.push('', 'Run `spindle <command> --help` for its flags.', '');
  return lines.join('\n');
}

/** Longest registered command matching the leading words of argv. */
export function findCommand(argv: string[], commands: CommandEntry[] = COMMANDS): { entry: CommandEntry; rest: string[] } | null {
  const w = words(argv);
  let best: CommandEntry | null = null;
  for (const c of commands) {
    const parts = c.name.split(' ');
    if (parts.length <= w.length && parts.every((p, i) => p === w[i]) && (!best || parts.length > best.name.split(' ').length)) best = c;
  }
  return best ? { entry: best, rest: argv.slice(best.name.split(' ').length) } : null;
}

export async function runCli(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr },
  commands: CommandEntry[] = COMMANDS): Promise<number> {
  if (argv[0] === '--version' || argv[0] === '-V') {
    io.stdout.write(`spindle ${spindleVersion()}\n`);
    return 0;
  }
  const found = findCommand(argv, commands);
  if (found) {
    const mod = await found.entry.load();
    return mod.main(found.rest, io);
  }
  const w = words(argv);
  const help = argv.includes('--help') || argv.includes('-h');
  const isGroup = w.length > 0 && commands.some((c) => w.every((x, i) => c.name.split(' ')[i] === x));
  if (help || argv.length === 0) {
    (help ? io.stdout : io.stderr).write(usage(isGroup ? w : [], commands));
    return help ? 0 : 2;
  }
  const what = isGroup ? `'spindle ${w.join(' ')}' needs a subcommand` : `unknown command '${w.join(' ') || argv[0]}'`;
  io.stderr.write(`spindle: ${what}\n\n${usage(isGroup ? w : [], commands)}`);
  return 2;
}
