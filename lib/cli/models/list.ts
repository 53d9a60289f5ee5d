// `spindle list` (ls): the store's models, newest first, as `ollama list` prints them: NAME, ID (the first 12
// hex digits of the model blob's sha256), SIZE, MODIFIED.
import type { CommandIo } from '../io.js';
import { humanAge, humanSize, openStore, table } from './common.js';

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    io.stdout.write('Usage: spindle list\n\nLists the models in the store (SPINDLE_HOME, default ~/.spindle).\n');
    return 0;
  }
  const rows = [['NAME', 'ID', 'SIZE', 'MODIFIED']];
  for (const e of openStore().list()) {
    const id = 'digest' in e.manifest.model ? e.manifest.model.digest.slice(7, 19) : 'hf-cache';
    rows.push([e.manifest.name, id, humanSize(e.size), humanAge(e.modifiedAt)]);
  }
  io.stdout.write(table(rows));
  return 0;
}
