// Tool-call parsers (lib/tools): the documented outputs of each format (model docs, vLLM's parser tests,
// the brief's examples) parsed whole, and every one of them streamed split at every UTF-16 index, at every
// code-point boundary, one UTF-16 unit / one code point at a time and at random cut points, each compared
// with parse(); plus the stream's hold-back / early-emission behaviour.
import t, { type Test } from 'tap';
import { collectEvents, getToolCallParser, type ParsedToolCall, type ToolCallParser, type ToolParseResult, type ToolStreamEvent } from '../lib/tools/index.js';

interface Example {
  name: string;
  text: string;
  content: string;
  calls: [string, unknown][]; // name, arguments: an object compared as its JSON.stringify text, or that text
}

const call = (name: string, args: unknown): [string, unknown] => [name, args];
const contentOnly = (name: string, text: string): Example => ({ name, text, content: text, calls: [] });

// ---------------------------------------------------------------------------------------------- helpers

function mulberry32(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let r = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

function runStream(parser: ToolCallParser, chunks: string[]): ToolStreamEvent[] {
  const s = parser.stream();
  const events: ToolStreamEvent[] = [];
  for (const c of chunks) events.push(...s.push(c));
  events.push(...s.finish());
  return events;
}

/** Problems with an event sequence: ordering rules, empty events, split surrogate pairs (when `whole`). */
function eventProblems(events: ToolStreamEvent[], codePointChunks: boolean): string[] {
  const problems: string[] = [];
  let nextIndex = 0;
  const started = new Set<number>();
  for (const e of events) {
    if (e.type === 'content') {
      if (e.text === '') problems.push('empty content event');
      if (codePointChunks) {
        const first = e.text.charCodeAt(0);
        const last = e.text.charCodeAt(e.text.length - 1);
        if (first >= 0xdc00 && first <= 0xdfff) problems.push('content event starts with a low surrogate');
        if (last >= 0xd800 && last <= 0xdbff) problems.push('content event ends with a high surrogate');
      }
    } else if (e.type === 'tool_call') {
      if (e.index !== nextIndex) problems.push(`tool_call index ${e.index}, expected ${nextIndex}`);
      started.add(e.index);
      nextIndex = e.index + 1;
    } else if (!started.has(e.index)) problems.push(`tool_args for ${e.index} before its tool_call`);
  }
  return problems;
}

function codePoints(s: string): string[] {
  return Array.from(s);
}

/** Every way of streaming `text` that the brief asks for, each checked against parse(). */
function checkStreaming(t: Test, parser: ToolCallParser, text: string): void {
  const expected = parser.parse(text);
  const failures: string[] = [];
  const tryChunks = (label: string, chunks: string[], codePointChunks: boolean) => {
    const events = runStream(parser, chunks);
    const got = collectEvents(events);
    const problems = eventProblems(events, codePointChunks);
    if (JSON.stringify(got) !== JSON.stringify(expected)) problems.push(`result ${JSON.stringify(got)}`);
    if (problems.length) failures.push(`${label} ${JSON.stringify(chunks)}: ${problems.join('; ')}`);
  };
  tryChunks('whole', [text], true);
  for (let i = 0; i <= text.length; i++) tryChunks(`split@${i}`, [text.slice(0, i), text.slice(i)], false);
  const cps = codePoints(text);
  for (let k = 0, i = 0; k <= cps.length; i += cps[k]?.length ?? 0, k++) {
    tryChunks(`cp-split@${i}`, [text.slice(0, i), text.slice(i)], true);
  }
  tryChunks('units', text.split(''), false);
  tryChunks('code points', cps, true);
  const rnd = mulberry32(text.length * 7919 + 17);
  for (let n = 0; n < 40; n++) {
    const chunks: string[] = [];
    for (let i = 0; i < text.length; ) {
      const len = 1 + Math.floor(rnd() * 9);
      chunks.push(text.slice(i, i + len));
      i += len;
    }
    if (rnd() < 0.3) chunks.splice(Math.floor(rnd() * chunks.length), 0, ''); // empty deltas are fine too
    tryChunks(`random#${n}`, chunks, false);
  }
  t.same(failures.slice(0, 3), [], `streamed every way == parse() (${failures.length} failures)`);
}

function checkExamples(parserName: string, examples: Example[]): void {
  const parser = getToolCallParser(parserName);
  t.test(parserName, async (t) => {
    for (const ex of examples) {
      await t.test(ex.name, async (t) => {
        const r: ToolParseResult = parser.parse(ex.text);
        const want: ParsedToolCall[] = ex.calls.map(([name, args]) => ({
          name, arguments: typeof args === 'string' ? args : JSON.stringify(args),
        }));
        t.equal(r.content, ex.content, 'content');
        t.same(r.toolCalls, want, 'tool calls');
        for (const c of r.toolCalls) t.doesNotThrow(() => JSON.parse(c.arguments), 'arguments are JSON');
        if (r.toolCalls.length === 0) t.equal(r.content, ex.text, 'no call: the whole output is content');
        checkStreaming(t, parser, ex.text);
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------- lfm2

const LS = '<|tool_call_start|>';
const LE = '<|tool_call_end|>';
const lfm2 = (body: string) => `${LS}[${body}]${LE}`;

// vLLM tests/tool_parsers/test_lfm2_tool_parser.py
const SIMPLE = "get_candidate_status(candidate_id='12345')";
const MORE_TYPES =
  "register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])";
const MORE_TYPES_ARGS = {
  name: 'John Doe', age: 37, address: { city: 'San Francisco', state: 'CA' }, role: null, passed_test: true, aliases: ['John', 'Johnny'],
};
const ESCAPED = String.raw`get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')`;
const ESCAPED_ARGS = { city: "Martha's Vineyard", metric: '"cool units"' };

checkExamples('lfm2', [
  {
    name: 'the brief: two pythonic calls, both quote styles',
    text: `${LS}[get_weather(city="Paris", unit='celsius'), other(x=1)]${LE}`,
    content: '',
    calls: [call('get_weather', { city: 'Paris', unit: 'celsius' }), call('other', { x: 1 })],
  },
  { name: 'simple', text: lfm2(SIMPLE), content: '', calls: [call('get_candidate_status', { candidate_id: '12345' })] },
  {
    name: 'LFM2 docs: call then the answer text',
    text: `${LS}[get_candidate_status(candidate_id="12345")]${LE}Checking the current status of candidate ID 12345.`,
    content: 'Checking the current status of candidate ID 12345.',
    calls: [call('get_candidate_status', { candidate_id: '12345' })],
  },
  { name: 'more types: dict, None, True, list', text: lfm2(MORE_TYPES), content: '', calls: [call('register_user', MORE_TYPES_ARGS)] },
  {
    name: 'parameterless, empty dict, empty list (parallel)',
    text: lfm2('get_weather(), do_something_cool(additional_data={}), do_something_cool(steps=[])'),
    content: '',
    calls: [call('get_weather', {}), call('do_something_cool', { additional_data: {} }), call('do_something_cool', { steps: [] })],
  },
  { name: 'escaped quotes', text: lfm2(ESCAPED), content: '', calls: [call('get_weather', ESCAPED_ARGS)] },
  {
    name: 'parallel calls',
    text: lfm2(`${SIMPLE}, ${MORE_TYPES}`),
    content: '',
    calls: [call('get_candidate_status', { candidate_id: '12345' }), call('register_user', MORE_TYPES_ARGS)],
  },
  {
    name: 'JSON-list variant',
    text: `${LS}[{"name": "get_weather", "arguments": {"city": "Paris"}}]${LE}`,
    content: '',
    calls: [call('get_weather', { city: 'Paris' })],
  },
  {
    name: 'JSON-list variant, two calls, nested, then text',
    text: `${LS}[{"name": "a", "arguments": {"x": [1, {"y": null}], "ok": true}}, {"name": "b", "arguments": {}}]${LE}\nDone.`,
    content: '\nDone.',
    calls: [call('a', { x: [1, { y: null }], ok: true }), call('b', {})],
  },
  {
    name: 'content before and after',
    text: `Let me check.\n${lfm2('get_weather(city="Paris")')}\nIt is sunny.`,
    content: 'Let me check.\n\nIt is sunny.',
    calls: [call('get_weather', { city: 'Paris' })],
  },
  {
    name: 'two blocks, whitespace between them dropped',
    text: `${lfm2('a(x=1)')}\n${lfm2('b(y=2)')}\n`,
    content: '',
    calls: [call('a', { x: 1 }), call('b', { y: 2 })],
  },
  {
    name: 'unicode: Zürich, emoji, CJK',
    text: `Wetter für Zürich 🌦️: ${lfm2('get_weather(city="Zürich", note=\'☀️ 😀 東京\'), translate(text="naïve café")')} ✅`,
    content: 'Wetter für Zürich 🌦️:  ✅',
    calls: [call('get_weather', { city: 'Zürich', note: '☀️ 😀 東京' }), call('translate', { text: 'naïve café' })],
  },
  {
    name: 'nested and numeric literals',
    text: lfm2(
      "f(cfg={'a': [1, 2.5, -3, 1e3, 0x1F, 1_000, .5, +2], 'b': (1, 'two'), 'c': {'d': {'e': None}}, 1: True, (None): 0}, s={'x'}, t=false, n=null, z=-0.0)",
    ),
    content: '',
    // source key order is kept (JSON.stringify of a JS object would move the key "1" first)
    calls: [call('f', '{"cfg":{"a":[1,2.5,-3,1000,31,1000,0.5,2],"b":[1,"two"],"c":{"d":{"e":null}},"1":true,"null":0},"s":["x"],"t":false,"n":null,"z":0}')],
  },
  {
    name: 'dotted name (vLLM test)',
    text: lfm2(
      "grocery.orderIngredients(ingredientList=[{'name': 'Lasagna noodles', 'amount': 250, 'unit': 'g'}], deliveryAddress='845 Willow Lane, Springfield, IL 62704')",
    ),
    content: '',
    calls: [call('grocery.orderIngredients', {
      ingredientList: [{ name: 'Lasagna noodles', amount: 250, unit: 'g' }],
      deliveryAddress: '845 Willow Lane, Springfield, IL 62704',
    })],
  },
  {
    name: 'bracket and end tag inside strings',
    text: lfm2(`exec(command='grep -F "]" log.txt', note="${LE} is a token")`),
    content: '',
    calls: [call('exec', { command: 'grep -F "]" log.txt', note: `${LE} is a token` })],
  },
  {
    name: 'raw newline, triple quotes, implicit concatenation, escapes',
    text: lfm2(
      "write(path='a.py', body='''def f():\n    return \"x\"\n''', cmd='cat > f << EOF\nEOF', msg=('a' \"b\" r'\\d'), esc='tab\\there\\x41\\u00e9\\U0001F600\\n')",
    ),
    content: '',
    calls: [call('write', {
      path: 'a.py', body: 'def f():\n    return "x"\n', cmd: 'cat > f << EOF\nEOF', msg: 'ab\\d', esc: 'tab\there' + 'Aé😀\n',
    })],
  },
  {
    name: 'leading zeros and keyword-named arguments (vLLM/SGLang recoveries)',
    text: lfm2('set_date(month=07, day=05, from=1)'),
    content: '',
    calls: [call('set_date', { month: 7, day: 5, from: 1 })],
  },
  {
    name: 'OpenAI-style names (hyphens, leading digits) and JSON-syntax values, as a grammar writes them',
    text: lfm2('get-weather(user-id="u1", 2nd=true, opts={"a": null, "b": [1.5e+2, -0]}), 2fa_check()'),
    content: '',
    calls: [call('get-weather', { 'user-id': 'u1', '2nd': true, opts: { a: null, b: [150, 0] } }), call('2fa_check', {})],
  },
  {
    name: 'block still open at the end of the output',
    text: `${LS}[get_weather(city="Paris")]`,
    content: '',
    calls: [call('get_weather', { city: 'Paris' })],
  },
  {
    name: 'thinking before the call',
    text: `<think>I should call.</think>${lfm2('f()')}`,
    content: '<think>I should call.</think>',
    calls: [call('f', {})],
  },
  contentOnly('no call', 'How can I help you today?'),
  contentOnly('malformed: missing value', lfm2('get_weather(city=)')),
  contentOnly('malformed: positional argument', lfm2('get_weather("Paris")')),
  contentOnly('malformed: empty list', lfm2('')),
  contentOnly('malformed: nested call', lfm2('f(x=g())')),
  contentOnly('malformed: bytes value', lfm2("f(x=b'z')")),
  contentOnly('malformed: non-finite float', lfm2('f(x=1e999)')),
  contentOnly('malformed: repeated keyword', lfm2('f(x=1, x=2)')),
  contentOnly('malformed: junk after the list', `${LS}[f()] junk${LE}`),
  contentOnly('malformed: one bad call spoils its block', lfm2('good(a=1), bad(b=)')),
  contentOnly('malformed: unterminated at the end', `${LS}[get_weather(city="Paris"`),
  contentOnly('malformed: JSON element without a name', `${LS}[{"arguments": {}}]${LE}`),
  contentOnly('a partial start tag at the end', 'Use <|tool_call'),
  {
    name: 'a malformed block, then a good one',
    text: `${LS}oops${LE} then ${lfm2('f(a=1)')}`,
    content: `${LS}oops${LE} then `,
    calls: [call('f', { a: 1 })],
  },
  {
    name: 'a start tag inside a broken block still opens the next block',
    text: `${LS}[f(a=${LS}[g(b=2)]${LE}`,
    content: `${LS}[f(a=`,
    calls: [call('g', { b: 2 })],
  },
]);

// ---------------------------------------------------------------------------------------------- mistral

const TC = '[TOOL_CALLS]';

checkExamples('mistral', [
  // vLLM tests/tool_parsers/test_mistral_tool_parser.py (pre-v11 tokenizers: a JSON list after [TOOL_CALLS])
  {
    name: 'single call',
    text: `${TC}[{"name": "add", "arguments":{"a": 3.5, "b": 4}}]`,
    content: '',
    calls: [call('add', { a: 3.5, b: 4 })],
  },
  {
    name: 'two calls in the list',
    text: `${TC}[{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": "get_current_weather", "arguments":{"city": "San Francisco", "state": "CA", "unit": "celsius"}}]`,
    content: '',
    calls: [call('add', { a: 3.5, b: 4 }), call('get_current_weather', { city: 'San Francisco', state: 'CA', unit: 'celsius' })],
  },
  { name: 'text before the calls', text: `Let me add them. ${TC} [{"name": "add", "arguments": {"a": 1}}]`, content: 'Let me add them. ', calls: [call('add', { a: 1 })] },
  { name: 'one bare object, no arguments', text: `${TC}{"name": "now"}`, content: '', calls: [call('now', {})] },
  { name: 'text after the list stays content', text: `${TC}[{"name": "f", "arguments": {}}] done`, content: ' done', calls: [call('f', {})] },
  // v11+ tokenizers (Mistral Small 3.2, Magistral, Devstral): name[ARGS]{...} after each [TOOL_CALLS]
  { name: 'name[ARGS]{...}', text: `${TC}add_this_and_that[ARGS]{"a": 3.5, "b": 4}`, content: '', calls: [call('add_this_and_that', { a: 3.5, b: 4 })] },
  {
    name: 'two name[ARGS] calls',
    text: `${TC}add[ARGS]{"a": 1}${TC}multiply[ARGS]{"a": 2, "b": "x[ARGS]"}`,
    content: '',
    calls: [call('add', { a: 1 }), call('multiply', { a: 2, b: 'x[ARGS]' })],
  },
  contentOnly('no [TOOL_CALLS]: JSON is text', 'No tools needed: [1, 2, 3] and {"name": "x"}.'),
  contentOnly('a list the output cut short', `${TC}[{"name": "f", "arguments": {"a": 1}`),
  contentOnly('an element without a name', `${TC}[{"arguments": {"a": 1}}]`),
  contentOnly('an empty list', `${TC}[]`),
  contentOnly('[ARGS] then no object', `${TC}f[ARGS][1]`),
  contentOnly('a name with a space', `${TC}f g[ARGS]{}`),
]);

// ---------------------------------------------------------------------------------------------- pythonic

checkExamples('pythonic', [
  // vLLM tests/tool_parsers/test_pythonic_tool_parser.py (from Meta's Llama 3.2 prompt-format docs)
  {
    name: 'simple',
    text: "[get_weather(city='San Francisco', metric='celsius')]",
    content: '',
    calls: [call('get_weather', { city: 'San Francisco', metric: 'celsius' })],
  },
  { name: 'more types', text: `[${MORE_TYPES}]`, content: '', calls: [call('register_user', MORE_TYPES_ARGS)] },
  { name: 'parameterless', text: '[get_weather()]', content: '', calls: [call('get_weather', {})] },
  { name: 'empty dict', text: '[do_something_cool(additional_data={})]', content: '', calls: [call('do_something_cool', { additional_data: {} })] },
  { name: 'empty list', text: '[do_something_cool(steps=[])]', content: '', calls: [call('do_something_cool', { steps: [] })] },
  { name: 'escaped string', text: `[${ESCAPED}]`, content: '', calls: [call('get_weather', ESCAPED_ARGS)] },
  {
    name: 'parallel calls',
    text: "[get_weather(city='San Francisco', metric='celsius'), get_weather(), do_something_cool(steps=[])]",
    content: '',
    calls: [call('get_weather', { city: 'San Francisco', metric: 'celsius' }), call('get_weather', {}), call('do_something_cool', { steps: [] })],
  },
  {
    name: 'whitespace around, multi-line list, trailing commas',
    text: '\n  [\n  f(a=1,),\n  g(b="x"),\n]\n',
    content: '',
    calls: [call('f', { a: 1 }), call('g', { b: 'x' })],
  },
  {
    name: 'unicode and True/False/None',
    text: '[lookup(city="Zürich", tags=["🌦️", \'東京\'], exact=True, fuzzy=False, limit=None)]',
    content: '',
    calls: [call('lookup', { city: 'Zürich', tags: ['🌦️', '東京'], exact: true, fuzzy: false, limit: null })],
  },
  {
    name: 'nested values',
    text: "[create(spec={'steps': [{'id': 1, 'opts': {'deep': [[-1.5e-3]]}}], 'name': \"it's\"})]",
    content: '',
    calls: [call('create', { spec: { steps: [{ id: 1, opts: { deep: [[-0.0015]] } }], name: "it's" } })],
  },
  contentOnly('no call', 'How can I help you today?'),
  contentOnly('empty output', ''),
  contentOnly('whitespace only', '  \n'),
  contentOnly('a list of numbers', '[1, 2, 3] are numbers'),
  contentOnly('markdown link', '[docs](https://example.com) say so'),
  contentOnly('calls followed by text', '[f(a=1)] and then some text'),
  contentOnly('a call list later in the text', 'Sure: [f(a=1)]'),
  contentOnly('unclosed list', "[get_weather(city='Paris')"),
  contentOnly('malformed call', '[get_weather(city=Paris)]'),
  contentOnly('empty list', '[]'),
]);

// ---------------------------------------------------------------------------------------------- hermes

const tc = (json: string) => `<tool_call>\n${json}\n</tool_call>`;

checkExamples('hermes', [
  {
    name: 'vLLM test: one call',
    text: tc('{"name": "final_answer", "arguments": {"trigger": true}}'),
    content: '',
    calls: [call('final_answer', { trigger: true })],
  },
  {
    // Qwen2.5 function-calling docs (Hermes-style template), two parallel calls
    name: 'Qwen docs: two calls',
    text:
      tc('{"name": "get_current_temperature", "arguments": {"location": "San Francisco, CA, USA"}}') + '\n' +
      tc('{"name": "get_temperature_date", "arguments": {"location": "San Francisco, CA, USA", "date": "2024-10-01"}}'),
    content: '',
    calls: [
      call('get_current_temperature', { location: 'San Francisco, CA, USA' }),
      call('get_temperature_date', { location: 'San Francisco, CA, USA', date: '2024-10-01' }),
    ],
  },
  {
    name: 'content before the call',
    text: 'Sure, let me check the weather.<tool_call>{"name": "get_weather", "arguments": {"city": "NYC"}}</tool_call>',
    content: 'Sure, let me check the weather.',
    calls: [call('get_weather', { city: 'NYC' })],
  },
  {
    name: 'text before, between and after',
    text: 'A\n' + tc('{"name": "f", "arguments": {}}') + '\nB\n' + tc('{"name": "g", "arguments": {"n": 1}}') + '\nC',
    content: 'A\n\nB\n\nC',
    calls: [call('f', {}), call('g', { n: 1 })],
  },
  {
    name: 'vLLM test: call until end of output (no end tag)',
    text: '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}',
    content: '',
    calls: [call('final_answer', { trigger: true })],
  },
  {
    name: 'vLLM test: arguments already serialized as a JSON string',
    text: tc('{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}'),
    content: '',
    calls: [call('get_db_config', { param: 'max_connections' })],
  },
  {
    name: '"parameters" instead of "arguments"; no arguments at all',
    text: tc('{"name": "a", "parameters": {"x": 1}}') + tc('{"name": "b"}'),
    content: '',
    calls: [call('a', { x: 1 }), call('b', {})],
  },
  {
    name: 'unicode, escapes, surrogate-pair escape',
    text: 'Für dich 😀 ' + tc('{"name": "say", "arguments": {"text": "Zürich \\u00fc \\ud83c\\udf26 \\"quoted\\" back\\\\slash\\nline", "city": "東京"}}'),
    content: 'Für dich 😀 ',
    calls: [call('say', { text: 'Zürich ü 🌦 "quoted" back\\slash\nline', city: '東京' })],
  },
  {
    name: 'nested arguments; numbers keep their digits',
    text: tc('{"name": "f", "arguments": {"a": {"b": [1, 2.50, -0, 1e2, {"c": null}]}, "9": "nine", "a2": false}}'),
    content: '',
    calls: [call('f', '{"a":{"b":[1,2.5,0,100,{"c":null}]},"9":"nine","a2":false}')],
  },
  {
    name: 'end tag and start tag inside a string argument',
    text: tc('{"name": "write", "arguments": {"text": "use </tool_call> and <tool_call> literally"}}'),
    content: '',
    calls: [call('write', { text: 'use </tool_call> and <tool_call> literally' })],
  },
  {
    name: 'Qwen3 thinking before the call',
    text: '<think>\nNeed the weather.\n</think>\n\n' + tc('{"name": "get_weather", "arguments": {"city": "Paris"}}'),
    content: '<think>\nNeed the weather.\n</think>\n\n',
    calls: [call('get_weather', { city: 'Paris' })],
  },
  {
    name: 'raw newline inside a string (accepted)',
    text: tc('{"name": "run", "arguments": {"code": "print(1)\nprint(2)"}}'),
    content: '',
    calls: [call('run', { code: 'print(1)\nprint(2)' })],
  },
  {
    name: 'duplicate keys: last wins, first position',
    text: tc('{"name": "f", "arguments": {"a": 1, "b": 2, "a": 3}}'),
    content: '',
    calls: [call('f', { a: 3, b: 2 })],
  },
  {
    name: 'a malformed block, then a good one',
    text: '<tool_call>{"name": 1}</tool_call>' + tc('{"name": "f", "arguments": {}}'),
    content: '<tool_call>{"name": 1}</tool_call>',
    calls: [call('f', {})],
  },
  contentOnly('no call', 'This is some prior text that has nothing to do with tool calling.'),
  contentOnly('vLLM test: invalid JSON (missing brace)', '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}'),
  contentOnly('prose that mentions the tag', 'Wrap each call in <tool_call> tags, like <tool_call>this</tool_call>.'),
  contentOnly('junk after the object', tc('{"name": "f", "arguments": {}} extra')),
  contentOnly('two objects in one block', tc('{"name": "f", "arguments": {}}\n{"name": "g", "arguments": {}}')),
  contentOnly('arguments not an object', tc('{"name": "f", "arguments": [1, 2]}')),
  contentOnly('bare string arguments', tc('{"name": "f", "arguments": "hello"}')),
  contentOnly('single-quoted pseudo JSON', tc("{'name': 'f', 'arguments': {}}")),
  contentOnly('empty block', '<tool_call></tool_call>'),
  contentOnly('a partial start tag at the end', 'Almost <tool_'),
  contentOnly('partial end tag at the end', tc('{"name": "f", "arguments": {}}').slice(0, -3)),
]);

// ---------------------------------------------------------------------------------------------- llama3_json

checkExamples('llama3_json', [
  // vLLM tests/tool_parsers/test_llama3_json_tool_parser.py
  {
    name: 'with parameters',
    text: '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}',
    content: '',
    calls: [call('searchTool', { query: 'test query', limit: 10 })],
  },
  {
    name: '"arguments" instead of "parameters"',
    text: '{"name": "searchTool", "arguments": {"query": "test"}}',
    content: '',
    calls: [call('searchTool', { query: 'test' })],
  },
  ...['; ', ';', ';\n', '\n', ' ; '].map((sep) => ({
    name: `three calls separated by ${JSON.stringify(sep)}`,
    text: `{"name": "searchTool", "parameters": {"query": "test1"}}${sep}{"name": "getOpenIncidentsTool", "parameters": {}}${sep}{"name": "searchTool", "parameters": {"query": "test2"}}`,
    content: '',
    calls: [call('searchTool', { query: 'test1' }), call('getOpenIncidentsTool', {}), call('searchTool', { query: 'test2' })],
  })),
  {
    name: 'after <|python_tag|>',
    text: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Zürich", "emoji": "🌦️"}}',
    content: '',
    calls: [call('get_weather', { city: 'Zürich', emoji: '🌦️' })],
  },
  {
    name: 'deeply nested parameters',
    text: '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}}',
    content: '',
    calls: [call('complexTool', { level1: { level2: { level3: { level4: { value: 'deep' } } } } })],
  },
  {
    name: 'quotes and brackets inside strings',
    text: '{"name": "searchTool", "parameters": {"query": "test {value} [complex]","nested": {"inner": "more {brackets}"}}}',
    content: '',
    calls: [call('searchTool', { query: 'test {value} [complex]', nested: { inner: 'more {brackets}' } })],
  },
  {
    name: 'escaped quotes',
    text: '{"name": "parserTool", "parameters": {"text": "He said \\"Hello {world}\\""}}',
    content: '',
    calls: [call('parserTool', { text: 'He said "Hello {world}"' })],
  },
  {
    name: 'a brace in trailing text stays content',
    text: '{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.',
    content: ' I used {searchTool} for this.',
    calls: [call('searchTool', { query: 'test' })],
  },
  {
    name: 'a second object that is not a call stays content',
    text: '{"name": "searchTool", "parameters": {"query": "test"}}; {"query": "test"}',
    content: '; {"query": "test"}',
    calls: [call('searchTool', { query: 'test' })],
  },
  {
    name: 'leading whitespace, dangling separator',
    text: '\n {"name": "f", "parameters": {"ok": true}};\n',
    content: '',
    calls: [call('f', { ok: true })],
  },
  contentOnly('no JSON', 'This is just some text without any tool calls'),
  contentOnly('invalid JSON', '{"name": "invalidTool", "parameters": {invalid json}'),
  contentOnly('missing name', '{"parameters": {}}'),
  contentOnly('missing parameters', '{"name": "toolWithoutParams"}'),
  contentOnly('JSON later in the text (calls only at the start)', 'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}}'),
  contentOnly('a plain JSON answer', '{"answer": 42}'),
  contentOnly('builtin-tool call after <|python_tag|>', '<|python_tag|>brave_search.call(query="weather in Zürich")'),
  contentOnly('unterminated', '<|python_tag|>{"name": "f", "parameters": {"a": "b'),
  contentOnly('whitespace only', ' \n'),
]);

// Values the example table cannot spell as JS numbers: integers beyond 2^53 keep every digit.
t.test('big integers keep their digits', async (t) => {
  const h = getToolCallParser('hermes').parse(tc('{"name": "f", "arguments": {"id": 12345678901234567890}}'));
  t.equal(h.toolCalls[0].arguments, '{"id":12345678901234567890}');
  const l = getToolCallParser('lfm2').parse(lfm2('f(id=12345678901234567890, neg=-98765432109876543210)'));
  t.equal(l.toolCalls[0].arguments, '{"id":12345678901234567890,"neg":-98765432109876543210}');
  const p = getToolCallParser('pythonic').parse('[f(n=0o17, b=0b101, h=0XfF)]');
  t.equal(p.toolCalls[0].arguments, '{"n":15,"b":5,"h":255}');
});

// ---------------------------------------------------------------------------------------------- stream behaviour

function events(parser: string, chunks: string[]): ToolStreamEvent[][] {
  const s = getToolCallParser(parser).stream();
  const out = chunks.map((c) => s.push(c));
  out.push(s.finish());
  return out;
}

t.test('hermes holds back what may be a start tag, and nothing more', async (t) => {
  const ev = events('hermes', ['Hello <tool_', 'call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', ' bye <to', 'day']);
  t.same(ev[0], [{ type: 'content', text: 'Hello ' }]);
  t.same(ev[1], [
    { type: 'tool_call', index: 0, name: 'f' },
    { type: 'tool_args', index: 0, fragment: '{"a":1}' },
  ], 'the call is emitted when its end tag arrives, before finish()');
  t.same(ev[2], [{ type: 'content', text: ' bye ' }]);
  t.same(ev[3], [{ type: 'content', text: '<today' }]);
  t.same(ev[4], []);
});

t.test('hermes: a start tag in prose is released quickly', async (t) => {
  const ev = events('hermes', ['Use the <tool_call>', ' tag', ' to call tools.']);
  t.same(ev[0], [{ type: 'content', text: 'Use the ' }]);
  t.same(ev[1], [{ type: 'content', text: '<tool_call> tag' }]);
  t.same(ev[2], [{ type: 'content', text: ' to call tools.' }]);
});

t.test('whitespace next to calls is held, then dropped', async (t) => {
  const ev = events('hermes', ['\n\n', '<tool_call>{"name": "f"}</tool_call>', '\n', '\n', 'tail']);
  t.same(ev[0], [], 'leading whitespace waits');
  t.same(ev[1].map((e) => e.type), ['tool_call', 'tool_args'], 'then is dropped before the call');
  t.same(ev[2], []);
  t.same(ev[3], []);
  t.same(ev[4], [{ type: 'content', text: '\n\ntail' }], 'whitespace before text is content');
  const plain = events('hermes', ['\n', '\n']);
  t.same(plain.flat(), [{ type: 'content', text: '\n\n' }], 'with no call at all, whitespace is content');
});

t.test('lfm2 streams plain text at once and emits a call at its end tag', async (t) => {
  const ev = events('lfm2', ['Checking', ' now. <|tool_', 'call_start|>[f(a=1)', ', g()]<|tool_call_end|>', 'Done']);
  t.same(ev[0], [{ type: 'content', text: 'Checking' }]);
  t.same(ev[1], [{ type: 'content', text: ' now. ' }]);
  t.same(ev[2], []);
  t.same(ev[3].map((e) => e.type), ['tool_call', 'tool_args', 'tool_call', 'tool_args']);
  t.same(ev[4], [{ type: 'content', text: 'Done' }]);
});

t.test('llama3_json emits each call when its object closes', async (t) => {
  const ev = events('llama3_json', ['<|python_', 'tag|>{"name": "a", "parameters": {"x": 1}', '}; {"name": "b", ', '"parameters": {}}', ' ok']);
  t.same(ev[0], []);
  t.same(ev[1], []);
  t.same(ev[2], [
    { type: 'tool_call', index: 0, name: 'a' },
    { type: 'tool_args', index: 0, fragment: '{"x":1}' },
  ]);
  t.same(ev[3], [
    { type: 'tool_call', index: 1, name: 'b' },
    { type: 'tool_args', index: 1, fragment: '{}' },
  ]);
  t.same(ev[4], [{ type: 'content', text: ' ok' }]);
  t.same(events('llama3_json', ['Hello', ' there'])[0], [{ type: 'content', text: 'Hello' }], 'prose streams at once');
});

t.test('pythonic: prose streams at once; calls are certain only at the end', async (t) => {
  t.same(events('pythonic', ['Hello', ' [x]'])[0], [{ type: 'content', text: 'Hello' }]);
  const ev = events('pythonic', ['[f(a=1)', ']', '\n']);
  t.same(ev.slice(0, 3).flat(), []);
  t.same(ev[3].map((e) => e.type), ['tool_call', 'tool_args']);
  const notCall = events('pythonic', ['[Note', ': this is prose', ' more']);
  t.same(notCall[0], [], '`[Note` may still become `[Note(...)]`');
  t.same(notCall[1], [{ type: 'content', text: '[Note: this is prose' }], 'released as soon as it cannot be a call');
  t.same(notCall[2], [{ type: 'content', text: ' more' }]);
  const junk = events('pythonic', ['[f(a=1)]', ' and more']);
  t.same(junk[1], [{ type: 'content', text: '[f(a=1)] and more' }]);
});

t.test('a split surrogate pair is never emitted alone', async (t) => {
  const s = getToolCallParser('hermes').stream();
  const a = s.push('ok \ud83d');
  const b = s.push('\ude00!');
  t.same(a, [{ type: 'content', text: 'ok ' }]);
  t.same(b, [{ type: 'content', text: '😀!' }]);
  t.same(s.finish(), []);
  const lone = getToolCallParser('lfm2').stream();
  t.same([...lone.push('x\ud83d'), ...lone.finish()], [{ type: 'content', text: 'x' }, { type: 'content', text: '\ud83d' }], 'a lone one at the end is still content');
});

t.test('push after finish is an error; finish twice is fine', async (t) => {
  for (const name of ['hermes', 'lfm2', 'pythonic', 'llama3_json']) {
    const s = getToolCallParser(name).stream();
    s.push('a');
    s.finish();
    t.same(s.finish(), [], `${name}: second finish`);
    t.throws(() => s.push('b'), /after finish/, `${name}: push after finish`);
  }
});
