// `spindle rm <name>...`: removes names from the store, and the blobs no other name uses.
import type { CommandIo } from '../io.js';
import { openStore, reportError, storeKeys } from './common.js';

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  const names = argv.filter((a) => !a.startsWith('-'));
  if (argv.includes('-h') || argv.includes('--help') || names.length === 0) {
    (names.length === 0 && !argv.includes('-h') && !argv.includes('--help') ? io.stderr : io.stdout).write('Usage: spindle rm <model>...\n');
    return names.length === 0 && !argv.includes('-h') && !argv.includes('--help') ? 2 : 0;
  }
  const store = openStore();
  let code = 0;
  for (const name of names) {
    try {
      const key = storeKeys(name).find((k) => store.read(k) !== null);
      if (!key) {
        io.stderr.write(`spindle rm: model '${name}' not found\n`);
        code = 1;
        continue;
      }
      store.remove(key);
      io.stdout.write(`deleted '${name}'\n`);
    } catch (e) {
      code = reportError(e, io, 'rm');
    }
  }
  return code;
}
