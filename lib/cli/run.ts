// `spindle run <model> [prompt]`: chat with a model in the terminal, as `ollama run` does.
//   With a prompt (or text piped on stdin): prints the answer, streamed, and exits.
//   Otherwise an interactive chat with history: multi-line input between """ lines, /bye, /clear,
//   /set parameter <name> <value>, /set system <text>, /show, /image <path> <question>, image paths written in
//   the prompt (vision models), Ctrl-C stops the current answer (at the prompt it says how to leave), Ctrl-D exits.
// The model is a store name, a hub reference (pulled with progress first) or a .gguf path. Sampling is the
// server's Ollama sampling (lib/server/routes/ollama/ollama.ts: Ollama's defaults, then the Modelfile's
// PARAMETERs, then /set parameter); a Modelfile's TEMPLATE, SYSTEM and MESSAGEs are used when the model has them.
// A reasoning model's thinking (its chat template writes <think> blocks) prints between "Thinking..." and
// "...done thinking." before the answer, as Ollama's does (--hidethinking: not printed; --think false|true|level,
// /set think, /set nothink: the template's thinking switch); the history keeps the answer only.
// Invariant: returns an exit code (0, 1 for an error, 2 for usage, 130 after Ctrl-C in one-shot mode); every
// error is one line on stderr; the engine is always closed.
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import type { ChatMessage, ContentPart } from '../chat/template.js';
import { EngineCore } from '../engine-core.js';
import { normalizeEngineOptions } from '../engine-options.js';
import { readModelFileInfo } from '../gguf/file-info.js';
import { resolveModel, type ResolvedModel } from '../models/resolve.js';
import { ollamaSampling, type OllamaOptions } from '../server/routes/ollama/ollama.js';
import { MEDIA_MARKER } from '../vision/multimodal-prompt.js';
import { imageSources } from '../chat/template.js';
import type { CommandIo } from './io.js';
import { openStore, reportError } from './models/common.js';
import { progressPrinter } from './models/progress.js';
import { renderPrompt } from './run-prompt.js';
import { detectReasoningParser, reasoningStart, ReasoningStream, type ReasoningParser, type ReasoningPiece } from '../reasoning/index.js';
import type { ThinkValue } from '../modelfile/index.js';

const HELP = `Usage: spindle run <model> [prompt] [flags]

Chats with a model: a store name, a hub reference (hf.co/<org>/<repo>[:<quant>], pulled first if needed) or a
.gguf path. With a prompt (or text on stdin) prints the answer and exits; otherwise an interactive chat.

Flags:
  --threads N        CPU threads (default: every core)
  --ctx N            context length (default: the Modelfile's num_ctx, else 4096 or the model's if smaller)
  --verbose          timings after each answer
  --think[=VALUE]    thinking of a reasoning model: true, false, low, medium, high, max (default: the model's)
  --hidethinking     do not print the thinking
  -h, --help         this text

In the chat: /bye, /clear, /set parameter <name> <value>, /set system <text>, /set think, /set nothink, /show,
/image <path> <question>,
"""multi-line input""", Ctrl-C stops an answer, Ctrl-D exits.
`;

const IMAGE_FILE = /\.(png|jpe?g|webp|gif)$/i;

interface Session {
  core: EngineCore;
  resolved: ResolvedModel;
  messages: ChatMessage[];
  system: string | null;
  options: OllamaOptions;
  verbose: boolean;
  think: ThinkValue | undefined; // undefined: the template's default
  hideThinking: boolean;
}

const THINK_VALUES: Record<string, ThinkValue> = { true: true, false: false, low: 'low', medium: 'medium', high: 'high', max: 'max' };

/** Why `think` cannot be used with the session's model (null: it can): thinking needs a model that reasons. */
function thinkProblem(s: Session, think: ThinkValue): string | null {
  if (think === false) return null;
  return sessionParser(s) ? null : `"${s.resolved.name}" does not support thinking`;
}

