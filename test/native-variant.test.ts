// Which prebuilt addon lib/native.ts loads (cudaPrebuild): the CUDA one beside the CPU one only on a machine with
// an NVIDIA driver, or when SPINDLE_NATIVE_VARIANT says 'cuda'; 'cpu' keeps the CPU one; a bad value is an error
// naming the allowed ones; no CUDA prebuild in the package: the CPU one.
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cudaPrebuild, prebuildLibc } from '../lib/native.js';

const pkg = mkdtempSync(join(tmpdir(), 'spindle-variant-'));
t.teardown(() => rmSync(pkg, { recursive: true, force: true }));
const libc = prebuildLibc();
const name = ['spindle', libc, 'node'].filter(Boolean).join('.');
const cudaDir = join(pkg, 'prebuilds', `${process.platform}-${process.arch}-cuda`);
const yes = () => true;
const no = () => false;

t.test('no CUDA prebuild in the package: the CPU one, whatever the machine', async (t) => {
  t.equal(cudaPrebuild(pkg, {}, yes), null);
  t.equal(cudaPrebuild(pkg, { SPINDLE_NATIVE_VARIANT: 'cuda' }, yes), null);
});

t.test('with a CUDA prebuild: loaded where the driver is, or when asked for', async (t) => {
  mkdirSync(cudaDir, { recursive: true });
  writeFileSync(join(cudaDir, name), '');
  if (libc) writeFileSync(join(cudaDir, `spindle.${libc === 'glibc' ? 'musl' : 'glibc'}.node`), ''); // the other libc's: never
  t.equal(cudaPrebuild(pkg, {}, yes), join(cudaDir, name), 'an NVIDIA driver: the CUDA addon');
  t.equal(cudaPrebuild(pkg, {}, no), null, 'no driver: the CPU addon');
  t.equal(cudaPrebuild(pkg, { SPINDLE_NATIVE_VARIANT: 'cuda' }, no), join(cudaDir, name), "'cuda' forces it");
  t.equal(cudaPrebuild(pkg, { SPINDLE_NATIVE_VARIANT: 'cpu' }, yes), null, "'cpu' keeps the CPU addon");
  t.throws(() => cudaPrebuild(pkg, { SPINDLE_NATIVE_VARIANT: 'gpu' }, yes), /SPINDLE_NATIVE_VARIANT must be 'cpu' or 'cuda' \(got 'gpu'\)/);
});
