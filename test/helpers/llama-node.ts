// A vision reference for tests: llama.cpp's multimodal (mtmd) path through the npm package @fugood/llama.node
// 1.7.15 (a devDependency; prebuilt CPU binary @fugood/node-llama-linux-x64, no install script needed). Given a
// text model, its mmproj, a prompt with one MEDIA_MARKER per image and the image files, it gives:
//   layoutOf      the prompt's token ids with -1 at every image-embedding position (tokenize with media_paths);
//   nextTokenTopK the probabilities of the k most likely next tokens after the prompt (ids and log-probs);
//   greedy        the greedy continuation's token ids (and the prompt layout as llama.node evaluated it).
//
// How, and the package's quirks this works around (read in node_modules/@fugood/llama.node: lib/*.ts, src/*.cpp):
// - completion() takes a prompt string only (no token ids) and returns text; its completion_probabilities give
//   each token as a display string (`tok_str`), never an id. Ids come from two places: the generated tokens from
//   saveSession's file (llama_state_save_file: 'ggsn', version, n, int32 tokens = the evaluated prompt with -1
//   at media positions, then the generated tokens except the last sampled one, so we ask for n + 1), and the
//   top-k strings through an index of every vocab entry's display string (the GGUF vocab rendered like
//   llama.cpp's token_to_piece + rn-llama's tokens_to_output_formatted_string; ambiguous strings keep every id).
// - Probabilities are post-sampling: at temperature 0 the chosen token has prob 1 and the rest 0 in no
//   particular order. nextTokenTopK therefore runs a one-token completion at temperature 1 with every other
//   sampler neutral: its n_probs list is then softmax(logits), sorted (the sampled token itself is irrelevant).
//   logprob = ln(prob), so logprob_i - logprob_j equals logit_i - logit_j; raw logits are not available.
// - Sampler defaults are not neutral (top_k 40, top_p 0.95, min_p 0.05, penalty_last_n 64, dry_multiplier 1.75,
//   xtc_probability 0.1 with threshold 0 = active, temperature 0.8); NEUTRAL_SAMPLING sets every one. The typical-p
//   option is read natively as `typical_p` (the .d.ts says `typ_p`, which is ignored); `logit_bias`,
//   `max_tokens` and `typ_p` in the .d.ts are not read at all.
// - result.completion_probabilities accumulates over every completion run on the same context; only the last
//   tokens_predicted entries belong to the current call.
// - Prompts are tokenized with special tokens parsed (a literal "<|image_start|>" in the text is the control
//   token). With media, the first text chunk gets BOS (mtmd's add_special); text-only tokenize() adds none.
// - llama.cpp's logs always go to stderr (the native log hook calls the default logger first), about 850 lines
//   per load, and toggleNativeLog(true) with a listener hung a tokenize-with-media call here. So the package
//   runs in a child process whose stderr is kept (its tail goes into error messages) instead of printed; a
//   llama.cpp abort then fails the call instead of killing the test.
// - Hybrid (recurrent) models get a "prompt state cache" by default that replays a repeated prompt from a
//   checkpoint (only the last tokens are re-evaluated). Off by default here (state_cache_budget_mb 0), so every
//   call evaluates the whole prompt in one pass; promptCache: true turns it back on (same results, faster).
// - Its prebuilt linux-x64 CPU binary is a generic x86-64 build (system_info: "CPU : LLAMAFILE = 1 | OPENMP = 1
//   | REPACK = 1", no AVX/AVX2/F16C): about 0.3 s per 512x512 tile with the tiny fixture's mmproj, but minutes
//   per image with LFM2-VL-1.6B shapes. A reference for small fixtures, not for timings; its numerics are its
//   scalar kernels', so compare with tolerances.
// - llama.node 1.7.15's LFM2-VL layout differs from the llama.cpp in docs/design/lfm2-vl.md (section 5.2): it
//   tiles exactly when the image's longer side is above 1024 px (not the should_tile area rule), and a single
//   (untiled) image gets <|img_thumbnail|> before its embeddings. Grid, tile and thumbnail token counts are
//   otherwise the same (test/vision-llama-node.test.ts pins both facts).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package version these helpers were written against (an exact devDependency). */
export const LLAMA_NODE_VERSION = '1.7.15';

