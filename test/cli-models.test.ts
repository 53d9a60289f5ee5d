// The model commands driven as a person would, in child processes against a local hub (test/helpers/hub-server.ts)
// and a fresh store (SPINDLE_HOME): pull (progress as plain lines off a terminal), list, show, run with a prompt,
// run with piped stdin, the interactive chat in a pseudo-terminal (util-linux `script`) with /set parameter and
// /bye, rm, cp; a second process using the store while a pull runs (list and run answer; a second pull of the
// same model waits for the first instead of downloading again); bad references are one-line errors; a reasoning
// model's thinking printed as Ollama prints it (--hidethinking, --think=false).
import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fixtureModel, PRESETS } from './helpers/fixtures.js';
import { tokenizerGguf } from '../lib/random-model/tokenizer.js';
import { chain, writeScriptedModel } from './tooling/fixtures/index.js';
import { startHubServer } from './helpers/hub-server.js';

const cli = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const model = readFileSync(await fixtureModel({ arch: 'qwen3', tokenizer: 'qwen3', nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 41, tiedEmbeddings: true }));
const hub = await startHubServer(new Map([
  ['org/Tiny-GGUF', { files: [{ path: 'Tiny-Q4_K_M.gguf', bytes: model }] }],
  ['org/Slow-GGUF', { files: [{ path: 'Slow-Q8_0.gguf', bytes: Buffer.concat([model, Buffer.from('another file')]) }] }], // other bytes: its own blob
]));
t.teardown(() => hub.close());
const env = {
  ...process.env, SPINDLE_HOME: mkdtempSync(join(tmpdir(), 'spindle-cli-home-')), HF_ENDPOINT: hub.url,
  HF_HUB_CACHE: mkdtempSync(join(tmpdir(), 'spindle-cli-hfcache-')), HF_TOKEN: '',
};

interface Run { code: number | null; stdout: string; stderr: string }
function spindle(args: string[], input?: string, extraEnv: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [cli, ...args], { env: { ...env, ...extraEnv }, timeout: 120_000, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin!.end(input);
    else child.stdin!.end();
  });
}

const RUN_FLAGS = ['--threads', '1', '--ctx', '512'];

t.test('pull, list, show, run (prompt and piped stdin), cp, rm', async (t) => {
  const pull = await spindle(['pull', 'hf.co/org/Tiny-GGUF']);
  t.equal(pull.code, 0, pull.stderr);
  t.match(pull.stdout, /success: hf\.co\/org\/Tiny-GGUF:latest \(Tiny-Q4_K_M\.gguf\)/);
  t.match(pull.stderr, /pulling Tiny-Q4_K_M\.gguf/);
  t.match(pull.stderr, /100%/);
  const list = await spindle(['list']);
  t.match(list.stdout, /^NAME\s+ID\s+SIZE\s+MODIFIED\n/);
  t.match(list.stdout, /hf\.co\/org\/Tiny-GGUF:Q4_K_M\s+[0-9a-f]{12}\s+\d+ MB\s+Less than a minute ago/);
  const show = await spindle(['show', 'hf.co/org/Tiny-GGUF:Q4_K_M']);
  t.equal(show.code, 0, show.stderr);
  t.match(show.stdout, /architecture\s+qwen3/);
  t.match(show.stdout, /quantization\s+/);
  t.match(show.stdout, /context length\s+\d+/);
  const tmpl = await spindle(['show', 'org/Tiny-GGUF:Q4_K_M', '--template']);
  t.match(tmpl.stdout, /im_start/);

  const one = await spindle(['run', 'hf.co/org/Tiny-GGUF', 'Say something.', ...RUN_FLAGS]);
  t.equal(one.code, 0, one.stderr);
  t.ok(one.stdout.trim().length > 0, 'an answer was printed');
  const piped = await spindle(['run', 'hf.co/org/Tiny-GGUF', ...RUN_FLAGS], 'Say something.\n');
  t.equal(piped.code, 0, piped.stderr);
  t.ok(piped.stdout.trim().length > 0, 'stdin piped in is the prompt');

  const cp = await spindle(['cp', 'hf.co/org/Tiny-GGUF:Q4_K_M', 'tiny']);
  t.equal(cp.code, 0, cp.stderr);
  t.match((await spindle(['list'])).stdout, /^tiny:latest\s/m);
  const rm = await spindle(['rm', 'tiny']);
  t.equal(rm.code, 0);
  t.notMatch((await spindle(['list'])).stdout, /^tiny:latest/m);
  t.ok(readFileSync(join(env.SPINDLE_HOME, 'models', 'manifests', 'hf.co', 'org', 'tiny-gguf', 'q4_k_m')), 'the copy shared its blob; removing it kept the original');
});

