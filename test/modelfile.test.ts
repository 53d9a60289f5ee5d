// The Modelfile parser and writer (lib/modelfile/parse.ts, format.ts) and rendering a conversation with a
// Modelfile's TEMPLATE as Ollama does (lib/modelfile/render.ts): every command, quoting, comments, each error with
// its line, round trips, the LFM2 Modelfile as users write it, and Ollama's per-turn rules for .Prompt/.Response
// templates. Expected values follow ollama/ollama parser/parser_test.go and template/template_test.go (MIT).
import t from 'tap';
import {
  decodeModelfile, formatModelfile, ModelfileError, parseModelfile, renderOllamaGenerate, renderOllamaTemplate, TemplateError,
  type Modelfile,
} from '../lib/modelfile/index.js';
import type { ChatMessage as RepoChatMessage } from '../lib/chat/template.js';

const LFM2_MODELFILE = `FROM ./LFM2-1.2B-Q4_K_M.gguf
TEMPLATE """<|startoftext|><|im_start|>system
{{ .System }}<|im_end|>
<|im_start|>user
{{ .Prompt }}<|im_end|>
<|im_start|>assistant
"""
PARAMETER temperature 0.1
PARAMETER top_k 50
PARAMETER repeat_penalty 1.05
PARAMETER stop "<|im_end|>"
PARAMETER stop "<|endoftext|>"
`;

/** The ModelfileError thrown by parsing `text`. */
function errorOf(text: string): ModelfileError {
  try {
    parseModelfile(text);
  } catch (e) {
    if (e instanceof ModelfileError) return e;
    throw e;
  }
  throw new Error(`no error for ${JSON.stringify(text)}`);
}

const base = (extra: Partial<Modelfile>): Modelfile => ({
  from: 'foo', parameters: {}, template: null, system: null, license: [], adapters: [], messages: [], warnings: [], ...extra,
});

t.test('the LFM2 Modelfile parses and its TEMPLATE renders one turn exactly', async (t) => {
  const m = parseModelfile(LFM2_MODELFILE);
  t.equal(m.from, './LFM2-1.2B-Q4_K_M.gguf');
  t.same(m.parameters, { temperature: 0.1, top_k: 50, repeat_penalty: 1.05, stop: ['<|im_end|>', '<|endoftext|>'] });
  t.strictSame(Object.keys(m.parameters), ['temperature', 'top_k', 'repeat_penalty', 'stop']);
  t.equal(m.template, '<|startoftext|><|im_start|>system\n{{ .System }}<|im_end|>\n<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n');
  t.equal(m.system, null);
  t.same(m.warnings, []);
  const expected = '<|startoftext|><|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n';
  t.equal(renderOllamaTemplate(m.template!, [{ role: 'system', content: '{system}' }, { role: 'user', content: '{prompt}' }]), expected);
  t.equal(renderOllamaTemplate(m.template!, [{ role: 'user', content: '{prompt}' }], { system: '{system}' }), expected, 'SYSTEM from the Modelfile');
  t.equal(renderOllamaGenerate(m.template!, '{prompt}', { system: '{system}' }), expected, '/api/generate');
  t.equal(renderOllamaTemplate(m.template!, [{ role: 'user', content: 'hi' }]),
    '<|startoftext|><|im_start|>system\n<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', 'no system: the block stays, empty');
});