/** llama.node's media marker (MTMD_DEFAULT_MEDIA_MARKER, llama.cpp's mtmd_default_marker): one per image in the prompt. */
export const MEDIA_MARKER = '<__media__>';

/** Sampler settings that leave the logits untouched (temperature is set per call). */
export const NEUTRAL_SAMPLING = {
  top_k: 0, top_p: 1, min_p: 0, typical_p: 1, top_n_sigma: -1,
  mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1,
  penalty_last_n: 0, penalty_repeat: 1, penalty_freq: 0, penalty_present: 0,
  dry_multiplier: 0, dry_base: 1.75, dry_allowed_length: 2, dry_penalty_last_n: 0,
  xtc_probability: 0, xtc_threshold: 0.1,
  ignore_eos: false, seed: 0,
} as const;

export interface LlamaNodeVisionOptions {
  contextSize?: number; // n_ctx, default 4096 (a 10-tile image plus thumbnail is ~2830 positions)
  batchSize?: number; // n_batch = n_ubatch, default 512
  threads?: number; // default 1 (see REFERENCE_CONTEXT_OPTIONS in fixtures.ts: shared 2-core machines)
  promptCache?: boolean; // llama.node's prompt state cache for hybrid models, default false
  imageMinTokens?: number; // initMultimodal image_min_tokens (llama.cpp default 64 for LFM2)
  imageMaxTokens?: number; // initMultimodal image_max_tokens (default 256)
  callTimeoutMs?: number; // per call; the child is killed after it, default 180000
}

/** One of the k most likely next tokens. */
export interface TopToken {
  /** The id, or null when the display string matches no vocab entry or several (then see ids). */
  id: number | null;
  /** Every vocab id whose display string is `text` (usually exactly one). */
  ids: number[];
  /** llama.node's display string of the token (tok_str). */
  text: string;
  prob: number;
  /** ln(prob): differences between two tokens' logprobs are their logit differences. */
  logprob: number;
}

export interface GreedyResult {
  /** The generated token ids (n of them, fewer if an end-of-generation token stopped it). */
  tokens: number[];
  /** Their display strings as llama.node reported them (one per generated token, n + 1 of them). */
  pieces: string[];
  text: string; // llama.node's generated text (n + 1 tokens)
  stoppedEos: boolean;
  /** The prompt as llama.node evaluated it (from its session file): -1 at image positions, like layoutOf. */
  promptTokens: number[];
}

export interface LlamaNodeVision {
  /** The prompt's token ids with -1 at each image-embedding position (BOS included when the model adds one). */
  layoutOf(prompt: string, images: string[]): Promise<number[]>;
  /** The k most likely tokens after the prompt, by probability (temperature 1, nothing else). */
  nextTokenTopK(prompt: string, images: string[], k: number): Promise<TopToken[]>;
  /** The greedy continuation of n tokens after the prompt (temperature 0, neutral samplers). */
  greedy(prompt: string, images: string[], n: number): Promise<GreedyResult>;
  /** Text-only tokenization (special tokens parsed, BOS as the model says). */
  tokenize(text: string): Promise<number[]>;
  /** Vocab ids whose display string (as in TopToken.text) is `text`. */
  idsOfDisplayString(text: string): number[];
  /** The child's last stderr lines (llama.cpp's log). */
  logTail(lines?: number): string;
  close(): Promise<void>;
}

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// The child: loads the package, then answers { id, method, args } with ctx[method](...args). Plain JS run with
// `node --input-type=module -e`, so it needs no TypeScript loader.
const CHILD_SOURCE = `
import { createRequire } from 'node:module';
const require = createRequire(process.argv[1]);
let ctx = null;
const send = (m) => process.send(m);
process.on('disconnect', () => process.exit(0));
process.on('message', async ({ id, method, args }) => {
  try {
    let value;
    if (method === 'load') {
      const ln = require('@fugood/llama.node');
      const [modelOptions, mmOptions] = args;
      ctx = await ln.loadModel(modelOptions);
      if (!ctx.initMultimodal(mmOptions)) throw new Error('initMultimodal returned false for ' + mmOptions.path);
      value = { support: ctx.getMultimodalSupport(), build: ln.BuildInfo };
    } else if (method === 'probe') {
      const ln = require('@fugood/llama.node');
      await ln.initLlama();
      value = { build: ln.BuildInfo, devices: await ln.getBackendDevicesInfo() };
    } else if (method === 'release') {
      if (ctx) await ctx.release();
      ctx = null;
    } else {
      value = await ctx[method](...args);
    }
    send({ id, ok: true, value });
  } catch (err) {
    send({ id, ok: false, error: String(err && err.stack || err) });
  }
});
send({ ready: true });
`;

