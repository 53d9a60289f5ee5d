// The addon's test-only exports (native/napi/model_debug.cpp, moe_debug.cpp, and grammarMatch /
// mmprojEncodeReference of grammar_wrap.cpp / vision_wrap.cpp), declared once for every test.
// They exist only in a build with the CMake option SPINDLE_TEST_HOOKS, which the dev build turns on
// (`npm run build:native` builds with SPINDLE_BUILD_TESTS=ON); the release prebuild and binding.gyp lack them.
import { loadNative, type NativeAddon } from '../../lib/native.js';

/** debugMoeScores: every MoE layer's expert selection scores, [nLayer, n_tokens, nExpert] row-major. */
export interface MoeScores {
  scores: Float32Array;
  nLayer: number;
  nExpert: number;
  nExpertUsed: number;
}

export interface DebugAddon extends NativeAddon {
  /** Logits of every position of one forward pass over `tokens` in a fresh sequence, [n, n_vocab] row-major. */
  debugForward(path: string, tokens: Int32Array, options?: { threads?: number }): Float32Array;
  debugMoeScores(path: string, tokens: Int32Array, options?: { threads?: number }): MoeScores;
  /** The CPU kernel level the forward pass runs with: 'scalar' | 'avx2' | 'avx512'. */
  debugCpuLevel(): string;
  /** Feeds `input` (as UTF-8) to a fresh matcher of `gbnf`: accepted = a prefix of some sentence; complete = a whole one. */
  grammarMatch(gbnf: string, input: string): { accepted: boolean; complete: boolean };
  /** The plain-loop SigLIP encoder and projector (lfm2 or gemma3) on one image entry (planar normalized RGB): [tokens * nEmbdOut]. */
  mmprojEncodeReference(path: string, pixels: Float32Array, width: number, height: number): Float32Array;
  /** The same through the backend encoder on the CPU backend (threads: 0 = every core). */
  mmprojEncode(path: string, pixels: Float32Array, width: number, height: number, threads?: number): Float32Array;
  /** A whole image (RGB bytes) as the engine encodes it: plan, crops, normalization, backend encoder. */
  encodeImage(path: string, rgb: Uint8Array, width: number, height: number, threads?: number): Float32Array;
}

/** The loaded addon with its test hooks; throws, naming the fix, when the addon was built without them. */
export function debugAddon(): DebugAddon {
  const addon = loadNative() as Partial<DebugAddon>;
  if (typeof addon.debugForward !== 'function') {
    throw new Error('the addon has no test hooks: build it with the CMake option SPINDLE_TEST_HOOKS (npm run build:native)');
  }
  return addon as DebugAddon;
}