t.test('a .Prompt/.Response template replays history turn by turn, as Ollama does', async (t) => {
  const lfm2 = parseModelfile(LFM2_MODELFILE).template!;
  // Each earlier turn is the whole template plus the appended {{ .Response }}; the system prompt only in its turn.
  t.equal(renderOllamaTemplate(lfm2, [
    { role: 'system', content: 'S' }, { role: 'user', content: 'u1' }, { role: 'assistant', content: 'a1' }, { role: 'user', content: 'u2' },
  ]), '<|startoftext|><|im_start|>system\nS<|im_end|>\n<|im_start|>user\nu1<|im_end|>\n<|im_start|>assistant\na1' +
    '<|startoftext|><|im_start|>system\n<|im_end|>\n<|im_start|>user\nu2<|im_end|>\n<|im_start|>assistant\n');

  // ollama template_test.go TestExecuteWithMessages "chatml": a template with {{ .Response }} closes each turn.
  const chatml = '{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n';
  t.equal(renderOllamaTemplate(chatml, [
    { role: 'system', content: 'You are a helpful assistant!' }, { role: 'user', content: 'Hello friend!' },
    { role: 'assistant', content: 'Hello human!' }, { role: 'user', content: 'What is your name?' },
  ]), '<|im_start|>system\nYou are a helpful assistant!<|im_end|>\n<|im_start|>user\nHello friend!<|im_end|>\n<|im_start|>assistant\nHello human!<|im_end|>\n' +
    '<|im_start|>user\nWhat is your name?<|im_end|>\n<|im_start|>assistant\n');

  // "mistral assistant": a trailing assistant message is continued (text after .Response is cut), not closed.
  t.equal(renderOllamaTemplate('[INST] {{ .Prompt }}[/INST] {{ .Response }}', [
    { role: 'user', content: 'Hello friend!' }, { role: 'assistant', content: 'Hello human!' },
    { role: 'user', content: 'What is your name?' }, { role: 'assistant', content: 'My name is Ollama and I' },
  ]), '[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] My name is Ollama and I');
  t.equal(renderOllamaTemplate(chatml, [{ role: 'user', content: 'u' }, { role: 'assistant', content: 'partial' }]),
    '<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\npartial', 'no <|im_end|> after a response being continued');

  // A system message mid-conversation flushes the pending turn; consecutive user messages merge with a blank line.
  t.equal(renderOllamaTemplate(chatml, [
    { role: 'user', content: 'u1' }, { role: 'assistant', content: 'a1' }, { role: 'system', content: 's2' },
    { role: 'user', content: 'u2' }, { role: 'user', content: 'u3' }, { role: 'tool', content: 'ignored' },
  ]), '<|im_start|>user\nu1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n<|im_start|>system\ns2<|im_end|>\n<|im_start|>user\nu2\n\nu3<|im_end|>\n<|im_start|>assistant\n');
});

t.test('Modelfile SYSTEM and MESSAGE go where Ollama puts them', async (t) => {
  const tmpl = '{{ range .Messages }}[{{ .Role }}:{{ .Content }}]{{ end }}|{{ .System }}';
  const history = [{ role: 'user' as const, content: 'Is Toronto in Canada?' }, { role: 'assistant' as const, content: 'yes' }];
  t.equal(renderOllamaTemplate(tmpl, [{ role: 'user', content: 'q' }], { system: 'S', messages: history }),
    '[system:S][user:Is Toronto in Canada?][assistant:yes][user:q]|S');
  t.equal(renderOllamaTemplate(tmpl, [{ role: 'System', content: 'mine' }, { role: 'user', content: 'q' }], { system: 'S', messages: history }),
    '[user:Is Toronto in Canada?][assistant:yes][system:mine][user:q]|mine', 'a request system message replaces SYSTEM (roles lower-cased)');
  t.equal(renderOllamaTemplate(tmpl, [{ role: 'system', content: 'a' }, { role: 'system', content: 'b' }, { role: 'user', content: 'q' }]),
    '[system:a\n\nb][user:q]|a\n\nb', 'consecutive messages collate');
  t.equal(renderOllamaGenerate(tmpl, 'p', { system: 'S', messages: history }), '[system:S][user:Is Toronto in Canada?][assistant:yes][user:p]|S');
});