class Child {
  private proc: ChildProcess;
  private next = 1;
  private pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private log: string[] = [];
  private partial = '';
  private exited: string | null = null;
  private starting = true;
  private closing = false;
  readonly ready: Promise<void>;

  constructor(private timeoutMs: number) {
    this.proc = spawn(process.execPath, ['--input-type=module', '-e', CHILD_SOURCE, join(repoRoot, 'package.json')], {
      cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe', 'ipc'], serialization: 'advanced',
      env: { ...process.env, NODE_OPTIONS: '' }, // no TypeScript loader or inspector in the child
    });
    const keep = (d: Buffer) => {
      const lines = (this.partial + d.toString()).split('\n');
      this.partial = lines.pop() ?? '';
      this.log.push(...lines);
      if (this.log.length > 4000) this.log.splice(0, this.log.length - 2000);
    };
    this.proc.stdout!.on('data', keep);
    this.proc.stderr!.on('data', keep);
    this.ready = new Promise<void>((resolve, reject) => {
      this.proc.once('message', (m: any) => (m?.ready ? resolve() : reject(new Error('llama.node child: unexpected first message'))));
      this.proc.once('exit', (code, signal) => reject(new Error(`llama.node child exited before it was ready (${code ?? signal})\n${this.logTail()}`)));
    }).finally(() => {
      this.starting = false;
      this.refState();
    });
    this.proc.on('message', (m: any) => {
      if (m?.id === undefined) return;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      clearTimeout(p.timer);
      this.refState();
      if (m.ok) p.resolve(m.value);
      else p.reject(new Error(`llama.node: ${m.error}\n--- llama.cpp log (tail) ---\n${this.logTail(40)}`));
    });
    this.proc.on('exit', (code, signal) => {
      this.exited = `llama.node child exited (${code ?? signal})`;
      for (const p of this.pending.values()) {
        clearTimeout(p.timer);
        p.reject(new Error(`${this.exited}\n--- llama.cpp log (tail) ---\n${this.logTail(40)}`));
      }
      this.pending.clear();
    });
    this.refState();
  }

  /** The child and its channel keep the parent alive only while a call is pending. */
  private refState(): void {
    const busy = this.starting || this.closing || this.pending.size > 0;
    const ch = this.proc.channel as { ref?: () => void; unref?: () => void } | undefined;
    if (busy) {
      this.proc.ref();
      ch?.ref?.();
    } else {
      this.proc.unref();
      ch?.unref?.();
    }
  }

  call<T = any>(method: string, ...args: unknown[]): Promise<T> {
    if (this.exited) return Promise.reject(new Error(this.exited));
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`llama.node: ${method} took over ${this.timeoutMs} ms; child killed\n${this.logTail(40)}`));
        this.kill();
      }, this.timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.refState();
      this.proc.send({ id, method, args });
    });
  }

  logTail(lines = 80): string {
    return [...this.log, this.partial].filter(Boolean).slice(-lines).join('\n');
  }

  kill(): void {
    if (!this.exited) this.proc.kill('SIGKILL');
  }

  /** Releases the context, then waits (up to 5 s, then kills) for the child to exit. */
  async close(): Promise<void> {
    if (this.exited) return;
    this.closing = true;
    this.refState();
    try {
      await this.call('release');
    } finally {
      const gone = new Promise<void>((resolve) => (this.exited ? resolve() : this.proc.once('exit', () => resolve())));
      if (this.proc.connected) this.proc.disconnect();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([gone, new Promise<void>((resolve) => { timer = setTimeout(() => { this.kill(); resolve(); }, 5000); })]);
      clearTimeout(timer);
    }
  }
}

let probe: Promise<string | null> | undefined;

/**
 * Null when @fugood/llama.node loads on this machine (its prebuilt binary for this platform), else the reason
 * (for t.skip). Checked once per process, in a child process.
 */