function sessionParser(s: Session): ReasoningParser | null {
  return detectReasoningParser(s.resolved.manifest?.template ?? s.core.readyValue?.info.chatTemplate ?? '');
}

/** Ollama's bare `--think` means true: give parseArgs the value it needs. */
function withThinkValue(argv: string[]): string[] {
  return argv.map((a, i) => (a === '--think' && (i + 1 >= argv.length || !(argv[i + 1] in THINK_VALUES)) ? '--think=true' : a));
}

/** A user turn's text and images: image paths written in the prompt (existing image files) become images. */
function userTurn(text: string, vision: boolean, images: string[] = []): ChatMessage {
  const words = text.split(/\s+/);
  const found = vision ? words.filter((w) => IMAGE_FILE.test(w) && existsSync(w.replace(/^~(?=\/)/, process.env.HOME ?? '~'))) : [];
  const all = [...images, ...found];
  if (all.length === 0) return { role: 'user', content: text };
  const rest = words.filter((w) => !found.includes(w)).join(' ').trim();
  const parts: ContentPart[] = all.map((p) => ({ type: 'image', image: p }));
  if (rest) parts.push({ type: 'text', text: rest });
  return { role: 'user', content: parts };
}

/** One answer: streamed to stdout; returns its text (partial when stopped). */
async function answer(s: Session, io: CommandIo, signal: AbortSignal): Promise<string> {
  const { tokenizer, info } = await s.core.ready();
  const params = ollamaSampling(s.options, info.maxModelLen, null);
  const messages = [...(s.system ? [{ role: 'system' as const, content: s.system }] : []), ...s.messages];
  const vision = s.core.acceptsImages;
  const text = renderPrompt(s.resolved.manifest, tokenizer, messages, vision ? MEDIA_MARKER : undefined, s.think);
  const parser = sessionParser(s);
  const thoughts = parser ? new ReasoningStream(parser, reasoningStart(parser, text)) : null;
  const sources = vision ? imageSources(messages) : [];
  const prompt = sources.length > 0
    ? await s.core.multimodalPrompt(text, sources, 'image', true, s.core.offlineMediaFetch)
    : tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: true });
  const start = performance.now();
  const submission = s.core.submitMany([prompt], [params], { stream: true, signal });
  const handle = submission.handles[0][0];
  let out = '';
  let tokens = 0;
  let first = 0;
  const state: { thinking: 'no' | 'open' | 'done' } = { thinking: 'no' };
  const print = (pieces: ReasoningPiece[]): void => {
    for (const p of pieces) {
      if (p.kind === 'reasoning') {
        if (s.hideThinking) continue;
        if (state.thinking === 'no') io.stdout.write('Thinking...\n');
        state.thinking = 'open';
        io.stdout.write(p.text);
      } else {
        if (state.thinking === 'open') io.stdout.write('\n...done thinking.\n\n');
        state.thinking = 'done';
        out += p.text;
        io.stdout.write(p.text);
      }
    }
  };
  try {
    for await (const d of handle.deltas!) {
      if (tokens === 0 && d.tokenIds.length > 0) first = performance.now();
      tokens += d.tokenIds.length;
      print(thoughts ? thoughts.push(d.text) : [{ kind: 'content', text: d.text }]);
    }
  } finally {
    submission.detach();
    if (thoughts) print(thoughts.finish());
  }
  io.stdout.write(state.thinking === 'open' ? '\n...done thinking.\n' : '\n');
  if (s.verbose) {
    const end = performance.now();
    const promptTokens = 'tokenIds' in prompt ? prompt.tokenIds.length : prompt.length;
    io.stderr.write(`prompt eval count: ${promptTokens} token(s)\nprompt eval duration: ${((first || end) - start).toFixed(0)}ms\n` +
      `eval count: ${tokens} token(s)\neval rate: ${tokens > 1 ? ((tokens - 1) / ((end - first) / 1000)).toFixed(2) : '0'} tokens/s\n`);
  }
  return out;
}

