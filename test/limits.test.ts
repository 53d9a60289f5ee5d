// The one limits table (native/engine/limits.h, the addon's `limits` export): for every entry, a value just
// outside its range is refused by the TypeScript normalizer and by the addon itself (which uses the engine's
// check), both with the entry's own range text, and the boundary value is accepted by both. So a limit changed
// in the table moves every check and every message with it.
import t from 'tap';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { loadNative, nativeLimits, type NativeParamLimit } from '../lib/native.js';
import { normalizeSamplingParams } from '../lib/sampling-params.js';

const ENGINE_OPTIONS = new Set(['maxModelLen', 'maxNumSeqs', 'maxNumBatchedTokens', 'chunkedPrefillSize', 'threads']);
// speculativeConfig's numbers: the limit's name -> the keys it checks (nested under speculativeConfig in TypeScript)
const SPECULATIVE: Record<string, string[]> = {
  numSpeculativeTokens: ['numSpeculativeTokens'], 'promptLookupMin / promptLookupMax': ['promptLookupMin', 'promptLookupMax'],
};

// A value the entry refuses, just outside its lower bound (or between integers).
function outside(l: NativeParamLimit): number {
  if (l.minExclusive) return l.min;
  const below = l.min - 1;
  return l.special === below ? (l.integer ? l.min + 0.5 : l.min - 2) : below;
}
const inside = (l: NativeParamLimit): number => (l.minExclusive ? l.min + (l.integer ? 1 : 0.5) : l.min);

function messageOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  return '(no error)';
}

t.test('every limit is checked with its own range text, in TypeScript and in the addon', async (t) => {
  const limits = nativeLimits();
  const { NativeEngine } = loadNative();
  const engine = new NativeEngine('/nonexistent.gguf', {}, () => {});  // submit converts the spec before anything else
  t.teardown(() => engine.close({ drain: false }));
  const names = Object.keys(limits.params);
  t.ok(names.length >= 15, 'the table covers the sampling parameters and engine options');
  for (const name of names) {
    const l = limits.params[name];
    const bad = outside(l);
    const expected = `${name} must be ${l.range} (got `;
    if (ENGINE_OPTIONS.has(name)) {
      t.match(messageOf(() => normalizeEngineOptions({ model: 'm.gguf', [name]: bad }, 'LLM')), `LLM: ${expected}`, `${name}: normalizer`);
      t.match(messageOf(() => new NativeEngine('/nonexistent.gguf', { [name]: bad }, () => {})), expected, `${name}: addon`);
      t.doesNotThrow(() => normalizeEngineOptions({ model: 'm.gguf', [name]: inside(l) }, 'LLM'), `${name}: ${inside(l)} accepted`);
    } else if (SPECULATIVE[name]) {
      for (const key of SPECULATIVE[name]) {
        const config = (v: number) => ({ model: 'm.gguf', speculativeConfig: { [key]: v, ...(key === 'promptLookupMin' ? { promptLookupMax: 64 } : { promptLookupMin: 1 }) } });
        t.match(messageOf(() => normalizeEngineOptions(config(bad), 'LLM')), `LLM: speculativeConfig.${key} must be ${l.range} (got `, `${key}: normalizer`);
        t.match(messageOf(() => new NativeEngine('/nonexistent.gguf', { [key]: bad }, () => {})), expected, `${key}: addon`);
        t.doesNotThrow(() => normalizeEngineOptions(config(inside(l)), 'LLM'), `${key}: ${inside(l)} accepted`);
      }
    } else if (name === 'logitBias') {  // the range of each value of the map
      t.match(messageOf(() => normalizeSamplingParams({ logitBias: { 5: bad } })), `logitBias[5] must be ${l.range} (got `, `${name}: normalizer`);
      t.match(messageOf(() => engine.submit({ promptTokenIds: [1], logitBias: [[5, bad]] })), expected, `${name}: addon`);
      t.same(normalizeSamplingParams({ logitBias: { 5: inside(l) } }).logitBias, [[5, inside(l)]], `${name}: ${inside(l)} accepted`);
    } else {
      t.match(messageOf(() => normalizeSamplingParams({ [name]: bad })), expected, `${name}: normalizer`);
      t.match(messageOf(() => engine.submit({ promptTokenIds: [1], [name]: bad })), expected, `${name}: addon`);
      t.equal(normalizeSamplingParams({ [name]: inside(l), ...(name === 'minTokens' ? { maxTokens: 1 } : {}) })[name as 'temperature'], inside(l), `${name}: ${inside(l)} accepted`);
    }
  }
});

t.test('counts come from the table too', async (t) => {
  const { maxStopStrings, maxStopStringBytes, maxStopTokenIds, maxLogprobs } = nativeLimits();
  t.match(messageOf(() => normalizeSamplingParams({ stop: new Array(maxStopStrings + 1).fill('x') })), `at most ${maxStopStrings} strings`);
  t.doesNotThrow(() => normalizeSamplingParams({ stop: new Array(maxStopStrings).fill('x') }));
  t.match(messageOf(() => normalizeSamplingParams({ stop: ['a'.repeat(maxStopStringBytes + 1)] })), `at most ${maxStopStringBytes} bytes`);
  t.match(messageOf(() => normalizeSamplingParams({ stopTokenIds: new Array(maxStopTokenIds + 1).fill(1) })), `at most ${maxStopTokenIds} ids`);
  t.equal(nativeLimits().params.logprobs.max, maxLogprobs);
});

t.test('engine defaults are the engine\'s own: chunked prefill on', async (t) => {
  const d = nativeLimits().engineDefaults;
  const o = normalizeEngineOptions({ model: 'm.gguf' }, 'LLM');
  t.equal(o.maxNumSeqs, d.maxNumSeqs);
  t.equal(o.chunkedPrefillSize, null, 'unset: the engine decides');
  t.equal(d.chunkedPrefillSize, 0, "the engine's default: a prompt may take the step's whole budget (chunked prefill stays on)");
  t.equal(normalizeEngineOptions({ model: 'm.gguf', chunked_prefill_size: -1 }, 'LLM').chunkedPrefillSize, -1, '-1 turns it off');
});
