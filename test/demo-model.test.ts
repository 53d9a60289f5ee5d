// The built-in demo model (lib/demo-model.ts) is written by the package's own minimal generator
// (lib/random-model, Q8_0: no K-quant search); it must be the very file the test fixtures' generator
// (test/tooling/fixtures) makes for the same Llama, so the demo is a fixture like any other.
import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO_MODEL_NAME, DEMO_SPEC, demoModelPath, writeDemoModel } from '../lib/demo-model.js';
import { generateModel } from './tooling/fixtures/index.js';

t.test('the demo model equals the fixture generator\'s Q8_0 Llama, byte for byte', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'spindle-demo-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const demo = join(dir, 'demo.gguf');
  const fixture = join(dir, 'fixture.gguf');
  await writeDemoModel(demo);
  const { spec, tensors } = await generateModel({
    arch: 'llama', tokenizer: 'llama3', weights: 'Q8_0', seed: 7, tiedEmbeddings: true, name: DEMO_MODEL_NAME,
    nEmbd: DEMO_SPEC.nEmbd, nLayer: DEMO_SPEC.nLayer, nHead: DEMO_SPEC.nHead, nHeadKv: DEMO_SPEC.nHeadKv, nFf: DEMO_SPEC.nFf,
  }, fixture);
  t.match(spec, { headDim: DEMO_SPEC.headDim, ropeFreqBase: DEMO_SPEC.ropeFreqBase, rmsNormEps: DEMO_SPEC.rmsNormEps, contextLength: DEMO_SPEC.contextLength });
  t.same([...new Set(tensors.map((x) => x.type))].sort(), ['F32', 'Q8_0'], 'only F32 and Q8_0 tensors');
  const hash = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
  t.equal(hash(demo), hash(fixture), 'same bytes');
});

t.test('the demo model is cached under SPINDLE_CACHE_DIR with a name keyed by its content', async (t) => {
  const p = demoModelPath({ SPINDLE_CACHE_DIR: '/x' });
  t.match(p, /^\/x\/spindle-demo-llama3-q8_0-[0-9a-f]{12}\.gguf$/);
  t.equal(demoModelPath({ SPINDLE_CACHE_DIR: '/x' }), p, 'stable');
});
