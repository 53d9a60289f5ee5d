// MoE fixture specs (test/tooling/fixtures/arch-moe.ts): qwen3moe's tensor table and metadata as llama.cpp loads them,
// the Q4_K_M type mix of the expert tensors (llama-quant.cpp), and spec validation.
import t from 'tap';
import { archMetadata, resolveSpec, tensorPlan, type ModelSpec } from './tooling/fixtures/index.js';
import { GgmlType } from '../lib/gguf/constants.js';

const BASE: ModelSpec = { arch: 'qwen3moe', tokenizer: 'qwen3', weights: 'F32', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2,
  nFf: 128, nExpert: 16, nExpertUsed: 4, nFfExp: 64, seed: 1 };

t.test('qwen3moe tensor table: router and stacked experts instead of the dense FFN, qwen3 q/k norms', async (t) => {
  const plan = tensorPlan(resolveSpec(BASE), 1000);
  const byName = new Map(plan.map((p) => [p.name, p]));
  for (const l of [0, 1]) {
    t.same(byName.get(`blk.${l}.ffn_gate_inp.weight`)?.ne, [64, 16]);
    t.same(byName.get(`blk.${l}.ffn_gate_exps.weight`)?.ne, [64, 64, 16]);
    t.same(byName.get(`blk.${l}.ffn_up_exps.weight`)?.ne, [64, 64, 16]);
    t.same(byName.get(`blk.${l}.ffn_down_exps.weight`)?.ne, [64, 64, 16]);
    t.ok(byName.has(`blk.${l}.attn_q_norm.weight`) && byName.has(`blk.${l}.attn_k_norm.weight`));
    t.notOk(byName.has(`blk.${l}.ffn_gate.weight`) || byName.has(`blk.${l}.ffn_up.weight`) || byName.has(`blk.${l}.ffn_down.weight`));
  }
  const meta = new Map(archMetadata(resolveSpec(BASE), 1000).map((e) => [e.key, e.value]));
  t.equal(meta.get('qwen3moe.expert_count'), 16);
  t.equal(meta.get('qwen3moe.expert_used_count'), 4);
  t.equal(meta.get('qwen3moe.expert_feed_forward_length'), 64);
  t.equal(meta.get('qwen3moe.attention.key_length'), 16);
});

t.test('qwen3moe Q4_K_M: router stays F32, experts follow the ffn rules (ffn_down_exps Q6_K where use_more_bits)', async (t) => {
  const spec = resolveSpec({ ...BASE, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, nFfExp: 256 });
  const type = new Map(tensorPlan(spec, 1000).map((p) => [p.name, p.type]));
  t.equal(type.get('blk.0.ffn_gate_inp.weight'), GgmlType.F32);
  t.equal(type.get('blk.0.ffn_gate_exps.weight'), GgmlType.Q4_K);
  t.equal(type.get('blk.0.ffn_up_exps.weight'), GgmlType.Q4_K);
  t.equal(type.get('blk.0.ffn_down_exps.weight'), GgmlType.Q4_K); // layer 0 of 2: not use_more_bits
  t.equal(type.get('blk.1.ffn_down_exps.weight'), GgmlType.Q6_K); // layer 1 of 2: 1 >= 7 * 2 / 8
  t.equal(type.get('blk.1.attn_v.weight'), GgmlType.Q6_K);
});

t.test('MoE spec validation', async (t) => {
  t.equal(resolveSpec({ ...BASE, nFfExp: undefined }).nFfExp, 32, 'nFfExp defaults to nFf / nExpertUsed');
  t.equal(resolveSpec({ ...BASE, arch: 'qwen3', nExpert: undefined, nExpertUsed: undefined, nFfExp: undefined }).nExpert, 0);
  t.throws(() => resolveSpec({ ...BASE, nExpert: undefined }), /nExpert must be an integer in \[2, 1024\]/);
  t.throws(() => resolveSpec({ ...BASE, nExpertUsed: 17 }), /nExpertUsed must be an integer in \[1, 16\]/);
  t.throws(() => resolveSpec({ ...BASE, arch: 'qwen3' }), /only for MoE architectures/);
  t.throws(() => resolveSpec({ ...BASE, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, nFfExp: 48 }), /nFfExp = 48 must be a multiple of 32/);
  t.throws(() => resolveSpec({ ...BASE, weights: 'Q4_K_M', nEmbd: 256, nFf: 512, nFfExp: 256, nExpert: 8 }), /8-expert rules/);
});
