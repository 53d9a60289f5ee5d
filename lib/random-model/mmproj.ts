// A random-weight LFM2-VL mmproj GGUF (llama.cpp's clip conventions, projector "lfm2"), written the way
// convert_hf_to_gguf.py's LFM2-VL path writes one (docs/design/lfm2-vl.md sections 1-2): the keys llama.cpp
// reads, F32 tensors in GGUF order, the 16x16-style learned position grid, optional projector LayerNorm.
// Invariant: the same spec and seed give the same bytes; weights are N(0, std) scaled so activations stay O(1)
// through the encoder (LayerNorm gains near 1, biases small).
import { GgmlType, GgufValueType } from '../gguf/constants.js';
import { GgufWriter } from '../gguf/writer.js';
import { Rng } from './random.js';

export interface MmprojSpec {
  nEmbd: number; // D
  nHead: number;
  nFf: number;
  nLayer: number;
  patchSize: number; // P
  posGrid: number; // G: the position table has G*G rows
  scaleFactor: number; // s
  projHidden: number; // H
  textEmbd: number; // E: the text model's n_embd
  projectorNorm?: boolean; // mm.input_norm.* (default true)
  seed: number;
}

/** Tensor names and GGUF shapes of `spec`, in file order. */
export function mmprojTensors(spec: MmprojSpec): { name: string; ne: number[]; std: number; mean?: number }[] {
  const { nEmbd: D, nFf: F, patchSize: P, posGrid: G, scaleFactor: S, projHidden: H, textEmbd: E } = spec;
  const t: { name: string; ne: number[]; std: number; mean?: number }[] = [
    { name: 'v.patch_embd.weight', ne: [P, P, 3, D], std: 1 / Math.sqrt(P * P * 3) },
    { name: 'v.patch_embd.bias', ne: [D], std: 0.02 },
    { name: 'v.position_embd.weight', ne: [D, G * G], std: 0.5 },
  ];
  for (let i = 0; i < spec.nLayer; i++) {
    const b = `v.blk.${i}.`;
    for (const n of ['attn_q', 'attn_k', 'attn_v', 'attn_out']) {
      t.push({ name: `${b}${n}.weight`, ne: [D, D], std: 1 / Math.sqrt(D) }, { name: `${b}${n}.bias`, ne: [D], std: 0.02 });
    }
    for (const n of ['ln1', 'ln2']) t.push({ name: `${b}${n}.weight`, ne: [D], std: 0.1, mean: 1 }, { name: `${b}${n}.bias`, ne: [D], std: 0.02 });
    t.push({ name: `${b}ffn_up.weight`, ne: [D, F], std: 1 / Math.sqrt(D) }, { name: `${b}ffn_up.bias`, ne: [F], std: 0.02 });
    t.push({ name: `${b}ffn_down.weight`, ne: [F, D], std: 1 / Math.sqrt(F) }, { name: `${b}ffn_down.bias`, ne: [D], std: 0.02 });
  }
  t.push({ name: 'v.post_ln.weight', ne: [D], std: 0.1, mean: 1 }, { name: 'v.post_ln.bias', ne: [D], std: 0.02 });
  const Dm = D * S * S;
  if (spec.projectorNorm !== false) {
    t.push({ name: 'mm.input_norm.weight', ne: [Dm], std: 0.1, mean: 1 }, { name: 'mm.input_norm.bias', ne: [Dm], std: 0.02 });
  }
  t.push({ name: 'mm.1.weight', ne: [Dm, H], std: 1 / Math.sqrt(Dm) }, { name: 'mm.1.bias', ne: [H], std: 0.02 });
  t.push({ name: 'mm.2.weight', ne: [H, E], std: 1 / Math.sqrt(H) }, { name: 'mm.2.bias', ne: [E], std: 0.02 });
  return t;
}

/** Writes the mmproj to `path`; returns its size in bytes. */
export async function writeMmproj(path: string, spec: MmprojSpec): Promise<number> {
  const w = new GgufWriter();
  w.addString('general.architecture', 'clip');
  w.addString('general.type', 'mmproj');
  w.addBool('clip.has_vision_encoder', true);
  w.addString('clip.projector_type', 'lfm2');
  w.addUint32('clip.vision.embedding_length', spec.nEmbd);
  w.addUint32('clip.vision.attention.head_count', spec.nHead);
  w.addUint32('clip.vision.feed_forward_length', spec.nFf);
  w.addUint32('clip.vision.block_count', spec.nLayer);
  w.addUint32('clip.vision.projection_dim', spec.textEmbd);
  w.addFloat32('clip.vision.attention.layer_norm_epsilon', 1e-6);
  w.addUint32('clip.vision.image_size', 256);
  w.addUint32('clip.vision.patch_size', spec.patchSize);
  w.addArray('clip.vision.image_mean', GgufValueType.FLOAT32, [0.5, 0.5, 0.5]);
  w.addArray('clip.vision.image_std', GgufValueType.FLOAT32, [0.5, 0.5, 0.5]);
  w.addBool('clip.use_gelu', true);
  w.addUint32('clip.vision.projector.scale_factor', spec.scaleFactor);
  const plan = mmprojTensors(spec);
  for (const t of plan) w.addTensor(t.name, t.ne, GgmlType.F32);
  return w.writeFile(path, (info, i) => {
    const n = info.ne.reduce((a, b) => a * b, 1);
    const values = new Float32Array(n);
    new Rng(spec.seed, info.name).fillNormal(values, plan[i].std, plan[i].mean ?? 0);
    return new Uint8Array(values.buffer);
  });
}
