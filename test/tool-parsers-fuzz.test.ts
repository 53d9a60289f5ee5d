// Tool-call parsers on random outputs built from format fragments (tags, partial tags, JSON and Python
// pieces, quotes, escapes, non-ASCII): parse() never throws, an output without calls is all content, arguments
// are always JSON objects, and streaming at random cut points (mid-surrogate included) equals parse().
import t from 'tap';
import { collectEvents, getToolCallParser, type ToolStreamEvent } from '../lib/tools/index.js';

function mulberry32(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let r = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

const COMMON = [
  ' ', '\n', 'text', 'Zürich', '😀', '東京', '"', "'", '\\', '\\"', '{', '}', '[', ']', '(', ')', ',', ':', ';', '=',
  '1', '-2.5e3', 'true', 'None', 'True', 'null', '"name"', '"arguments"', '"parameters"', '"f"', '<', '>', '|',
];

const FRAGMENTS: Record<string, string[]> = {
  hermes: [
    ...COMMON, '<tool_call>', '</tool_call>', '<tool_', '</tool_', 'call>',
    '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', '{"name": "g", "arguments": {',
    '"x": "</tool_call>"', '}}', '"arguments": "{\\"a\\": 2}"',
  ],
  lfm2: [
    ...COMMON, '<|tool_call_start|>', '<|tool_call_end|>', '<|tool_call', '_start|>', '_end|>',
    '<|tool_call_start|>[f(a=1)]<|tool_call_end|>', '[get_weather(city="Paris"', ', unit=\'c\')', 'g()', "'''",
    '{"name": "h", "arguments": {}}', 'x=[1, (2,), {3}]', 'r"\\d"',
  ],
  mistral: [
    ...COMMON, '[TOOL_CALLS]', '[TOOL_', 'CALLS]', '[ARGS]', '[AR', '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]',
    '{"name": "g", "arguments": {', 'add[ARGS]{"a": 1}', 'f_2', '"x": "[TOOL_CALLS]"', '}]',
  ],
  pythonic: [...COMMON, '[f(a=1)]', '[get_weather(city="Paris"', ', unit=\'c\')', 'g()', ']', "'''", 'x=[1, (2,), {3}]', 'r"\\d"'],
  llama3_json: [
    ...COMMON, '<|python_tag|>', '<|python', '{"name": "f", "parameters": {"a": 1}}', '{"name": "g", "parameters": {',
    '"arguments": {}}', '; ',
  ],
};

const PY_CALLS = ['f(a=1)', 'get_weather(city="Zürich", unit=\'c\')', 'g()', "h(x=[1, (2,), {3}], y={'k': None})", 'e(s="😀\\n")'];
const JSON_CALLS = ['{"name": "f", "arguments": {"a": 1}}', '{"name": "g", "arguments": {"s": "Zürich 😀", "l": [1, {"n": null}]}}', '{"name": "h"}'];
const pick = <T>(rnd: () => number, xs: T[]): T => xs[Math.floor(rnd() * xs.length)];
const some = <T>(rnd: () => number, xs: T[]): T[] => Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(rnd, xs));
const ws = (rnd: () => number) => pick(rnd, ['', '', ' ', '\n', '\n\n']);

/** A well-formed output of the format (calls, maybe text around), before mutation. */
const STRUCTURED: Record<string, (rnd: () => number) => string> = {
  hermes: (rnd) => some(rnd, JSON_CALLS).map((c) => `${pick(rnd, ['', 'Sure. ', 'ü '])}<tool_call>${ws(rnd)}${c}${ws(rnd)}</tool_call>`).join(ws(rnd)),
  lfm2: (rnd) => some(rnd, [0, 1]).map((json) =>
    `${pick(rnd, ['', 'Ok ', '東京 '])}<|tool_call_start|>[${(json ? some(rnd, JSON_CALLS) : some(rnd, PY_CALLS)).join(', ')}]<|tool_call_end|>`).join(ws(rnd)),
  mistral: (rnd) => `${pick(rnd, ['', 'Sure. ', '東京 '])}` + (rnd() < 0.5
    ? `[TOOL_CALLS]${ws(rnd)}[${some(rnd, JSON_CALLS).join(pick(rnd, [', ', ',\n', ',']))}]`
    : some(rnd, ['add[ARGS]{"a": 1}', 'get_weather[ARGS]{"city": "Zürich 😀", "l": [1, {"n": null}]}', 'g[ARGS]{}']).map((c) => `[TOOL_CALLS]${c}`).join('')),
  pythonic: (rnd) => `${ws(rnd)}[${some(rnd, PY_CALLS).join(pick(rnd, [', ', ',\n', ',']))}]${ws(rnd)}`,
  llama3_json: (rnd) => `${ws(rnd)}${pick(rnd, ['', '<|python_tag|>'])}${some(rnd, JSON_CALLS).map((c) => c.replace('arguments', 'parameters'))
    .join(pick(rnd, ['; ', ';', '\n', ' ; ']))}${pick(rnd, ['', '', ' done', ';'])}`,
};

