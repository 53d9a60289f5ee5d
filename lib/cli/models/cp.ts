// `spindle cp <source> <destination>`: a new name for a model of the store (its blobs are shared).
import { parseModelRef, ModelRefError } from '../../models/ref.js';
import { localKey } from '../../models/store.js';
import type { CommandIo } from '../io.js';
import { openStore, reportError, storeKeys } from './common.js';

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help') || argv.length !== 2) {
    (argv.length !== 2 ? io.stderr : io.stdout).write('Usage: spindle cp <source> <destination>\n');
    return argv.length !== 2 ? 2 : 0;
  }
  try {
    const store = openStore();
    const from = storeKeys(argv[0]).map((k) => store.read(k)).find((m) => m !== null);
    if (!from) throw new ModelRefError(`model '${argv[0]}' not found`);
    const dst = parseModelRef(argv[1]);
    if (dst.kind !== 'name') throw new ModelRefError(`'${argv[1]}' is not a valid model name (<name>[:<tag>] or <namespace>/<name>[:<tag>])`);
    const { external: _external, ...copied } = from; // a copy is the store's own, even of Ollama's model
    store.write(localKey(dst.namespace, dst.name, dst.tag), { ...copied, name: `${dst.namespace ? `${dst.namespace}/` : ''}${dst.name}:${dst.tag}`, createdAt: new Date().toISOString() });
    io.stdout.write(`copied '${argv[0]}' to '${argv[1]}'\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, 'cp');
  }
}
