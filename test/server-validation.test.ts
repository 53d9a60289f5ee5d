// docs/reliability.md items 6-7 over inject(): every bad request body gets its 4xx and the OpenAI error shape
// `{ error: { message, type, param, code } }`, never a 500; known-but-unsupported fields are refused by name.
import t from 'tap';
import { buildApp } from '../lib/server/app.js';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { fixtureModel } from './helpers/fixtures.js';

const SMALL = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11 } as const;
const path = await fixtureModel({ ...SMALL, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const app = await buildApp({ engine: normalizeEngineOptions({ model: path, maxModelLen: 256, threads: 2 }, 'serve'), servedModelNames: ['m'] });
t.teardown(() => app.close());
await app.engine.ready();

const user = [{ role: 'user', content: 'hi' }];
const chat = (extra: Record<string, unknown>) => JSON.stringify({ messages: user, max_tokens: 2, ...extra });

async function post(url: string, payload: string, contentType = 'application/json') {
  return app.inject({ method: 'POST', url, headers: { 'content-type': contentType }, payload });
}

// [what, url, raw body, status, param (undefined: not checked), code (undefined: not checked)]
const CASES: Array<[string, string, string, number, (string | null)?, (string | null)?]> = [
  ['invalid JSON', '/v1/chat/completions', '{"messages": [', 400, null, 'invalid_json'],
  ['a JSON array body', '/v1/chat/completions', '[1,2]', 400, null],
  ['a JSON string body', '/v1/chat/completions', '"hello"', 400, null],
  ['null body', '/v1/chat/completions', 'null', 400],
  ['missing messages', '/v1/chat/completions', '{}', 400, 'messages', 'missing_required_parameter'],
  ['empty messages', '/v1/chat/completions', JSON.stringify({ messages: [] }), 400, 'messages'],
  ['unknown role', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'wizard', content: 'x' }] }), 400, 'messages'],
  ['unknown content part type', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'video', video: 1 }] }] }), 400, 'messages'],
  ['image on a text model', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/a.png' } }] }] }), 400, 'messages'],
  ['message content a number', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 5 }] }), 400, 'messages[0].content'],
  ['negative max_tokens', '/v1/chat/completions', chat({ max_tokens: -5 }), 400, 'max_tokens'],
  ['huge max_tokens', '/v1/chat/completions', chat({ max_tokens: 1e300 }), 400, 'max_tokens'],
  ['non-integer max_tokens', '/v1/chat/completions', chat({ max_tokens: 2.5 }), 400, 'max_tokens'],
  ['max_tokens as a string', '/v1/chat/completions', chat({ max_tokens: '2' }), 400, 'max_tokens'],
  ['negative temperature', '/v1/chat/completions', chat({ temperature: -1 }), 400, 'temperature'],
  ['top_p above 1', '/v1/chat/completions', chat({ top_p: 1.5 }), 400, 'top_p'],
  ['top_k -2', '/v1/chat/completions', chat({ top_k: -2 }), 400, 'top_k'],
  ['n = 129', '/v1/chat/completions', chat({ n: 129 }), 400, 'n'],
  ['negative seed', '/v1/chat/completions', chat({ seed: -1 }), 400, 'seed'],
  ['top_logprobs 21', '/v1/chat/completions', chat({ logprobs: true, top_logprobs: 21 }), 400, 'top_logprobs'],
  ['17 stop strings', '/v1/chat/completions', chat({ stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }), 400, 'stop'],
  ['a 300-byte stop string', '/v1/chat/completions', chat({ stop: 'x'.repeat(300) }), 400, 'stop'],
  ['out-of-vocab stop_token_ids', '/v1/chat/completions', chat({ stop_token_ids: [10_000_000] }), 400, 'stop_token_ids', 'invalid_token_id'],
  ['prompt + max_tokens over the context', '/v1/chat/completions', chat({ max_tokens: 250 }), 400, 'max_tokens', 'context_length_exceeded'],
  ['prompt alone over the context', '/v1/completions', JSON.stringify({ prompt: 'word '.repeat(400) }), 400, 'prompt', 'context_length_exceeded'],
  ['out-of-vocab prompt ids', '/v1/completions', JSON.stringify({ prompt: [1, 2, 99_999_999] }), 400, 'prompt', 'invalid_token_id'],
  ['negative prompt ids', '/v1/completions', JSON.stringify({ prompt: [1, -2] }), 400, 'prompt'],
  ['empty prompt', '/v1/completions', JSON.stringify({ prompt: '' }), 400, 'prompt'],
  ['a tool without a name', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: { parameters: { type: 'object' } } }] }), 400, 'tools[0].function.name'],
  ['tool_choice naming an unknown tool', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }), 400, 'tool_choice'],
  ['tool_choice required without tools', '/v1/chat/completions', chat({ tool_choice: 'required' }), 400, 'tool_choice'],
  ['unknown response_format type', '/v1/chat/completions', chat({ response_format: { type: 'xml' } }), 400, 'response_format'],
  ['invalid JSON Schema', '/v1/chat/completions', chat({ response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object', properties: { a: { type: 'strange' } } } } } }), 400, 'response_format.json_schema'],
  ['unsupported JSON Schema keyword', '/v1/chat/completions', chat({ response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'number', multipleOf: 2 } } } }), 400, 'response_format.json_schema'],
  ['a regex that cannot compile', '/v1/completions', JSON.stringify({ prompt: 'a', structured_outputs: { regex: '(a' } }), 400, 'structured_outputs'],
  ['a GBNF grammar that cannot compile', '/v1/completions', JSON.stringify({ prompt: 'a', structured_outputs: { grammar: 'root ::= (' } }), 400, 'structured_outputs'],
  ['two constraints', '/v1/completions', JSON.stringify({ prompt: 'a', regex: 'a+', guided_choice: ['x'] }), 400, 'regex'],
  ['request chat_template (refused)', '/v1/chat/completions', chat({ chat_template: '{{ 1 }}' }), 400, 'chat_template', 'unsupported_parameter'],
  ['logit_bias out of range', '/v1/completions', JSON.stringify({ prompt: 'a', logit_bias: { 5: 101 } }), 400, 'logit_bias'],
  ['logit_bias with a non-id key', '/v1/completions', JSON.stringify({ prompt: 'a', logit_bias: { x: 1 } }), 400, 'logit_bias'],
  ['suffix with echo', '/v1/completions', JSON.stringify({ prompt: 'a', suffix: 'b', echo: true }), 400, 'echo'],
  ['detokenize out of vocab', '/detokenize', JSON.stringify({ tokens: [99_999_999] }), 400],
];