function generate(name: string, rnd: () => number): string {
  const frags = FRAGMENTS[name];
  if (rnd() < 0.4) return Array.from({ length: 1 + Math.floor(rnd() * 14) }, () => pick(rnd, frags)).join('');
  let text = STRUCTURED[name](rnd);
  const edits = Math.floor(rnd() * 3); // 0: well-formed; else insert a fragment or delete a character
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(rnd() * (text.length + 1));
    text = rnd() < 0.5 ? text.slice(0, at) + pick(rnd, frags) + text.slice(at) : text.slice(0, at) + text.slice(at + 1);
  }
  return text;
}

function runStream(name: string, chunks: string[]): ToolStreamEvent[] {
  const s = getToolCallParser(name).stream();
  const out: ToolStreamEvent[] = [];
  for (const c of chunks) out.push(...s.push(c));
  out.push(...s.finish());
  return out;
}

for (const name of Object.keys(FRAGMENTS)) {
  t.test(name, async (t) => {
    const parser = getToolCallParser(name);
    const rnd = mulberry32(name.length * 1000 + 3);
    const failures: string[] = [];
    let withCalls = 0;
    const N = 600;
    for (let n = 0; n < N; n++) {
      const text = generate(name, rnd);
      let expected;
      try {
        expected = parser.parse(text);
      } catch (e) {
        failures.push(`parse threw on ${JSON.stringify(text)}: ${String(e)}`);
        continue;
      }
      if (expected.toolCalls.length === 0 && expected.content !== text) failures.push(`no call but content != text: ${JSON.stringify(text)}`);
      if (expected.toolCalls.length) withCalls++;
      for (const c of expected.toolCalls) {
        let ok = false;
        try {
          const v = JSON.parse(c.arguments);
          ok = typeof v === 'object' && v !== null && !Array.isArray(v);
        } catch { /* not JSON */ }
        if (!ok || c.name === '') failures.push(`bad call ${JSON.stringify(c)} from ${JSON.stringify(text)}`);
      }
      for (let r = 0; r < 6; r++) {
        const chunks: string[] = [];
        for (let i = 0; i < text.length; ) {
          const len = r === 0 ? 1 : 1 + Math.floor(rnd() * 6);
          chunks.push(text.slice(i, i + len));
          i += len;
        }
        const got = collectEvents(runStream(name, chunks));
        if (JSON.stringify(got) !== JSON.stringify(expected)) {
          failures.push(`stream ${JSON.stringify(chunks)} gave ${JSON.stringify(got)}, parse ${JSON.stringify(expected)}`);
          break;
        }
      }
    }
    t.same(failures.slice(0, 3), [], `${N} random outputs (${withCalls} with calls), ${failures.length} failures`);
    t.ok(withCalls > N / 4, 'the generator produces calls too');
  });
}

// The scanners are prefix-stable (lib/tools/scan.ts): what a prefix decides ('done' at an end, or 'error'),
// every longer text decides the same way. Streams rely on it to scan lazily.
t.test('scanners are prefix-stable', async (t) => {
  const { scanJson } = await import('../lib/tools/json-scan.js');
  const { scanPythonCallList, scanPythonCall } = await import('../lib/tools/python-scan.js');
  const { stringifyJson } = await import('../lib/tools/json-value.js');
  type R = { status: string; end?: number; value?: unknown };
  const call = (c: unknown) => { const x = c as { name: string; args: never }; return `${x.name}${stringifyJson(x.args)}`; };
  const scanners: [string, (s: string) => R, (v: unknown) => string][] = [
    ['json', (s) => scanJson(s, 0), (v) => stringifyJson(v as never)],
    ['python list', (s) => scanPythonCallList(s, 0), (v) => (v as unknown[]).map(call).join(';')],
    ['python call', (s) => scanPythonCall(s, 0), call],
  ];
  const rnd = mulberry32(99);
  const inputs: string[] = [];
  for (const name of Object.keys(FRAGMENTS)) for (let n = 0; n < 150; n++) inputs.push(generate(name, rnd));
  inputs.push(...PY_CALLS.map((c) => `[${c}, ${c}]`), ...PY_CALLS, ...JSON_CALLS, "[f(s='''a''''', t=''), g(x=1e5)]");
  const failures: string[] = [];
  let decided = 0;
  for (const [label, scan, str] of scanners) {
    const show = (r: R) => (r.status === 'done' ? `done@${r.end}:${str(r.value)}` : r.status);
    for (const raw of inputs) {
      const text = raw.replace(/^[^[{a-z]+/, ''); // start at something the scanner may accept
      const full = show(scan(text));
      for (let i = 0; i <= text.length; i++) {
        const r = show(scan(text.slice(0, i)));
        if (r === 'incomplete') continue;
        decided++;
        if (r !== full) {
          failures.push(`${label}: prefix ${JSON.stringify(text.slice(0, i))} -> ${r}, full ${JSON.stringify(text)} -> ${full}`);
          break;
        }
      }
    }
  }
  t.same(failures.slice(0, 3), [], `${decided} decided prefixes, ${failures.length} failures`);
});