/** `/set parameter <name> <value...>`: Ollama's typed options (stop takes every following word). */
function setParameter(s: Session, name: string, values: string[], io: CommandIo): void {
  if (!name || values.length === 0) {
    io.stdout.write('Usage: /set parameter <name> <value>\n');
    return;
  }
  const next: OllamaOptions = { ...s.options };
  if (name === 'stop') next.stop = values;
  else {
    const v = Number(values[0]);
    if (!Number.isFinite(v)) {
      io.stdout.write(`Couldn't set parameter: ${name} must be a number (got '${values[0]}')\n`);
      return;
    }
    next[name] = v;
  }
  try {
    ollamaSampling(next, 1 << 30, null); // checks names and ranges as the server does
    s.options = next;
    io.stdout.write(`Set parameter '${name}' to '${values.join(', ')}'\n`);
  } catch (e) {
    io.stdout.write(`Couldn't set parameter: ${(e as Error).message}\n`);
  }
}

async function repl(s: Session, io: CommandIo, stdin: Readable & { isTTY?: boolean }): Promise<number> {
  const rl = createInterface({ input: stdin, output: io.stdout, terminal: stdin.isTTY === true, prompt: '>>> ' });
  let current: AbortController | null = null;
  rl.on('SIGINT', () => {
    if (current) current.abort();
    else {
      io.stdout.write('\nUse Ctrl + d or /bye to exit.\n');
      rl.prompt();
    }
  });
  const vision = s.core.acceptsImages;
  let multi: string[] | null = null;
  rl.prompt();
  for await (const raw of rl) {
    let line = raw;
    if (multi !== null) {
      if (line.trimEnd().endsWith('"""')) {
        multi.push(line.trimEnd().slice(0, -3));
        line = multi.join('\n');
        multi = null;
      } else {
        multi.push(line);
        continue;
      }
    } else if (line.trimStart().startsWith('"""')) {
      const rest = line.trimStart().slice(3);
      if (rest.trimEnd().endsWith('"""') && rest.trim().length >= 3) line = rest.trimEnd().slice(0, -3);
      else {
        multi = [rest];
        continue;
      }
    }
    const text = line.trim();
    let images: string[] = [];
    let prompt = text;
    if (text === '') {
      rl.prompt();
      continue;
    }
    if (text.startsWith('/')) {
      const [cmd, ...args] = text.split(/\s+/);
      if (cmd === '/bye' || cmd === '/exit') break;
      if (cmd === '/clear') {
        s.messages = [];
        io.stdout.write('Cleared session context\n');
      } else if (cmd === '/set' && args[0] === 'parameter') {
        setParameter(s, args[1], args.slice(2), io);
      } else if (cmd === '/set' && (args[0] === 'think' || args[0] === 'nothink')) {
        const think = args[0] === 'nothink' ? false : args[1] === undefined ? true : THINK_VALUES[args[1]];
        const problem = think === undefined ? `think must be one of ${Object.keys(THINK_VALUES).join(', ')} (got '${args[1]}')`
          : thinkProblem(s, think);
        if (problem) io.stdout.write(`Couldn't set think: ${problem}\n`);
        else {
          s.think = think;
          io.stdout.write(think === false ? 'Set \'nothink\' mode.\n' : 'Set \'think\' mode.\n');
        }
      } else if (cmd === '/set' && args[0] === 'system') {
        s.system = text.replace(/^\/set\s+system\s*/, '');
        io.stdout.write('Set system message.\n');
      } else if (cmd === '/show') {
        io.stdout.write(`model: ${s.resolved.name}\nfile: ${s.resolved.model}\n${s.system ? `system: ${s.system}\n` : ''}` +
          `parameters: ${JSON.stringify(s.options)}\n`);
      } else if (cmd === '/image' && args.length > 0) {
        if (!vision) {
          io.stdout.write('This model does not take images (it has no vision projector).\n');
          rl.prompt();
          continue;
        }
        images = [args[0]];
        prompt = args.slice(1).join(' ');
      } else {
        io.stdout.write('Available commands: /bye, /clear, /set parameter <name> <value>, /set system <text>, /set think, /set nothink, /show, /image <path> <question>\n');
      }
      if (images.length === 0) {
        rl.prompt();
        continue;
      }
    }
    const turn = userTurn(prompt, vision, images);
    s.messages.push(turn);
    current = new AbortController();
    try {
      const reply = await answer(s, io, current.signal);
      s.messages.push({ role: 'assistant', content: reply });
    } catch (e) {
      s.messages.pop();
      io.stderr.write(`error: ${(e as Error).message}\n`);
    } finally {
      current = null;
    }
    rl.prompt();
  }
  rl.close();
  return 0;
}