t.test('OpenAI-shaped input: content parts, tool calls with JSON arguments, tool names by call id', async (t) => {
  const tmpl = '{{ range .Messages }}{{ .Role }}<{{ .Content }}>{{ len .Images }}{{ range .ToolCalls }}{{ .Function.Name }}{{ .Function.Arguments }}{{ end }}{{ .ToolName }};{{ end }}';
  const out = renderOllamaTemplate(tmpl, [
    { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:,' } }, { type: 'text', text: 'here' }] },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"b":1,"a":"<"}' } }] },
    { role: 'tool', content: 'ok', tool_call_id: 'call_1' },
  ]);
  t.equal(out, 'user<look\n\n\n\nhere>0;assistant<>0f{"a":"\\u003c","b":1};tool<ok>0f;');
  t.equal(renderOllamaTemplate('{{ range .Messages }}{{ .Content }}|{{ end }}', [
    { role: 'user', content: 'a [img] b', images: ['x', 'y'] },
    { role: 'user', content: 'c', images: ['z'] },
  ], { imageMarker: (n) => `[img-${n}]` }), '[img-1]a [img-0] b\n\n[img-2]c|', 'Ollama image tags: the first [img] replaced, the rest prefixed; then collated');
  t.throws(() => renderOllamaTemplate(tmpl, [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{oops' } }] }]),
    { name: 'TemplateError', message: /messages\[0\]\.tool_calls\[0\]\.function\.arguments is not valid JSON/ });
  t.throws(() => renderOllamaTemplate(tmpl, [{ role: 'user', content: [{ type: 'video' }] }]), { message: /messages\[0\]\.content\[0\]/ });
  t.throws(() => renderOllamaTemplate(tmpl, [], { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { type: 3 } } } } }] }),
    { message: /tools\[0\]\.function\.parameters\.properties\.x\.type/ });
});

t.test("lib/chat's messages are accepted as they are", async (t) => {
  const repo: RepoChatMessage[] = [
    { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'text', text: 'there' }] },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
  ];
  t.equal(renderOllamaTemplate('{{ range .Messages }}{{ .Content }}{{ range .ToolCalls }}{{ .Function.Name }}{{ end }};{{ end }}', repo), 'hi\n\nthere;f;');
});

t.test('truncation drops the oldest messages but keeps system ones and the last', async (t) => {
  const tmpl = '{{ range .Messages }}{{ .Role }}:{{ .Content }} {{ end }}';
  const msgs = [
    { role: 'system', content: 'S' }, { role: 'user', content: 'aaaa' }, { role: 'assistant', content: 'bbbb' }, { role: 'user', content: 'cc' },
  ];
  const countTokens = (s: string) => s.length;
  t.equal(renderOllamaTemplate(tmpl, msgs, { truncate: { numCtx: 1000, countTokens } }), 'system:S user:aaaa assistant:bbbb user:cc ');
  t.equal(renderOllamaTemplate(tmpl, msgs, { truncate: { numCtx: 41, countTokens } }), 'system:S assistant:bbbb user:cc ', 'S kept, aaaa dropped (33 <= 41)');
  t.equal(renderOllamaTemplate(tmpl, msgs, { truncate: { numCtx: 1, countTokens } }), 'system:S user:cc ', 'the last message always stays');
});

t.test('fill-in-middle and the think values', async (t) => {
  const fim = '{{- if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>{{- else }}{{ .Prompt }}{{- end }}';
  t.equal(renderOllamaGenerate(fim, 'def add(', { suffix: 'return x' }), '<PRE> def add( <SUF>return x <MID>');
  t.equal(renderOllamaGenerate(fim, 'hello'), 'hello');
  const think = '{{ range .Messages }}{{ end }}{{ .Think }}/{{ .ThinkLevel }}/{{ .IsThinkSet }}';
  t.equal(renderOllamaTemplate(think, []), 'false//false');
  t.equal(renderOllamaTemplate(think, [], { think: true }), 'true/medium/true');
  t.equal(renderOllamaTemplate(think, [], { think: 'high' }), 'true/high/true');
  t.equal(renderOllamaTemplate(think, [], { think: false }), 'false//true');
  const date = '{{ range .Messages }}{{ end }}{{ currentDate }} {{ yesterdayDate }}';
  t.equal(renderOllamaTemplate(date, [], { now: new Date(2025, 2, 1, 12) }), '2025-03-01 2025-02-28');
});