export function llamaNodeUnavailable(): Promise<string | null> {
  probe ??= (async () => {
    const child = new Child(60_000);
    try {
      await child.ready;
      await child.call('probe');
      return null;
    } catch (err) {
      return `@fugood/llama.node ${LLAMA_NODE_VERSION} does not load on ${process.platform}-${process.arch}: ${String((err as Error).message).split('\n')[0]}`;
    } finally {
      await child.close().catch(() => child.kill());
    }
  })();
  return probe;
}

// ---- vocab display strings (for completion_probabilities' tok_str -> id) ----

/** GPT-2's byte-level alphabet: the character that stands for each byte, inverted. */
const GPT2_CHAR_TO_BYTE: Map<number, number> = (() => {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return new Map(cs.map((c, i) => [c, bs[i]]));
})();

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8');

/** llama.cpp's token_to_piece(special = true) bytes for one vocab entry (BPE 'gpt2' and SPM 'llama' vocabs). */
function pieceBytes(text: string, type: number, model: string): Uint8Array {
  const CONTROL = 3, UNKNOWN = 2, USER_DEFINED = 4, NORMAL = 1, BYTE = 6;
  if (type === CONTROL || type === UNKNOWN || type === USER_DEFINED) return utf8.encode(text);
  if (type === BYTE) {
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
    if (m) return Uint8Array.of(parseInt(m[1], 16));
    const b = GPT2_CHAR_TO_BYTE.get(text.codePointAt(0) ?? -1);
    return b === undefined ? new Uint8Array() : Uint8Array.of(b);
  }
  if (type !== NORMAL) return new Uint8Array(); // UNUSED: llama.cpp writes nothing
  if (model === 'gpt2') {
    const out: number[] = [];
    for (const ch of text) {
      const b = GPT2_CHAR_TO_BYTE.get(ch.codePointAt(0)!);
      if (b !== undefined) out.push(b);
      else out.push(...utf8.encode(ch));
    }
    return Uint8Array.from(out);
  }
  return utf8.encode(text.replace(/\u2581/g, ' '));
}

/** rn-llama's tokens_to_output_formatted_string, then N-API's UTF-8 decoding (invalid bytes -> U+FFFD). */
function displayString(bytes: Uint8Array): string {
  if (bytes.length === 1 && bytes[0] >= 0x80) return `byte: \\x${bytes[0].toString(16)}`;
  return utf8Decoder.decode(bytes);
}

async function displayIndex(modelPath: string): Promise<Map<string, number[]>> {
  const { readGgufFileInfo } = await import('node-llama-cpp');
  const info = await readGgufFileInfo(modelPath, { readTensorInfo: false, logWarnings: false });
  const tok = (info.metadata as any).tokenizer?.ggml;
  if (!tok?.tokens) throw new Error(`${modelPath}: no tokenizer.ggml.tokens`);
  const tokens: string[] = tok.tokens;
  const types: ArrayLike<number> = tok.token_type ?? [];
  const model: string = tok.model ?? 'gpt2';
  const index = new Map<string, number[]>();
  tokens.forEach((text, id) => {
    const key = displayString(pieceBytes(text, types[id] ?? 1, model));
    const ids = index.get(key);
    if (ids) ids.push(id);
    else index.set(key, [id]);
  });
  return index;
}

/** Tokens of a llama_state_save_file session file ('ggsn', version, n_token_count, int32 tokens, state). */
function sessionTokens(path: string): number[] {
  const b = readFileSync(path);
  if (b.length < 12 || b.readUInt32LE(0) !== 0x6767736e) throw new Error(`${path}: not a llama.cpp session file`);
  const n = b.readUInt32LE(8);
  if (12 + 4 * n > b.length) throw new Error(`${path}: truncated token list (${n} tokens)`);
  return Array.from({ length: n }, (_, i) => b.readInt32LE(12 + 4 * i));
}

interface RawCompletion {
  text: string;
  tokens_evaluated: number;
  tokens_predicted: number;
  stopped_eos?: boolean;
  completion_probabilities?: { content: string; probs: { tok_str: string; prob: number }[] }[];
}

/**
 * Loads `modelPath` and `mmprojPath` in llama.node (CPU, F32 KV cache, no flash attention) in a child process.
 * Call close() when done (an unclosed child does not keep the process alive, but holds the model in memory).
 */