t.test('the interactive chat in a pseudo-terminal: a question, /set parameter, /clear, /bye', { skip: process.platform !== 'linux' ? 'needs util-linux script' : false }, async (t) => {
  const script = [`${process.execPath} ${cli} run hf.co/org/Tiny-GGUF --threads 1 --ctx 4096`];
  const child = spawn('script', ['-qfec', script[0], '/dev/null'], { env: { ...env, TERM: 'dumb' } });
  let out = '';
  child.stdout.on('data', (d) => { out += d.toString(); });
  const waitFor = async (re: RegExp, from = 0) => {
    for (let i = 0; i < 600 && !re.test(out.slice(from)); i++) await new Promise((r) => setTimeout(r, 100));
    return re.test(out.slice(from));
  };
  t.ok(await waitFor(/>>> /), 'the prompt appears');
  let mark = out.length;
  child.stdin.write('/set parameter num_predict 5\r');
  t.ok(await waitFor(/Set parameter 'num_predict' to '5'/, mark), '/set parameter is acknowledged');
  mark = out.length;
  child.stdin.write('Hello there\r');
  t.ok(await waitFor(/>>> /, mark + 12), 'an answer, then the prompt again');
  mark = out.length;
  child.stdin.write('/clear\r');
  t.ok(await waitFor(/Cleared session context/, mark));
  // Ctrl-C stops a long answer (up to 2000 tokens) and the chat goes on.
  mark = out.length;
  child.stdin.write('/set parameter num_predict 2000\r');
  t.ok(await waitFor(/Set parameter 'num_predict' to '2000'/, mark));
  mark = out.length;
  child.stdin.write('Write a very long story.\r');
  await new Promise((r) => setTimeout(r, 400));
  const stoppedAt = Date.now();
  child.stdin.write('\x03');
  t.ok(await waitFor(/>>> $/, mark + 30), 'the prompt is back after Ctrl-C');
  t.ok(Date.now() - stoppedAt < 3000, 'the answer stopped at once');
  child.stdin.write('/bye\r');
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  t.equal(code, 0, out);
});

t.test('a second process uses the store while a pull runs; a second pull of the same model waits for it', async (t) => {
  hub.faults.bytesPerMs = model.length / 4000; // the pull takes about 4 s
  t.teardown(() => { hub.faults.bytesPerMs = undefined; });
  const before = hub.log.filter((e) => e.method === 'GET' && e.url.endsWith('Slow-Q8_0.gguf')).length;
  const first = spindle(['pull', 'hf.co/org/Slow-GGUF:Q8_0']);
  await new Promise((r) => setTimeout(r, 800));
  const second = spindle(['pull', 'org/Slow-GGUF:Q8_0']);
  const list = await spindle(['list']);
  t.match(list.stdout, /hf\.co\/org\/Tiny-GGUF:Q4_K_M/, 'list answers during the pull');
  const run = await spindle(['run', 'hf.co/org/Tiny-GGUF', 'hi', ...RUN_FLAGS]);
  t.equal(run.code, 0, 'run answers during the pull');
  const [a, b] = await Promise.all([first, second]);
  t.equal(a.code, 0, a.stderr);
  t.equal(b.code, 0, b.stderr);
  const got = hub.log.filter((e) => e.method === 'GET' && e.url.endsWith('Slow-Q8_0.gguf'));
  t.equal(got.length - before, 1, `one download for both pulls: ${JSON.stringify(got)} ${a.stderr.slice(-300)} ${b.stderr.slice(-300)}`);
});

t.test('bad references are one-line errors', async (t) => {
  const cases: [string[], RegExp][] = [
    [['pull', 'hf.co/org/Nope-GGUF'], /was not found/],
    [['pull', 'hf.co/org/Tiny-GGUF:Q2_K'], /no Q2_K GGUF; it has: Q4_K_M/],
    [['run', 'not a name', 'x'], /is not valid/],
    [['show', 'missing-model'], /not in the store/],
    [['rm', 'missing-model'], /not found/],
    [['pull', 'hf.co/org/Tiny-GGUF'], /^$/],
  ];
  for (const [args, re] of cases) {
    const r = await spindle(args, undefined, args[0] === 'pull' && args[1].includes('Tiny') ? {} : {});
    if (re.source === '^$') {
      t.equal(r.code, 0, 'pulling again is fine');
      continue;
    }
    t.equal(r.code, 1, `${args.join(' ')}: exit 1`);
    t.match(r.stderr, re, `${args.join(' ')}: ${r.stderr.trim()}`);
    t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
  }
  const offline = await spindle(['pull', 'hf.co/org/Other-GGUF'], undefined, { HF_ENDPOINT: 'http://127.0.0.1:1' });
  t.equal(offline.code, 1);
  t.match(offline.stderr, /could not reach/);
});