async function readAll(stdin: Readable): Promise<string> {
  let text = '';
  for await (const chunk of stdin) text += chunk.toString();
  return text;
}

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr },
  stdin: Readable & { isTTY?: boolean } = process.stdin): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: withThinkValue(argv), allowPositionals: true, strict: true,
      options: {
        help: { type: 'boolean', short: 'h' }, threads: { type: 'string' }, ctx: { type: 'string' }, verbose: { type: 'boolean' },
        nowordwrap: { type: 'boolean' }, think: { type: 'string' }, hidethinking: { type: 'boolean' },
      },
    });
    if (parsed.values.think !== undefined && !(parsed.values.think in THINK_VALUES)) {
      throw new Error(`--think must be one of ${Object.keys(THINK_VALUES).join(', ')} (got '${parsed.values.think}')`);
    }
  } catch (e) {
    io.stderr.write(`spindle run: ${(e as Error).message}\n${HELP}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    (values.help ? io.stdout : io.stderr).write(HELP);
    return values.help ? 0 : 2;
  }
  let core: EngineCore | null = null;
  try {
    const resolved = await resolveModel(positionals[0], { store: openStore(), onProgress: progressPrinter(io) });
    const params = resolved.manifest?.parameters ?? {};
    const ctxTrain = readModelFileInfo(resolved.model).ctxTrain ?? 4096;
    const ctx = values.ctx !== undefined ? Number(values.ctx) : typeof params.num_ctx === 'number' ? params.num_ctx : Math.min(4096, ctxTrain);
    core = new EngineCore(normalizeEngineOptions({
      model: resolved.model, maxModelLen: ctx, threads: values.threads !== undefined ? Number(values.threads) : undefined,
      mmproj: resolved.mmproj ?? undefined,
    }, 'spindle run'));
    await core.ready();
    const { num_ctx: _ignored, ...options } = params;
    const s: Session = {
      core, resolved, verbose: values.verbose === true, system: resolved.manifest?.system ?? null,
      messages: (resolved.manifest?.messages ?? []).map((m) => ({ role: m.role as ChatMessage['role'], content: m.content })),
      options: options as OllamaOptions,
      think: values.think === undefined ? undefined : THINK_VALUES[values.think], hideThinking: values.hidethinking === true,
    };
    const problem = s.think === undefined ? null : thinkProblem(s, s.think);
    if (problem) throw new Error(problem);
    let prompt = positionals.slice(1).join(' ');
    if (stdin.isTTY !== true) prompt = [prompt, (await readAll(stdin)).trim()].filter(Boolean).join('\n\n'); // piped: one-shot, as Ollama
    if (prompt !== '') {
      const controller = new AbortController();
      let stopped = false;
      const onSigint = () => { stopped = true; controller.abort(); };
      process.once('SIGINT', onSigint);
      try {
        s.messages.push(userTurn(prompt, core.acceptsImages));
        await answer(s, io, controller.signal);
      } finally {
        process.off('SIGINT', onSigint);
      }
      return stopped ? 130 : 0;
    }
    return await repl(s, io, stdin);
  } catch (e) {
    return reportError(e, io, 'run');
  } finally {
    await core?.close();
  }
}