t.test('every command, case-insensitively', async (t) => {
  const m = parseModelfile(`# a comment
from llama3.2:latest

Adapter ./lora.gguf
ADAPTER /abs/second.gguf
license MIT
LICENSE """
Line one.
"Quoted."
"""
system You are Mario from super mario bros, acting as an assistant.
parameter num_ctx 4096
PARAMETER Temperature 1
PARAMETER use_mmap false
PARAMETER seed -1
PARAMETER top_p .5
PARAMETER min_p 5e-2
  MESSAGE user Is Toronto in Canada?
MESSAGE Assistant yes
message system """
multi
line"""
REQUIRES 0.14.0
RENDERER qwen3-coder
PARSER qwen3-coder
DRAFT ./draft.gguf
`);
  t.same(m, {
    from: 'llama3.2:latest',
    parameters: { num_ctx: 4096, temperature: 1, use_mmap: false, seed: -1, top_p: 0.5, min_p: 0.05 },
    template: null,
    system: 'You are Mario from super mario bros, acting as an assistant.',
    license: ['MIT', '\nLine one.\n"Quoted."\n'],
    adapters: ['./lora.gguf', '/abs/second.gguf'],
    messages: [
      { role: 'user', content: 'Is Toronto in Canada?' },
      { role: 'assistant', content: 'yes' },
      { role: 'system', content: '\nmulti\nline' },
    ],
    requires: '0.14.0', renderer: 'qwen3-coder', parser: 'qwen3-coder', draft: './draft.gguf',
    warnings: [],
  });
});

t.test('every parameter Ollama knows, typed', async (t) => {
  const text = 'FROM x\n' + [
    'num_keep 4', 'seed 42', 'num_predict -1', 'top_k 40', 'top_p 0.9', 'min_p 0.05', 'typical_p 1.0', 'repeat_last_n 64', 'temperature 0.8',
    'repeat_penalty 1.1', 'presence_penalty 0.5', 'frequency_penalty -0.5', 'stop ###', 'num_ctx 2048', 'num_batch 512', 'num_gpu 99', 'main_gpu 0',
    'use_mmap TRUE', 'num_thread 8', 'draft_num_predict 4',
  ].map((p) => `PARAMETER ${p}`).join('\n');
  t.same(parseModelfile(text).parameters, {
    num_keep: 4, seed: 42, num_predict: -1, top_k: 40, top_p: 0.9, min_p: 0.05, typical_p: 1, repeat_last_n: 64, temperature: 0.8,
    repeat_penalty: 1.1, presence_penalty: 0.5, frequency_penalty: -0.5, stop: ['###'], num_ctx: 2048, num_batch: 512, num_gpu: 99, main_gpu: 0,
    use_mmap: true, num_thread: 8, draft_num_predict: 4,
  });
  const old = parseModelfile('FROM x\nPARAMETER mirostat 2\nPARAMETER mirostat_eta whatever\nPARAMETER penalize_newline true\nPARAMETER top_k 1\nPARAMETER top_k 2');
  t.same(old.parameters, { top_k: 2 }, 'retired parameters are dropped, the last value wins');
  t.same(old.warnings, [
    'line 2: parameter mirostat is deprecated and ignored (as Ollama does)',
    'line 3: parameter mirostat_eta is deprecated and ignored (as Ollama does)',
    'line 4: parameter penalize_newline is deprecated and ignored (as Ollama does)',
    'line 6: PARAMETER top_k is given again (first on line 5); the last one wins',
  ]);
});