t.test('create from the LFM2 Modelfile as users write it; run it by name with its template, parameters and stops', async (t) => {
  const { copyFileSync, writeFileSync } = await import('node:fs');
  const { renderOllamaTemplate } = await import('../lib/modelfile/index.js');
  const { loadNative } = await import('../lib/native.js');
  const lfm2 = await fixtureModel({ arch: 'lfm2', tokenizer: 'llama3', nEmbd: 64, nLayer: 6, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', tiedEmbeddings: true, seed: 43 });
  const dir = mkdtempSync(join(tmpdir(), 'spindle-create-'));
  copyFileSync(lfm2, join(dir, 'LFM2-1.2B-Q4_K_M.gguf'));
  const template = '<|startoftext|><|im_start|>system\n{{ .System }}<|im_end|>\n<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n';
  writeFileSync(join(dir, 'Modelfile'), `FROM ./LFM2-1.2B-Q4_K_M.gguf
TEMPLATE """${template}"""
PARAMETER temperature 0.1
PARAMETER top_k 50
PARAMETER repeat_penalty 1.05
PARAMETER stop "<|im_end|>"
PARAMETER stop "<|endoftext|>"
`);
  const created = await spindle(['create', 'lfm2-test', '-f', join(dir, 'Modelfile')]);
  t.equal(created.code, 0, created.stderr);
  t.match(created.stdout, /success: created lfm2-test:latest/);
  const params = await spindle(['show', 'lfm2-test', '--parameters']);
  t.match(params.stdout, /temperature\s+0\.1\n/);
  t.match(params.stdout, /top_k\s+50\n/);
  t.match(params.stdout, /repeat_penalty\s+1\.05\n/);
  t.match(params.stdout, /stop\s+"<\|im_end\|>"\nstop\s+"<\|endoftext\|>"/);
  t.equal((await spindle(['show', 'lfm2-test', '--template'])).stdout, `${template}\n`);

  // The template is the one rendered: the prompt token count is that of the Go template's output.
  const run = await spindle(['run', 'lfm2-test', 'Tell me a story.', '--verbose', ...RUN_FLAGS]);
  t.equal(run.code, 0, run.stderr);
  const tok = loadNative().Tokenizer.fromFile(lfm2);
  const text = renderOllamaTemplate(template, [{ role: 'user', content: 'Tell me a story.' }]);
  t.match(run.stderr, new RegExp(`prompt eval count: ${tok.encode(text, false, true).length} token`), 'the Modelfile TEMPLATE was used');

  // Parameters and stops in effect: a derived model (FROM the store name: template and stops inherited) at
  // temperature 0 gives X; with a stop string taken from inside X the answer ends right before it.
  writeFileSync(join(dir, 'Greedy'), 'FROM lfm2-test\nPARAMETER temperature 0\nPARAMETER num_predict 24\nLICENSE """MIT License\nCopyright (c) the authors"""\n');
  t.equal((await spindle(['create', 'lfm2-greedy', '-f', join(dir, 'Greedy')])).code, 0);
  t.equal((await spindle(['show', 'lfm2-greedy', '--license'])).stdout, 'MIT License\nCopyright (c) the authors\n', 'LICENSE shown');
  const x = (await spindle(['run', 'lfm2-greedy', 'Tell me a story.', ...RUN_FLAGS])).stdout.replace(/\n$/, '');
  t.ok(x.length > 12, `a greedy answer: ${JSON.stringify(x)}`);
  t.equal((await spindle(['run', 'lfm2-greedy', 'Tell me a story.', ...RUN_FLAGS])).stdout.replace(/\n$/, ''), x, 'temperature 0 from the Modelfile: the same answer');
  const stop = x.slice(6, 10);
  writeFileSync(join(dir, 'Stopped'), `FROM lfm2-greedy\nPARAMETER stop ${JSON.stringify(stop)}\n`);
  t.equal((await spindle(['create', 'lfm2-stopped', '-f', join(dir, 'Stopped')])).code, 0);
  const stopped = (await spindle(['run', 'lfm2-stopped', 'Tell me a story.', ...RUN_FLAGS])).stdout.replace(/\n$/, '');
  t.equal(stopped, x.slice(0, x.indexOf(stop)), `stopped before ${JSON.stringify(stop)}`);
  const inherited = await spindle(['show', 'lfm2-stopped', '--parameters']);
  t.match(inherited.stdout, /top_k\s+50\n/, 'parameters inherited from the FROM model');
  t.equal(inherited.stdout.match(/^stop/gm)?.length, 1, 'a parameter the new Modelfile gives replaces the inherited one (Ollama)');

  writeFileSync(join(dir, 'Bad'), 'FROM ./LFM2-1.2B-Q4_K_M.gguf\nPARAMETER temperature hot\n');
  const bad = await spindle(['create', 'bad', '-f', join(dir, 'Bad')]);
  t.equal(bad.code, 1);
  t.match(bad.stderr, /line 2/);
  t.notMatch((await spindle(['list'])).stdout, /^bad:/m, 'nothing written');
});

t.test('vision in the CLI: a created LFM2-VL model takes /image in the chat and image paths in a prompt', async (t) => {
  const { copyFileSync, writeFileSync } = await import('node:fs');
  const sharp = (await import('sharp')).default;
  const { fixtureVisionModel } = await import('./helpers/fixtures.js');
  const fx = await fixtureVisionModel('lfm2VlTiny');
  const dir = mkdtempSync(join(tmpdir(), 'spindle-vl-'));
  copyFileSync(fx.model, join(dir, 'vl.gguf'));
  copyFileSync(fx.mmproj, join(dir, 'mmproj-vl.gguf'));
  writeFileSync(join(dir, 'Modelfile'), 'FROM ./vl.gguf\nPARAMETER temperature 0\nPARAMETER num_predict 4\n');
  const created = await spindle(['create', 'vl', '-f', join(dir, 'Modelfile')]);
  t.equal(created.code, 0, created.stderr);
  const image = join(dir, 'pic.png');
  await sharp({ create: { width: 256, height: 256, channels: 3, background: { r: 200, g: 20, b: 90 } } }).png().toFile(image);
  const show = await spindle(['show', 'vl']);
  t.match(show.stdout, /Projector\n\s+architecture\s+lfm2/, 'the mmproj beside the GGUF came along');
  const one = await spindle(['run', 'vl', `What is in ${image} ?`, '--verbose', ...RUN_FLAGS]);
  t.equal(one.code, 0, one.stderr);
  const count = Number(/prompt eval count: (\d+) token/.exec(one.stderr)?.[1]);
  t.ok(count > 66, `the image's 64 embeddings and 2 markers are in the prompt (${count} tokens)`);
  const child = spawn('script', ['-qfec', `${process.execPath} ${cli} run vl ${RUN_FLAGS.join(' ')}`, '/dev/null'], { env: { ...env, TERM: 'dumb' } });
  let out = '';
  child.stdout.on('data', (d) => { out += d.toString(); });
  const waitFor = async (re: RegExp, from = 0) => {
    for (let i = 0; i < 600 && !re.test(out.slice(from)); i++) await new Promise((r) => setTimeout(r, 100));
    return re.test(out.slice(from));
  };
  t.ok(await waitFor(/>>> /));
  const mark = out.length;
  child.stdin.write(`/image ${image} What is this?\r`);
  t.ok(await waitFor(/\n[^\n]*\S[^\n]*\r?\n>>> /, mark + 20), 'an answer about the image, then the prompt');
  t.notMatch(out.slice(mark), /error:/);
  child.stdin.write('/bye\r');
  t.equal(await new Promise<number | null>((r) => child.on('exit', r)), 0);
});

t.test('run a reasoning model: its thinking between Thinking... and ...done thinking.; --hidethinking; --think=false', async (t) => {
  const vocab = tokenizerGguf('qwen3');
  const ids = ['<think>', 'Reason', 'ing', '.', '</think>', 'ĊĊ', 'Hello', 'Ġworld', '!', '<|im_end|>'].map((p) => vocab.tokens.indexOf(p));
  const dir = mkdtempSync(join(tmpdir(), 'spindle-cli-reasoning-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = await writeScriptedModel(join(dir, 'scripted.gguf'), chain(vocab.tokens.indexOf('Ċ'), ids));
  const shown = await spindle(['run', path, 'Say hello.', ...RUN_FLAGS]);
  t.equal(shown.code, 0, shown.stderr);
  t.equal(shown.stdout, 'Thinking...\nReasoning.\n...done thinking.\n\nHello world!\n');
  t.equal((await spindle(['run', path, 'Say hello.', '--hidethinking', ...RUN_FLAGS])).stdout, 'Hello world!\n');
  t.equal((await spindle(['run', path, 'Say hello.', '--think=false', ...RUN_FLAGS])).stdout, 'Hello world!\n',
    'the template renders the closed block: the model answers at once');
  const bad = await spindle(['run', path, 'x', '--think=deep', ...RUN_FLAGS]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--think must be one of true, false, low, medium, high, max \(got 'deep'\)/);
  const plain = await spindle(['run', await fixtureModel(PRESETS.llama3Tiny), 'x', '--think', ...RUN_FLAGS]);
  t.equal(plain.code, 1, 'a model that does not reason: --think is an error, as Ollama');
  t.match(plain.stderr, /does not support thinking/);
});
