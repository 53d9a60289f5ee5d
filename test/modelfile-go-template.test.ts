// The Go text/template engine (lib/modelfile/go-template.ts) and Ollama's template rules (ollama-template.ts).
// GO_CASES and OLLAMA_CASES: the expected text is what Go's text/template wrote for the same template and data
// (Go 1.19; data decoded from JSON as Go decodes it; Ollama cases through a copy of ollama/ollama
// template/template.go with the String() methods of ollama PR #18391). The rest pins Go semantics this engine
// keeps (and/or short-circuit, scoping, range over maps and integers, struct fields), its one documented
// difference (integral float literals print as integers), and every error with its position.
import t from 'tap';
import {
  goStruct, OLLAMA_FUNCS, ollamaTemplate, parseGoTemplate, renderOllamaTemplate, TemplateError,
  type ChatMessage, type RenderOllamaOptions,
} from '../lib/modelfile/index.js';

const render = (template: string, data: unknown) => parseGoTemplate(template, { funcs: OLLAMA_FUNCS }).execute(data);

/** The TemplateError of parsing and running `template` on `data`. */
function failure(template: string, data: unknown = {}): TemplateError {
  try {
    render(template, data);
  } catch (e) {
    if (e instanceof TemplateError) return e;
    throw e;
  }
  throw new Error(`no error for ${template}`);
}

const GO_CASES: [name: string, template: string, data: unknown, expected: string][] = [
  ["printf", `{{ printf "%s|%d|%v|%q|%5.2f|%-4s|%04d|%x|%t|%%|%c" "a" 42 .list "q\\"x" 3.14159 "ab" 7 255 true 65 }}`, {"list":[1,"two",true]}, `a|42|[1 two true]|"q\\"x"| 3.14|ab  |0007|ff|true|%|A`],
  ["printf-missing-extra", `{{ printf "%s %s" "a" }}|{{ printf "%s" "a" "b" }}|{{ printf "%d" "s" }}`, {}, `a %!s(MISSING)|a%!(EXTRA string=b)|%!d(string=s)`],
  ["print", `{{ print 1 2 "a" "b" 3 }}|{{ println 1 "a" }}|{{ print }}`, {}, `1 2ab3|1 a
|`],
  ["range-map", `{{ range $k, $v := .m }}{{ $k }}={{ $v }};{{ end }}|{{ range .m }}{{ . }}{{ end }}|{{ range $v := .m }}{{ $v }}{{ end }}`, {"m":{"b":2,"a":1,"c":"x","B":0}}, `B=0;a=1;b=2;c=x;|012x|012x`],
  ["range-else", `{{ range .empty }}x{{ else }}empty{{ end }}|{{ range .missing }}x{{ else }}none{{ end }}`, {"empty":[]}, `empty|none`],
  ["break-continue", `{{ range $i, $x := .l }}{{ if eq $x "skip" }}{{ continue }}{{ end }}{{ if eq $x "stop" }}{{ break }}{{ end }}{{ $i }}:{{ $x }} {{ end }}`, {"l":["a","skip","b","stop","c"]}, `0:a 2:b `],
  ["with-else", `{{ with .a }}A={{ . }}{{ else }}noA{{ end }}|{{ with .b }}B={{ . }}{{ else }}noB{{ end }}|{{ with $x := .a }}{{ $x }}{{ end }}`, {"a":"x","b":""}, `A=x|noB|x`],
  ["if-chain", `{{ range .l }}{{ if eq . 1.0 }}one{{ else if eq . 2.0 }}two{{ else }}many{{ end }},{{ end }}`, {"l":[1,2,3]}, `one,two,many,`],
  ["vars", `{{ $x := "a" }}{{ range .l }}{{ $x = . }}{{ end }}{{ $x }}|{{ $y := 1 }}{{ if true }}{{ $y = 2 }}{{ $z := 3 }}{{ $z }}{{ end }}{{ $y }}`, {"l":["p","q"]}, `q|32`],
  ["compare", `{{ eq "a" "a" }} {{ ne "a" "b" }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ge 1 2 }} {{ eq "a" "b" "a" }} {{ eq .nil "x" }} {{ eq .nil .nil2 }}`, {}, `true true true true true false true false true`],
  ["len-index-slice", `{{ len "héllo" }} {{ len .l }} {{ len .m }} {{ index .l 1 }} {{ index .m "k" }} {{ index .m "zz" }} {{ slice "hello" 1 3 }} {{ slice .l 1 }} {{ index "abc" 1 }} {{ slice .l 0 0 }} {{ index .n 0 1 }}`, {"l":[1,2,3],"m":{"k":"v"},"n":[[1,2]]}, `6 3 1 2 v <no value> el [2 3] 98 [] 2`],
  ["comments-trim", `a  {{- /* c */ -}}  b {{/* x */}} c
  {{- "d" -}}
  e {{ "f" -}} 
	g`, {}, `ab  cde fg`],
  ["define-template-block", `{{ define "x" }}[{{ . }}]{{ end }}{{ template "x" "a" }}{{ template "x" .v }}{{ block "y" .v }}<{{ . }}>{{ end }}`, {"v":"V"}, `[a][V]<V>`],
  ["missing", `{{ .missing }}|{{ .m.missing }}|{{ if .missing }}y{{ else }}n{{ end }}`, {"m":{}}, `<no value>|<no value>|n`],
  ["escapes", `{{ html "<a href='x'>&\\"" }}|{{ js "a'b\\"c<d>=\\n" }}|{{ urlquery "a b&c=d/é" }}|{{ "x" | html }}`, {}, `&lt;a href=&#39;x&#39;&gt;&amp;&#34;|a\\'b\\"c\\u003Cd\\u003E\\u003D\\u000A|a+b%26c%3Dd%2F%C3%A9|x`],
  ["collections", `{{ .l }}|{{ .m }}|{{ .e }}|{{ .n }}`, {"l":[1,"a",[2,3],{"z":1}],"m":{"b":[1],"a":"x"},"e":[],"n":null}, `[1 a [2 3] map[z:1]]|map[a:x b:[1]]|[]|<no value>`],
  ["json-func", `{{ json .d }}|{{ json "a<b>&\\u2028" }}|{{ json 1.5 }}|{{ json .l }}`, {"d":{"b":1,"a":[true,null,"x"]},"l":[]}, `{"a":[true,null,"x"],"b":1}|"a\\u003cb\\u003e\\u0026\\u2028"|1.5|[]`],
  ["pipelines", `{{ "a" | printf "%s-%s" "b" }}|{{ .s | len }}|{{ (print "x" "y") | printf "%q" }}|{{ (index .l 0).k }}`, {"s":"abc","l":[{"k":"K"}]}, `b-a|3|"xy"|K`],
  ["dot", `{{ . }}`, "top", `top`],
  ["raw-strings", `{{ \`a\\nb\` }}|{{ "a\\tb" }}|{{ "\\u00e9\\x41" }}`, {}, `a\\nb|a	b|éA`],
  ["range-int-dot", `{{ range $i, $c := .l }}{{ $i }}{{ $c }}{{ end }}{{ range .l }}{{ $.t }}{{ end }}`, {"l":["a","b"],"t":"T"}, `0a1bTT`],
];

