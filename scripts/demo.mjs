#!/usr/bin/env node
// `npm run demo [-- model.gguf]`: offline batched chat with Spindle's LLM API (vLLM's `LLM.chat`).
// With no model argument it uses the built-in demo model of `spindle serve` (lib/demo-model.ts: a small
// random-weight Llama with the real Llama 3 tokenizer and chat template, generated once and cached), because no
// model can be downloaded here. Random weights give fluent-looking nonsense; a real GGUF file gives real answers.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
if (!existsSync(join(root, 'dist', 'index.js'))) {
  console.error('spindle: dist/ is missing; run `npm install` (or `npm run build`) first');
  process.exit(1);
}
const { LLM } = await import('../dist/index.js');

const { demoModel } = await import('../dist/demo-model.js');
const model = process.argv[2] ?? (await demoModel((line) => console.log(`spindle: ${line}`)));
const llm = new LLM({ model });
await llm.ready();
const conversations = [
  [{ role: 'user', content: 'Write a haiku about spindles.' }],
  [{ role: 'system', content: 'You answer in one sentence.' }, { role: 'user', content: 'What is a GGUF file?' }],
  [{ role: 'user', content: 'Count from one to five.' }],
];
const t0 = performance.now();
const outs = await llm.chat(conversations, { temperature: 0.7, topP: 0.95, seed: 1, maxTokens: 48 });
const seconds = (performance.now() - t0) / 1000;
let generated = 0;
for (const [i, out] of outs.entries()) {
  const o = out.outputs[0];
  generated += o.tokenIds.length;
  console.log(`\n[${i}] ${conversations[i].at(-1).content}\n    -> ${JSON.stringify(o.text)} (${o.tokenIds.length} tokens, ${o.finishReason})`);
}
console.log(`\nspindle: ${generated} tokens in ${seconds.toFixed(2)} s (${(generated / seconds).toFixed(1)} tok/s) from ${model}`);
await llm.close();