t.test('values: bare, "quoted", """triple-quoted""", trimmed, verbatim', async (t) => {
  // ollama parser_test.go TestParseFileParameters / TestParseFileQuoted / TestParseFileTrimSpace / TestParseFileFrom
  const stop = (v: string) => parseModelfile(`FROM foo\nPARAMETER stop ${v}\n`).parameters.stop;
  t.same(stop('### User:'), ['### User:']);
  t.same(stop('### User: '), ['### User:'], 'bare values are trimmed');
  t.same(stop('"### User: "'), ['### User: '], 'quoted ones keep their spaces');
  t.same(stop('"""### User:"""'), ['### User:']);
  t.same(stop('"""### User:\n"""'), ['### User:\n']);
  t.same(stop('"\\n"'), ['\\n'], 'no escape sequences, as in Ollama: a backslash is a backslash');
  t.same(stop('<|eot_id|>'), ['<|eot_id|>']);
  const sys = (v: string) => parseModelfile(`FROM foo\nSYSTEM ${v}\n`).system;
  t.equal(sys('"""\nThis is a\nmultiline system.\n"""'), '\nThis is a\nmultiline system.\n');
  t.equal(sys('"""This is a\nmultiline system."""   '), 'This is a\nmultiline system.', 'spaces after the closing quote');
  t.equal(sys('"""\nThis is a multiline system with "quotes".\n"""'), '\nThis is a multiline system with "quotes".\n');
  t.equal(sys('""""""'), '');
  t.equal(sys('""'), '');
  t.equal(sys(`"'"`), `'`);
  t.equal(sys(`"""''"'""'""'"'''''""'""'"""`), `''"'""'""'"'''''""'""'`);
  t.equal(sys('"a\nb"'), 'a\nb', 'a "..." value may span lines too');
  t.equal(sys('"a" b\nc"'), 'a" b\nc', 'Ollama: a quote closes only at the end of a line');
  t.equal(sys('# not a comment'), '# not a comment');
  t.equal(sys('你好👋'), '你好👋');
  t.equal(sys('tab\tinside'), 'tab\tinside');
  t.equal(parseModelfile('FROM "     model 1"').from, '     model 1');
  t.equal(parseModelfile('FROM     FOOO BAR    ').from, 'FOOO BAR');
  t.equal(parseModelfile('PARAMETER top_k 1\nFROM lemons make lemonade ').from, 'lemons make lemonade', 'FROM need not come first');
  t.equal(parseModelfile('\ufeffFROM bob\r\nSYSTEM """a\r\nb"""\r\n').system, 'a\nb', 'BOM skipped, CR LF read as LF');
  t.equal(parseModelfile('FROM x\nTEMPLATE """\n{{ .Prompt }}\n"""').template, '\n{{ .Prompt }}\n', 'closing quote at end of file');
});

t.test('decodeModelfile reads UTF-8 and UTF-16 with a byte order mark', async (t) => {
  // ollama parser_test.go TestParseFileUTF16ParseFile / TestParseMultiByte
  const text = 'FROM bob\nPARAMETER num_ctx 4096\nSYSTEM You are a utf16 file. 你好👋\n';
  const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
  const be = Buffer.from(le.subarray(2)).swap16();
  const expected = { from: 'bob', parameters: { num_ctx: 4096 }, system: 'You are a utf16 file. 你好👋' };
  t.match(parseModelfile(decodeModelfile(le)), expected);
  t.match(parseModelfile(decodeModelfile(Buffer.concat([Buffer.from([0xfe, 0xff]), be]))), expected);
  t.match(parseModelfile(decodeModelfile(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]))), expected);
});