const OLLAMA_CASES: [name: string, template: string, messages: ChatMessage[], options: RenderOllamaOptions, expected: string][] = [
  ["response-in-if", `{{ .Prompt }}{{ if .Response }}R:{{ .Response }}END{{ end }}TAIL`, [{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"},{"role":"assistant","content":"partial"}], {}, `u1R:a1ENDTAILu2R:partial`],
  ["response-nested-pipe", `{{ .Prompt }}>{{ print "a" (print .Response "x") "b" }}TAIL`, [{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"},{"role":"assistant","content":"partial"}], {}, `u1>aa1xbTAILu2>apartial`],
  ["response-twice", `{{ .Prompt }}>{{ .Response }}|{{ .Response }}`, [{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"},{"role":"assistant","content":"partial"}], {}, `u1>a1|a1u2>partial`],
  ["legacy-tools", `{{ .System }}|{{ .Tools }}|{{ .Prompt }}`, [{"role":"system","content":"SYS"},{"role":"user","content":"Hello"}], {"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather in <city> & more","parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City name"},"unit":{"type":["string","null"],"enum":["c","f"]},"days":{"type":"integer","description":"days"}}}}}]}, `SYS|<no value>|Hello`],
  ["dollar-messages", `{{ range $.Messages }}[{{ .Role }}]{{ end }}`, [{"role":"system","content":"SYS"},{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"}], {}, `[system][user][assistant][user]`],
  ["tool-result-fields", `{{ range .Messages }}{{ .Role }}:{{ .ToolName }}:{{ .ToolCallID }}:{{ len .ToolCalls }}{{ range .ToolCalls }}[{{ .ID }}|{{ .Function.Index }}|{{ .Function.Name }}|{{ .Function.Arguments }}|{{ json .Function.Arguments }}{{ range $k, $v := .Function.Arguments }} {{ $k }}={{ $v }}{{ end }}]{{ end }};{{ end }}`, [{"role":"assistant","content":"","tool_calls":[{"id":"c1","function":{"index":2,"name":"f","arguments":{"b":2,"a":"x","c":[1,"y"],"d":{"z":1,"y":true},"e":null}}},{"function":{"name":"g"}}]},{"role":"tool","content":"r","tool_name":"t","tool_call_id":"c1"}], {}, `assistant:::2[c1|2|f|{"a":"x","b":2,"c":[1,"y"],"d":{"y":true,"z":1},"e":null}|{"a":"x","b":2,"c":[1,"y"],"d":{"y":true,"z":1},"e":null} a=x b=2 c=[1 y] d=map[y:true z:1] e=<no value>][|0|g|{}|null];tool:t:c1:0;`],
  ["tools-struct-fields", `{{ range .Messages }}{{ end }}{{ range .Tools }}{{ .Type }}|{{ .Function.Name }}|{{ .Function.Description }}|{{ .Function.Parameters.Type }}|{{ .Function.Parameters.Required }}|{{ .Function.Parameters.Properties }}|{{ .Function.Parameters }}|{{ . }}{{ range $k, $p := .Function.Parameters.Properties }}<{{ $k }} {{ $p.Type }} {{ $p.Description }} {{ $p.Enum }} {{ $p.Required }} {{ len $p.AnyOf }}>{{ end }}
{{ end }}`, [{"role":"user","content":"Hello"}], {"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather in <city> & more","parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City name"},"unit":{"type":["string","null"],"enum":["c","f"]},"days":{"type":"integer","description":"days"}}}}},{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"q":{"type":"string"},"filters":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"string"}}}},"tags":{"anyOf":[{"type":"string"},{"type":"null"}]}}}}},{"type":"function","function":{"name":"noparams"}}]}, `function|get_weather|Get the weather in <city> & more|object|[city]|{"city":{"type":"string","description":"City name"},"days":{"type":"integer","description":"days"},"unit":{"type":["string","null"],"enum":["c","f"]}}|{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City name"},"days":{"type":"integer","description":"days"},"unit":{"type":["string","null"],"enum":["c","f"]}}}|{"type":"function","function":{"name":"get_weather","description":"Get the weather in \\u003ccity\\u003e \\u0026 more","parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City name"},"days":{"type":"integer","description":"days"},"unit":{"type":["string","null"],"enum":["c","f"]}}}}}<city string City name [] [] 0><days integer days [] [] 0><unit [string null]  [c f] [] 0>
function|search||object|[]|{"filters":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"string"}}}},"q":{"type":"string"},"tags":{"anyOf":[{"type":"string"},{"type":"null"}]}}|{"type":"object","properties":{"filters":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"string"}}}},"q":{"type":"string"},"tags":{"anyOf":[{"type":"string"},{"type":"null"}]}}}|{"type":"function","function":{"name":"search","description":"","parameters":{"type":"object","properties":{"filters":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"string"}}}},"q":{"type":"string"},"tags":{"anyOf":[{"type":"string"},{"type":"null"}]}}}}}<filters object  [] [] 0><q string  [] [] 0><tags   [] [] 2>
function|noparams|||[]|{}|{"type":"","properties":null}|{"type":"function","function":{"name":"noparams","description":"","parameters":{"type":"","properties":null}}}
`],
  ["json-of-messages", `{{ range .Messages }}{{ json . }}|{{ range .ToolCalls }}{{ json . }}{{ json .Function }}{{ end }}
{{ end }}`, [{"role": "user", "content": "a<b"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": {"b": 1, "a": 2}}}, {"function": {"name": "g"}}]}, {"role": "tool", "content": "r", "tool_name": "f", "tool_call_id": "x"}], {}, `{"Role":"user","Content":"a\\u003cb","Thinking":"","Images":null,"ToolCalls":null,"ToolName":"","ToolCallID":""}|
{"Role":"assistant","Content":"","Thinking":"","Images":null,"ToolCalls":[{"ID":"x","Function":{"Index":0,"Name":"f","Arguments":{"a":2,"b":1}}},{"ID":"","Function":{"Index":0,"Name":"g","Arguments":null}}],"ToolName":"","ToolCallID":""}|{"ID":"x","Function":{"Index":0,"Name":"f","Arguments":{"a":2,"b":1}}}{"Index":0,"Name":"f","Arguments":{"a":2,"b":1}}{"ID":"","Function":{"Index":0,"Name":"g","Arguments":null}}{"Index":0,"Name":"g","Arguments":null}
{"Role":"tool","Content":"r","Thinking":"","Images":null,"ToolCalls":null,"ToolName":"f","ToolCallID":"x"}|
`],
  ["think-vars-legacy", `{{ .Prompt }} {{ .Think }} {{ .ThinkLevel }} {{ .IsThinkSet }}`, [{"role":"user","content":"Hello"}], {"think":false}, `Hello false  true`],
  ["date", `{{ range .Messages }}{{ .Content }}{{ end }} {{ currentDate }} {{ yesterdayDate "x" }}`, [{"role":"user","content":"Hello"}], {}, `Hello 2025-01-02 2025-01-01`],
];

t.test('Go text/template cases render as Go renders them', async (t) => {
  for (const [name, template, data, expected] of GO_CASES) t.equal(render(template, data), expected, name);
});

t.test('Ollama template cases render as Ollama renders them', async (t) => {
  for (const [name, template, messages, options, expected] of OLLAMA_CASES) {
    t.equal(renderOllamaTemplate(template, messages, { ...options, now: new Date(2025, 0, 2, 12) }), expected, name);
  }
});

t.test('and / or return an operand and stop early (Go 1.18+)', async (t) => {
  const data = { a: '', b: 'B', x: 'X', y: 'Y' };
  t.equal(render('{{ or .a .b "dflt" }}|{{ and .x .y }}|{{ and 1 0 }}|{{ or 0 "" }}|{{ not .a }}', data), 'B|Y|0||true');
  t.equal(render('{{ or "x" .nil.missing }}|{{ and "" .nil.missing }}', data), 'x|', 'the failing operand is never evaluated');
  t.equal(render('{{ .b | or .a }}', data), 'B', 'a piped value is the last operand');
});

t.test('numbers: Go literal syntax; integral values print as integers', async (t) => {
  t.equal(render("{{ 1.5 }} {{ 1e-5 }} {{ 0x10 }} {{ 'a' }} {{ -3 }} {{ 1_000 }} {{ 0o17 }} {{ 2.50 }} {{ 0.000123 }} {{ 017 }}", {}),
    '1.5 1e-05 16 97 -3 1000 15 2.5 0.000123 15', 'as Go prints them');
  t.equal(render('{{ 1e6 }} {{ 1234567.5 }}', {}), '1000000 1.2345675e+06', 'Go prints a float literal 1e6 as 1e+06: the one difference');
  t.equal(render('{{ printf "%.2f %e %g %5d|%-5d|" 3.14159 1234.5 0.5 42 7 }}', {}), '3.14 1.234500e+03 0.5    42|7    |');
});

t.test('scoping, range over integers and maps, break and continue in nested ifs', async (t) => {
  t.equal(render('{{ range 3 }}{{ . }}{{ end }}|{{ range $i, $v := 2 }}{{ $i }}{{ $v }}{{ end }}', {}), '012|0011', 'range over an int (Go 1.22)');
  t.equal(render('{{ range $k, $v := . }}{{ $k }}{{ end }}', { b: 1, a: 2, Z: 3, é: 4 }), 'Zabé', 'map keys in byte order');
  t.equal(render('{{ range .l }}{{ range . }}{{ if eq . 2 }}{{ break }}{{ end }}{{ . }}{{ end }};{{ end }}', { l: [[1, 2, 3], [4]] }), '1;4;');
  t.equal(render('{{ with $x := "a" }}{{ $x }}{{ end }}{{ $x := "b" }}{{ $x }}', {}), 'ab');
  t.match(failure('{{ if true }}{{ $x := 1 }}{{ end }}{{ $x }}').message, /undefined variable "\$x"/, 'a variable ends with its structure');
});

t.test('structs, maps, methods and missing keys', async (t) => {
  const msg = goStruct('*template.templateMessage', { Role: 'user', Content: '' });
  t.equal(render('{{ .Role }}:{{ .Content }}:{{ if .Content }}y{{ else }}n{{ end }}', msg), 'user::n');
  t.match(failure('{{ .Nope }}', msg).message, /can't evaluate field Nope in type \*template\.templateMessage/);
  t.equal(render('{{ .missing }}|{{ if .missing }}y{{ end }}|{{ index . "missing" }}', {}), '<no value>||<no value>');
  t.equal(render('{{ .Greet "you" }}|{{ "x" | .Greet }}', { Greet: (who: string) => `hi ${who}` }), 'hi you|hi x', 'functions in data are methods');
  t.match(failure('{{ .a "arg" }}', { a: 1 }).message, /a is not a method but has arguments/);
  t.equal(render('{{ $ }}', 'root'), 'root');
});

t.test('errors name the position and the problem', async (t) => {
  const cases: [template: string, line: number, column: number, message: RegExp][] = [
    ['{{ .Prompt ', 1, 1, /unclosed action/],
    ['ok\n  {{ $x }}', 2, 6, /undefined variable "\$x"/],
    ['{{ foo 1 }}', 1, 4, /function "foo" not defined/],
    ['a\n{{ end }}', 2, 4, /unexpected {{end}}/],
    ['{{ if .x }}a', 1, 1, /unexpected EOF: {{if}} has no {{end}}/],
    ['{{ range .l }}{{ else }}{{ break }}{{ end }}', 1, 28, /{{break}} outside {{range}}/],
    ['{{ 1x }}', 1, 4, /bad number syntax: "1x"/],
    ['{{ .x | "a" }}', 1, 9, /non executable command in pipeline stage 2/],
    ['{{/* x }}', 1, 1, /unclosed comment/],
    ['{{ "\\q" }}', 1, 5, /unknown escape sequence \\q/],
    ['{{ "a" 1 }}', 1, 4, /can't give argument to non-function "a"/],
    ['{{ len 1 2 }}', 1, 4, /executing <len 1 2>: wrong number of args for len: want 1 got 2/],
    ['\n\n   {{ index .l 5 }}', 3, 7, /executing <index \.l 5>: error calling index: index out of range: 5/],
    ['{{ .missing.x }}', 1, 4, /nil pointer evaluating interface \{\}\.x/],
    ['{{ len 3 }}', 1, 4, /len of type int/],
    ['{{ eq "a" 1 }}', 1, 4, /incompatible types for comparison/],
    ['{{ lt true false }}', 1, 4, /invalid type for comparison/],
    ['{{ .s.x }}', 1, 4, /can't evaluate field x in type string/],
    ['{{ slice .l 2 1 }}', 1, 4, /index out of range: 2/],
    ['{{ template "nope" . }}', 1, 1, /template "nope" not defined/],
    ['{{ range .s }}{{ end }}', 1, 10, /range can't iterate over str/],
    ['{{ $x, $y := 1 }}', 1, 6, /too many declarations/],
    ['{{ (1 }}', 1, 7, /unclosed left paren/],
    ['{{ .a.b(1) }}', 1, 8, /unexpected "\(" in operand/],
    ['{{ printf 1 }}', 1, 4, /wrong type for value; expected string; got int/],
  ];
  for (const [template, line, column, message] of cases) {
    const e = failure(template, { l: [1], s: 'str' });
    t.match(e.message, message, template);
    t.same([e.line, e.column], [line, column], `position in ${JSON.stringify(template)}`);
    t.match(e.message, new RegExp(`^template line ${line}, column ${column}: `));
  }
});

t.test("Ollama's Vars and the appended {{ .Response }}", async (t) => {
  t.same(ollamaTemplate('{{ .Prompt }}').vars, ['prompt', 'response']);
  t.same(ollamaTemplate('{{ .System }} {{ .Prompt }} {{ .Response }}').vars, ['prompt', 'response', 'system']);
  t.same(ollamaTemplate('{{ with .Tools }}{{ . }}{{ end }} {{ .System }} {{ .Prompt }}').vars, ['prompt', 'response', 'system', 'tools']);
  t.same(ollamaTemplate('{{ range .Messages }}{{ .Role }} {{ .Content }}{{ end }}').vars, ['content', 'messages', 'role']);
  t.same(ollamaTemplate('{{ range .Messages }}{{ if eq .Role "tool" }}Tool Result: {{ .ToolName }} {{ .Content }}{{ end }}{{ end }}').vars,
    ['content', 'messages', 'role', 'toolname']);
  t.equal(ollamaTemplate('{{ range $.Messages }}{{ end }}').usesMessages, true, '$.Messages counts');
  t.equal(ollamaTemplate('{{ (index $.Messages 0).Content }}').usesMessages, false, 'as Ollama: names inside (...).Field go unseen');
  t.equal(ollamaTemplate('{{ len (slice $.Messages 0) }}').usesMessages, true, 'but inside (...) they count');
  t.equal(renderOllamaTemplate('<{{ .Prompt }}>', [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: 'c' }]),
    '<a>b<c>', 'the appended {{ .Response }} carries each earlier reply');
});