for (const [what, url, body, status, param, code] of CASES) {
  t.test(what, async (t) => {
    const res = await post(url, body);
    t.equal(res.statusCode, status, res.body);
    const json = res.json();
    t.match(json, { error: { message: String, type: String } });
    t.same(Object.keys(json.error).sort(), ['code', 'message', 'param', 'type']);
    if (param !== undefined) t.equal(json.error.param, param);
    if (code !== undefined) t.equal(json.error.code, code);
  });
}

t.test('a body over the 40 MiB limit is 413; a text field over 2 MiB 400; an unknown content type 415; deep nesting is a 400', async (t) => {
  const big = await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'a'.repeat(40 * 1024 * 1024) }] }));
  t.equal(big.statusCode, 413);
  t.match(big.json(), { error: { code: 'request_too_large' } });
  const long = await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'a'.repeat(2 * 1024 * 1024 + 1) }] }));
  t.equal(long.statusCode, 400, 'a message longer than MAX_TEXT');
  const text = await post('/v1/chat/completions', 'hello', 'text/plain');
  t.equal(text.statusCode, 400, 'a text body is not an object');
  const xml = await post('/v1/chat/completions', '<a/>', 'application/xml');
  t.equal(xml.statusCode, 415);
  t.match(xml.json(), { error: { type: 'invalid_request_error' } });
  const deep = await post('/v1/chat/completions', '{"messages":' + '['.repeat(100_000) + ']'.repeat(100_000) + '}');
  t.equal(deep.statusCode, 400);
});

t.test('unknown fields are ignored (as OpenAI), unknown routes are 404 in the error shape', async (t) => {
  const ok = await post('/v1/chat/completions', chat({ some_future_field: { a: 1 }, temperature: 0 }));
  t.equal(ok.statusCode, 200);
  const missing = await app.inject({ method: 'GET', url: '/v1/nothing' });
  t.equal(missing.statusCode, 404);
  t.match(missing.json(), { error: { type: 'not_found_error' } });
});

t.test('tokenize / detokenize round trip', async (t) => {
  const tok = await post('/tokenize', JSON.stringify({ prompt: 'Hello world' }));
  t.equal(tok.statusCode, 200);
  const { tokens, count, max_model_len } = tok.json();
  t.equal(count, tokens.length);
  t.equal(max_model_len, 256);
  const de = await post('/detokenize', JSON.stringify({ tokens }));
  t.equal(de.json().prompt, 'Hello world');
  const chatTok = await post('/tokenize', JSON.stringify({ messages: user }));
  t.ok(chatTok.json().count > tokens.length);
});
