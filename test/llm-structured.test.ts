// Structured outputs through the offline APIs: vLLM's `structuredOutputs` (json, regex, choice, grammar,
// json_object) and older `guided_*` names in LLM.generate / LLM.chat (tools rendered by the template), SGLang's
// `json_schema` (JSON text), `regex`, `ebnf` in Engine.generate, streamed and not; a constrained request's
// greedy output does not depend on what else is in the batch; bad constraints are SamplingParamsErrors.
import t from 'tap';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { Engine, LLM } from '../lib/index.js';
import { SamplingParamsError } from '../lib/sampling-params.js';
import { fixtureModel } from './helpers/fixtures.js';
import { SCHEMAS } from './helpers/structured-schemas.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const ajv = new (Ajv2020 as unknown as typeof Ajv2020.default)({ strict: false });
(addFormats as unknown as typeof addFormats.default)(ajv);

const llm = new LLM({ model: path, maxModelLen: 1024, threads: 2 });
t.teardown(() => llm.close());
await llm.ready();

t.test('LLM.generate: every vLLM constraint kind holds', async (t) => {
  const prompts = ['Once', 'Hello', 'The'];
  const check = async (params: Record<string, unknown>, ok: (text: string) => boolean, what: string) => {
    const outs = await llm.generate(prompts, { temperature: 1, seed: 5, maxTokens: 400, ...params });
    for (const o of outs) t.ok(ok(o.outputs[0].text) && o.outputs[0].finishReason === 'stop', `${what}: ${JSON.stringify(o.outputs[0].text)}`);
  };
  const person = SCHEMAS.person;
  await check({ structuredOutputs: { json: person } }, (s) => ajv.validate(person, JSON.parse(s)), 'json');
  await check({ structured_outputs: { regex: '[a-c]{2,4}-[0-9]+' } }, (s) => /^[a-c]{2,4}-[0-9]+$/.test(s), 'regex');
  await check({ structuredOutputs: { choice: ['alpha', 'beta', 'gamma δ'] } }, (s) => ['alpha', 'beta', 'gamma δ'].includes(s), 'choice');
  await check({ structuredOutputs: { grammar: 'root ::= "(" [0-9]{1,3} ("+" [0-9]{1,3})* ")"' } }, (s) => /^\(\d{1,3}(\+\d{1,3})*\)$/.test(s), 'grammar');
  await check({ guided_json: SCHEMAS.color_enum }, (s) => ajv.validate(SCHEMAS.color_enum, JSON.parse(s)), 'guided_json');
});

t.test('LLM.chat: tools reach the template; a json_schema answer validates', async (t) => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const [out] = await llm.chat([{ role: 'user', content: 'Weather in Paris?' }], { temperature: 0, maxTokens: 300, structuredOutputs: { json: SCHEMAS.tags } }, { tools });
  t.match(out.prompt, /<tools>[\s\S]*get_weather[\s\S]*<\/tools>/);
  t.ok(ajv.validate(SCHEMAS.tags, JSON.parse(out.outputs[0].text)), out.outputs[0].text);
});

t.test('a constrained greedy request gives the same output alone and in a mixed batch', async (t) => {
  const params = { temperature: 0, maxTokens: 300, structuredOutputs: { json: SCHEMAS.nested } };
  const [alone] = await llm.generate(['Data:'], params);
  const batch = await llm.generate(['Data:', 'Other', 'Data:', 'x'], [params, { temperature: 0, maxTokens: 40 }, params, { temperature: 0, maxTokens: 7 }]);
  t.equal(batch[0].outputs[0].text, alone.outputs[0].text);
  t.equal(batch[2].outputs[0].text, alone.outputs[0].text);
  t.ok(ajv.validate(SCHEMAS.nested, JSON.parse(alone.outputs[0].text)));
});

t.test('bad constraints are SamplingParamsErrors naming the field', async (t) => {
  await t.rejects(llm.generate('a', { structuredOutputs: { json: { type: 'object', patternProperties: {} } } }),
    { name: 'SamplingParamsError', message: /structuredOutputs\.json: unsupported JSON Schema keyword 'patternProperties'/ });
  await t.rejects(llm.generate('a', { structuredOutputs: { regex: 'a(?=b)' } }), { name: 'SamplingParamsError', message: /structuredOutputs\.regex/ });
  await t.rejects(llm.generate('a', { structuredOutputs: { json: {}, regex: 'a' } }), { message: /exactly one of/ });
  await t.rejects(llm.generate('a', { regex: 'a', ebnf: 'root ::= "a"' }), { message: /both output constraints/ });
  await t.rejects(llm.generate('a', { ebnf: 'root ::= undefined-rule' }), SamplingParamsError);
});

t.test('Engine.generate: SGLang json_schema (JSON text), regex, ebnf; streamed chunks assemble to the answer', async (t) => {
  const engine = new Engine({ modelPath: path, contextLength: 1024, threads: 2 });
  t.teardown(() => engine.shutdown());
  const sp = { temperature: 0, max_new_tokens: 300, json_schema: JSON.stringify(SCHEMAS.ref_defs) };
  const r = await engine.generate({ prompt: 'Points:', sampling_params: sp }) as { text: string };
  t.ok(ajv.validate(SCHEMAS.ref_defs, JSON.parse(r.text)), r.text);
  let streamed = '';
  for await (const chunk of engine.generate({ prompt: 'Points:', sampling_params: sp, stream: true })) streamed += chunk.text;
  t.equal(streamed, r.text);
  const re = await engine.generate({ prompt: 'Code:', sampling_params: { temperature: 1, seed: 3, regex: '[A-Z]{3}[0-9]{2}' } }) as { text: string };
  t.match(re.text, /^[A-Z]{3}[0-9]{2}$/);
  const eb = await engine.generate({ prompt: 'Yes?', sampling_params: { temperature: 1, seed: 4, ebnf: 'root ::= ("yes" | "no") "!"' } }) as { text: string };
  t.ok(['yes!', 'no!'].includes(eb.text), eb.text);
});
