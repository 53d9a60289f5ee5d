// The fast K-quant sub-block searches (test/tooling/gguf/search-q4k.ts, search-q6k.ts: steps skipped by proofs,
// sums tracked in double) against the plain ports of ggml's loops beside them (search-q4k-ref.ts,
// search-q6k-ref.ts): the same levels, scales and mins bit for bit on random rows of many distributions, and so
// the same Q4_K / Q6_K blocks. (gguf-writer.test.ts holds the fast encoders to ggml's own bytes.)
import t from 'tap';
import { Rng } from '../lib/random-model/random.js';
import { quantizeQ4K, quantizeQ6K } from './tooling/gguf/quantize-k.js';
import { makeQkx2Quants } from './tooling/gguf/search-q4k.js';
import { makeQkx2QuantsRef } from './tooling/gguf/search-q4k-ref.js';
import { makeQxQuants } from './tooling/gguf/search-q6k.js';
import { makeQxQuantsRef } from './tooling/gguf/search-q6k-ref.js';

const QK_K = 256;
const ROWS_PER_KIND = 48; // rows of 256 values per distribution

/** Value i of a row from a standard normal g and a uniform u; each kind reaches other branches of the searches. */
const KINDS: Record<string, (g: number, u: number, i: number) => number> = {
  'normal (fixture weights)': (g) => 0.02 * g,
  'unit normal': (g) => g,
  uniform: (_g, u) => 2 * u - 1,
  'all positive (Q4_K min clamps to 0)': (_g, u) => 3 * u + 0.25,
  'all negative': (_g, u) => -3 * u - 0.25,
  'heavy tails': (_g, u) => Math.tan((u - 0.5) * 3.1),
  sparse: (g, u) => (u < 0.85 ? 0 : g),
  'one outlier per 32': (g, _u, i) => (i % 32 === 7 ? 40 * g : 0.1 * g),
  'nearly constant': (g) => 1 + 1e-6 * g,
  'two values': (_g, u) => (u < 0.5 ? -1 : 1),
  'small integers (rounding ties)': (_g, u) => Math.floor(u * 9) - 4,
  'halves (rounding ties)': (_g, u) => (Math.floor(u * 31) - 15) / 2,
  'large offset': (g) => 100 + 0.01 * g,
  'scales 1e-4..1e4 within a block': (g, _u, i) => g * 10 ** (((i >> 4) % 9) - 4),
  'tiny (float32 subnormal range)': (g) => 1e-39 * g,
  'ranges where ggml\'s iscales overflow, or nearly': (g, _u, i) => g * [6e-39, 9e-39, 1.2e-38, 2e-38][(i >> 5) % 4],
  'small scales 1e-15..1e-9 (error terms underflow)': (g, _u, i) => g * 10 ** (-15 + ((i >> 5) % 7)),
  'small integers times 1e-9 (near-exact fits)': (_g, u) => 1e-9 * (Math.floor(u * 9) - 4),
  'huge (block scale overflows half)': (g) => 1e12 * g,
  zeros: () => 0,
};

function rows(kind: string): Float32Array {
  const f = KINDS[kind];
  const n = ROWS_PER_KIND * QK_K;
  const g = new Float32Array(n);
  const rng = new Rng(11, `quant-search ${kind}`);
  rng.fillNormal(g, 1, 0);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = f(g[i], rng.uniform(), i % QK_K);
  return x;
}

/** Q4_K sub-block weights as quantize_row_q4_K_ref computes them (sqrt of the mean square, plus |x|). */
function q4kWeights(x: Float32Array, xo: number, w: Float32Array): void {
  let sumX2 = 0;
  for (let l = 0; l < 32; l++) sumX2 = Math.fround(sumX2 + Math.fround(x[xo + l] * x[xo + l]));
  const avX = Math.fround(Math.sqrt(Math.fround(sumX2 / 32)));
  for (let l = 0; l < 32; l++) w[l] = avX + Math.abs(x[xo + l]);
}

const same = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && Array.from(a).every((v, i) => Object.is(v, b[i]));

t.test('Q4_K search (make_qkx2_quants): fast equals the reference on every sub-block', async (t) => {
  const w = new Float32Array(32);
  const L1 = new Uint8Array(32), L2 = new Uint8Array(32);
  const m1 = new Float32Array(1), m2 = new Float32Array(1);
  for (const kind of Object.keys(KINDS)) {
    const x = rows(kind);
    let bad = 0;
    for (let xo = 0; xo < x.length; xo += 32) {
      q4kWeights(x, xo, w);
      const s1 = makeQkx2Quants(x, xo, w, L1, 0, m1, 0);
      const s2 = makeQkx2QuantsRef(x, xo, w, L2, 0, m2, 0);
      if (!Object.is(Math.fround(s1), Math.fround(s2)) || !same(m1, m2) || !same(L1, L2)) bad++;
    }
    t.equal(bad, 0, `${kind}: ${x.length / 32} sub-blocks`);
  }
});

t.test('Q6_K search (make_qx_quants): fast equals the reference on every sub-block', async (t) => {
  const L1 = new Uint8Array(16), L2 = new Uint8Array(16);
  for (const kind of Object.keys(KINDS)) {
    const x = rows(kind);
    let bad = 0;
    for (let xo = 0; xo < x.length; xo += 16) {
      const s1 = makeQxQuants(x, xo, L1, 0);
      const s2 = makeQxQuantsRef(x, xo, L2, 0);
      if (!Object.is(Math.fround(s1), Math.fround(s2)) || !same(L1, L2)) bad++;
    }
    t.equal(bad, 0, `${kind}: ${x.length / 16} sub-blocks`);
  }
});

t.test('Q4_K and Q6_K blocks: the encoders give the same bytes with either search', async (t) => {
  for (const kind of Object.keys(KINDS)) {
    const x = rows(kind);
    const nb = x.length / QK_K;
    const q4Fast = new Uint8Array(nb * 144), q4Ref = new Uint8Array(nb * 144);
    quantizeQ4K(x, q4Fast);
    quantizeQ4K(x, q4Ref, makeQkx2QuantsRef);
    t.ok(Buffer.from(q4Fast).equals(Buffer.from(q4Ref)), `Q4_K ${kind}`);
    const q6Fast = new Uint8Array(nb * 210), q6Ref = new Uint8Array(nb * 210);
    quantizeQ6K(x, q6Fast);
    quantizeQ6K(x, q6Ref, makeQxQuantsRef);
    t.ok(Buffer.from(q6Fast).equals(Buffer.from(q6Ref)), `Q6_K ${kind}`);
  }
});
