#!/usr/bin/env node
// Speculative decoding's bounds on one sequence (issue 17 (d)). The fixture models have random weights, so natural
// acceptance rates mean nothing here; what can be measured is the mechanism: decode tokens/s of one greedy
// sequence (first output token -> last, streamed) when
//   plain      no drafts (speculative: false);
//   predicted  `prediction` = the request's own earlier greedy output: every draft is accepted;
//   edited     the same with every 20th token replaced: a draft rejected now and then, as in an edit;
//   miss       a prediction of unrelated tokens: the output is nowhere in it, nothing is drafted;
//   half       the output with every other token replaced: drafts are proposed and rejected (a worst case);
//   draft      a tiny random draft model (llama-draft-tiny-q8_0, same vocabulary): its drafts miss, so this is
//              what a draft model costs when it is no help;
//   ngram      n-gram (prompt lookup) drafts for a prompt that repeats itself while the output does not
//              follow it: lookups find drafts that mostly miss.
// Every run's tokens are checked against plain decoding's. Reported beside the bandwidth floor of plain decoding
// (bandwidth / bytes a decoded token reads), which only speculation can pass.
// Usage: node bench/speculation.mjs [--model llama1b-q4_k_m] [--threads 2] [--tokens 128] [--k 16] [--reps 3]
//        [--modes plain,predicted,...]
import { statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Engine } from '../dist/index.js';
import { decodeBytesPerToken, readModelFileInfo } from '../dist/gguf/file-info.js';
import { measureBandwidth, median, modelPath, promptIds } from './common.mjs';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: 'llama1b-q4_k_m' },
    threads: { type: 'string', default: '2' },
    tokens: { type: 'string', default: '128' },
    k: { type: 'string', default: '16' },
    reps: { type: 'string', default: '3' },
    modes: { type: 'string' }, // comma-separated subset (default: all)
  },
});
const threads = Number(args.threads), nTokens = Number(args.tokens), k = Number(args.k), reps = Number(args.reps);
const path = await modelPath(args.model);
const draftPath = await modelPath('llama-draft-tiny-q8_0');

const greedy = { temperature: 0, ignoreEos: true, maxNewTokens: nTokens + 1 };
const prompt = promptIds(32, 3);
const repeating = [...promptIds(16, 4), ...promptIds(16, 4), ...promptIds(16, 4), ...promptIds(16, 4)];

// One streamed request: its tokens and decode tokens/s from its first token to its last.
async function decode(engine, inputIds, extra) {
  const ids = [];
  let tFirst = 0;
  for await (const chunk of engine.generate({ inputIds, samplingParams: { ...greedy, ...extra }, stream: true })) {
    if (ids.length === 0 && chunk.outputIds.length > 0) tFirst = performance.now();
    ids.push(...chunk.outputIds);
  }
  return { ids, tps: (ids.length - 1) / ((performance.now() - tFirst) / 1000) };
}

const plainEngine = new Engine({ modelPath: path, threads, speculativeConfig: { numSpeculativeTokens: k } });
const ngramEngine = new Engine({ modelPath: path, threads, speculativeConfig: { method: 'ngram', numSpeculativeTokens: k } });
const draftEngine = new Engine({ modelPath: path, threads, speculativeConfig: { model: draftPath, numSpeculativeTokens: k } });
await Promise.all([plainEngine.ready(), ngramEngine.ready(), draftEngine.ready()]);
const reference = (await decode(plainEngine, prompt, { speculative: false })).ids;
const referenceRepeating = (await decode(plainEngine, repeating, { speculative: false })).ids;
const edited = reference.map((t, i) => (i % 20 === 19 ? 1000 + ((t * 31) % 20000) : t));
const unrelated = promptIds(nTokens + 1, 99);
const half = reference.map((t, i) => (i % 2 === 1 ? 1000 + ((t * 31) % 20000) : t));

const allModes = {
  plain: () => decode(plainEngine, prompt, { speculative: false }),
  predicted: () => decode(plainEngine, prompt, { prediction: { tokenIds: reference } }),
  edited: () => decode(plainEngine, prompt, { prediction: { tokenIds: edited } }),
  miss: () => decode(plainEngine, prompt, { prediction: { tokenIds: unrelated } }),
  half: () => decode(plainEngine, prompt, { prediction: { tokenIds: half } }),
  draft: () => decode(draftEngine, prompt, {}),
  'ngram plain': () => decode(plainEngine, repeating, { speculative: false }),
  ngram: () => decode(ngramEngine, repeating, {}),
};
const modes = Object.fromEntries(Object.entries(allModes).filter(([m]) => !args.modes || args.modes.split(',').includes(m)));
const want = { plain: reference, predicted: reference, edited: reference, miss: reference, half: reference, draft: reference, 'ngram plain': referenceRepeating, ngram: referenceRepeating };
const figures = Object.fromEntries(Object.keys(modes).map((m) => [m, []]));
const acceptance = {};
for (let r = 0; r < reps; r++) {
  for (const mode of r % 2 === 0 ? Object.keys(modes) : Object.keys(modes).reverse()) {
    const engine = mode === 'ngram' ? ngramEngine : mode === 'draft' ? draftEngine : plainEngine;
    const before = engine.stats();
    const { ids, tps } = await modes[mode]();
    const after = engine.stats();
    if (JSON.stringify(ids) !== JSON.stringify(want[mode])) throw new Error(`${mode}: tokens differ from plain decoding`);
    figures[mode].push(tps);
    acceptance[mode] = `${after.specAcceptedTokens - before.specAcceptedTokens} of ${after.specDraftTokens - before.specDraftTokens}`;
  }
}
await Promise.all([plainEngine.shutdown(), ngramEngine.shutdown(), draftEngine.shutdown()]);

const gbps = measureBandwidth(threads);
const floor = (gbps * 1e9) / decodeBytesPerToken(readModelFileInfo(path));
const plain = median(figures.plain ?? []), ngramPlain = median(figures['ngram plain'] ?? []);
console.log(`${args.model} (${(statSync(path).size / 1e6).toFixed(0)} MB), ${threads} threads, ${nTokens} tokens, k = ${k}, ` +
  `median of ${reps}; bandwidth ${gbps.toFixed(1)} GB/s -> plain decode floor ${floor.toFixed(1)} tok/s`);
console.log('| mode | decode tok/s | vs plain | % of the plain floor | drafts accepted (last run) | tokens |');
console.log('|---|---|---|---|---|---|');
for (const mode of Object.keys(modes)) {
  const tps = median(figures[mode]);
  const base = mode.startsWith('ngram') ? ngramPlain : plain;
  console.log(`| ${mode} | ${tps.toFixed(1)} | ${(tps / base).toFixed(2)}x | ${((100 * tps) / floor).toFixed(0)}% | ` +
    `${acceptance[mode] ?? '-'} | same as plain |`);
}