export async function openLlamaNodeVision(modelPath: string, mmprojPath: string, options: LlamaNodeVisionOptions = {}): Promise<LlamaNodeVision> {
  const batch = options.batchSize ?? 512;
  const child = new Child(options.callTimeoutMs ?? 180_000);
  const work = mkdtempSync(join(tmpdir(), 'spindle-llama-node-'));
  const cleanup = () => rmSync(work, { recursive: true, force: true });
  const indexPromise = displayIndex(modelPath); // read while the child loads
  indexPromise.catch(() => {});
  let index: Map<string, number[]>;
  try {
    await child.ready;
    await child.call('load', {
      model: modelPath, n_ctx: options.contextSize ?? 4096, n_batch: batch, n_ubatch: batch,
      n_threads: options.threads ?? 1, n_gpu_layers: 0, n_parallel: 1, flash_attn_type: 'off',
      cache_type_k: 'f32', cache_type_v: 'f32', ctx_shift: false, use_mmap: true,
      ...(options.promptCache ? {} : { state_cache_budget_mb: 0 }),
    }, {
      path: mmprojPath, use_gpu: false,
      ...(options.imageMinTokens !== undefined ? { image_min_tokens: options.imageMinTokens } : {}),
      ...(options.imageMaxTokens !== undefined ? { image_max_tokens: options.imageMaxTokens } : {}),
    });
    index = await indexPromise;
  } catch (err) {
    child.kill();
    cleanup();
    throw err;
  }
  const vocabIndex = index;
  const checkPrompt = (prompt: string, images: string[]) => {
    const markers = prompt.split(MEDIA_MARKER).length - 1;
    if (markers !== images.length) {
      throw new Error(`prompt has ${markers} ${MEDIA_MARKER} marker(s) but ${images.length} image(s) were given`);
    }
  };
  const complete = async (prompt: string, images: string[], extra: Record<string, unknown>): Promise<RawCompletion> => {
    checkPrompt(prompt, images);
    return child.call<RawCompletion>('completion', { prompt, media_paths: images, ...NEUTRAL_SAMPLING, ...extra });
  };
  let sessions = 0;

  return {
    async layoutOf(prompt, images) {
      checkPrompt(prompt, images);
      const r = await child.call<{ tokens: Int32Array }>('tokenize', prompt, { media_paths: images });
      return Array.from(r.tokens);
    },

    async nextTokenTopK(prompt, images, k) {
      if (!(Number.isInteger(k) && k >= 1)) throw new RangeError(`k must be a positive integer, got ${k}`);
      const r = await complete(prompt, images, { temperature: 1, n_predict: 1, n_probs: k });
      const step = r.completion_probabilities?.slice(-Math.max(1, r.tokens_predicted))[0];
      if (!step) throw new Error('llama.node returned no completion_probabilities');
      return step.probs.map(({ tok_str, prob }) => {
        const ids = vocabIndex.get(tok_str) ?? [];
        return { id: ids.length === 1 ? ids[0] : null, ids, text: tok_str, prob, logprob: Math.log(prob) };
      });
    },

    async greedy(prompt, images, n) {
      if (!(Number.isInteger(n) && n >= 1)) throw new RangeError(`n must be a positive integer, got ${n}`);
      // the session holds the generated tokens except the last sampled one: ask for one more
      const r = await complete(prompt, images, { temperature: 0, n_predict: n + 1, n_probs: 1 });
      const path = join(work, `session-${sessions++}.bin`);
      await child.call('saveSession', path);
      const all = sessionTokens(path);
      rmSync(path, { force: true });
      const nPrompt = r.tokens_evaluated - r.tokens_predicted;
      const steps = r.completion_probabilities?.slice(-r.tokens_predicted) ?? [];
      return {
        tokens: all.slice(nPrompt, nPrompt + n),
        pieces: steps.map((s) => s.content),
        text: r.text,
        stoppedEos: !!r.stopped_eos,
        promptTokens: all.slice(0, nPrompt),
      };
    },

    async tokenize(text) {
      const r = await child.call<{ tokens: Int32Array }>('tokenize', text);
      return Array.from(r.tokens);
    },

    idsOfDisplayString(text) {
      return [...(vocabIndex.get(text) ?? [])];
    },

    logTail(lines) {
      return child.logTail(lines);
    },

    async close() {
      try {
        await child.close();
      } finally {
        cleanup();
      }
    },
  };
}
