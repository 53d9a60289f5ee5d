#!/usr/bin/env node
// `npm start [model.gguf]`: offline batched chat with Spindle's LLM API.
// With no model argument it builds the built-in default first: a small random-weight Llama model with the real
// Llama 3 tokenizer and chat template (Q8_0, ~150 MB, cached in .cache/), because no model can be downloaded
// here. Random weights give fluent-looking nonsense; a real GGUF file gives real answers.
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
if (!existsSync(join(root, 'dist', 'index.js'))) {
  console.error('spindle: dist/ is missing; run `npm install` (or `npm run build`) first');
  process.exit(1);
}
const { LLM } = await import('../dist/index.js');

async function defaultModel() {
  const path = join(root, '.cache', 'demo-llama3-q8_0.gguf');
  if (existsSync(path)) return path;
  const { generateModel } = await import('../dist/fixtures/index.js');
  mkdirSync(dirname(path), { recursive: true });
  console.log(`spindle: building the default demo model at ${path} (random weights, Llama 3 tokenizer)...`);
  const spec = {
    arch: 'llama', tokenizer: 'llama3', weights: 'Q8_0', seed: 7, tiedEmbeddings: true,
    nEmbd: 512, nLayer: 4, nHead: 8, nHeadKv: 4, nFf: 1536, name: 'spindle-demo',
  };
  await generateModel(spec, path + '.tmp');
  renameSync(path + '.tmp', path);
  return path;
}

const model = process.argv[2] ?? (await defaultModel());
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