t.test('errors name the line and the problem', async (t) => {
  const cases: [string, number, RegExp][] = [
    ['FROM foo\nBADCOMMAND param1 value1\n', 2, /unknown command "BADCOMMAND"/],
    ['FROM foo\n\nPARAMETER temperature abc\n', 3, /PARAMETER temperature abc: the value "abc" must be a number/],
    ['FROM foo\nPARAMETER top_k 1.5\n', 2, /the value "1.5" must be a whole number \(top_k takes an integer\)/],
    ['FROM foo\nPARAMETER use_mmap yes\n', 2, /must be true or false/],
    ['FROM foo\nPARAMETER temperature 1e40\n', 2, /out of range for a float32/],
    ['FROM foo\nPARAMETER numa true\n', 2, /unknown parameter "numa"; known parameters: num_keep, seed/],
    ['FROM foo\nPARAMETER param1\n', 2, /PARAMETER param1 has no value/],
    ['FROM foo\nPARAMETER\n', 2, /PARAMETER needs a value, as in "PARAMETER temperature 0.7"/],
    ['FROM foo\nPARAMETER top-k 1\n', 2, /PARAMETER name "top-k" may only use letters, digits and _/],
    ['FROM foo\nTEMPLATE """{{ .Prompt }}\n\nPARAMETER top_k 1\n', 2, /TEMPLATE: the """ opened here is never closed/],
    ['FROM foo\nSYSTEM """This is a multiline system.""\n', 2, /SYSTEM: the """ opened here is never closed/],
    ['FROM foo\nSYSTEM "\n', 2, /SYSTEM: the " opened here is never closed/],
    ['FROM foo\nMESSAGE badguy I\'m a bad guy!\n', 2, /MESSAGE role must be system, user or assistant, not "badguy"/],
    ['FROM foo\nMESSAGE system\n', 2, /MESSAGE system has no text/],
    ['FROM foo\nMESSAGE user: hi\n', 2, /MESSAGE role must be system, user or assistant, not "user:"/],
    ['FROM foo\nSYSTEM\n', 2, /SYSTEM needs a value \(write SYSTEM "" for an empty one\)/],
    ['FROM foo\n  = x\n', 2, /expected a command .* but found "="/],
    ['FROM:foo\n', 1, /unknown command "FROM:foo"/],
    ['', 1, /no FROM line/],
    ['# only a comment\nPARAMETER top_k 1\n', 1, /no FROM line/],
    ['FROM a\nFROM b\n', 2, /FROM is given twice \(lines 1 and 2\)/],
    ['FROM ""\n', 1, /FROM needs a model/],
    ['FROM a\nREQUIRES soon\n', 2, /REQUIRES must be a version such as 0.14.0/],
  ];
  for (const [text, line, message] of cases) {
    const e = errorOf(text);
    t.equal(e.line, line, `line of ${JSON.stringify(text)}`);
    t.match(e.message, message);
    t.match(e.message, new RegExp(`^Modelfile line ${line}: `));
  }
});

t.test('formatModelfile writes a Modelfile that parses back to the same thing', async (t) => {
  const lfm2 = parseModelfile(LFM2_MODELFILE);
  const text = formatModelfile(lfm2);
  t.equal(text, `FROM ./LFM2-1.2B-Q4_K_M.gguf
TEMPLATE """<|startoftext|><|im_start|>system
{{ .System }}<|im_end|>
<|im_start|>user
{{ .Prompt }}<|im_end|>
<|im_start|>assistant
"""
PARAMETER temperature 0.1
PARAMETER top_k 50
PARAMETER repeat_penalty 1.05
PARAMETER stop <|im_end|>
PARAMETER stop <|endoftext|>
`);
  t.same(parseModelfile(text), lfm2);
  const tricky: Modelfile = base({
    from: ' spaced path/model.gguf ',
    system: 'ends with a quote"\nand "more"',
    template: 'line ends with ""\nnext',
    license: ['"starts with a quote', '""', '"', ' ', '', 'x"\ny'],
    adapters: ['a b'],
    parameters: { stop: ['', ' ', '"', '"""', '\n', 'a"b', '#'], use_mmap: true, temperature: 1e-7, seed: -5 },
    messages: [{ role: 'user', content: '"""' }, { role: 'assistant', content: 'two\nlines' }],
    requires: '0.14.0', renderer: 'r', parser: 'p', draft: 'd',
  });
  const written = formatModelfile(tricky, { header: 'Modelfile generated by "spindle show"\nFROM line below' });
  t.match(written, /^# Modelfile generated by "spindle show"\n# FROM line below\nFROM " spaced path\/model.gguf "\n/);
  t.same(parseModelfile(written), tricky, 'every tricky value reads back unchanged');
  t.throws(() => formatModelfile(base({ system: 'a"""\nb"\nc' })), /cannot be quoted/);
  t.throws(() => formatModelfile(base({ system: 'a\rb' })), /carriage return/);
  t.throws(() => formatModelfile(base({ parameters: { temperature: 'hot' } })), /parameters.temperature must be a finite number/);
  t.throws(() => formatModelfile(base({ parameters: { bogus: 1 } })), /unknown parameter "bogus"/);
});

t.test('template errors surface as TemplateError with a position', async (t) => {
  t.throws(() => renderOllamaTemplate('line one\n{{ .Prompt ', []), { name: 'TemplateError', line: 2, column: 1, message: /unclosed action/ });
  t.throws(() => renderOllamaTemplate('{{ range .Messages }}{{ .Nope }}{{ end }}', [{ role: 'user', content: 'x' }]),
    { message: /line 1, column 25: executing <\.Nope>: can't evaluate field Nope in type \*template\.templateMessage/ });
  t.throws(() => renderOllamaTemplate('{{ define "x" }}{{ end }}{{ template "x" }}', []),
    { line: 1, column: 26, message: /undefined template specified: Ollama wants a pipeline/ });
  t.throws(() => renderOllamaTemplate('{{ .Prompt }}', [{ role: 'assistant', tool_calls: 'f' as never }]), { message: /messages\[0\]\.tool_calls must be an array/ });
  t.ok(new TemplateError('x') instanceof Error);
});
