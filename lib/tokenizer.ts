// The user-facing tokenizer (llm.tokenizer, engine.tokenizer): encode / decode / applyChatTemplate over the
// native GGUF tokenizer and the model's chat template.
// Invariants: a chat prompt is tokenized without adding BOS (the template writes it, as transformers does),
// and parseSpecial is on, so the template's control tokens become their ids; a raw prompt (encodePrompt) gets
// BOS where the model asks for it, unless its text already starts with the BOS text (a rendered template).
// Options are accepted in camelCase and snake_case (add_generation_prompt, as transformers users write them);
// an unknown option is rejected with its name.
import { renderChatTemplate, type ChatMessage } from './chat/template.js';
import type { NativeModelInfo, NativeTokenizer } from './native.js';

export interface EncodeOptions {
  addSpecialTokens?: boolean; // default true: BOS where the model asks for it
  parseSpecial?: boolean; // default true: '<|im_start|>'-style text becomes its special token
  add_special_tokens?: boolean;
  parse_special?: boolean;
}

export interface DecodeOptions {
  skipSpecialTokens?: boolean; // default false
  skip_special_tokens?: boolean;
}

export interface ApplyChatTemplateOptions {
  tokenize?: boolean; // default true
  addGenerationPrompt?: boolean; // default true
  add_generation_prompt?: boolean;
  tools?: unknown[];
  /** Replaces the model's template. */
  chatTemplate?: string;
  chat_template?: string;
  /** Extra template variables, e.g. { enable_thinking: false } for Qwen3. */
  chatTemplateKwargs?: Record<string, unknown>;
  chat_template_kwargs?: Record<string, unknown>;
  /** Vision models: the text that stands for each image part in the rendered prompt. */
  mediaMarker?: string;
  media_marker?: string;
  /** transformers' continue_final_message: the prompt ends after the final message's text, which the model continues
   * (an assistant prefill); addGenerationPrompt then defaults to false (true with it is an error). */
  continueFinalMessage?: boolean;
  continue_final_message?: boolean;
}

const snakeCase = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The options under their camelCase names, read from either spelling; throws naming an unknown or doubled option. */
function readOptions(what: string, options: object, known: readonly string[]): Record<string, unknown> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`${what}: options must be an object`);
  }
  const spellings = new Map<string, string>(); // spelling -> camelCase name
  for (const name of known) spellings.set(name, name).set(snakeCase(name), name);
  const out: Record<string, unknown> = {};
  const seen = new Map<string, string>();
  for (const [key, value] of Object.entries(options)) {
    const name = spellings.get(key);
    if (name === undefined) throw new TypeError(`${what}: unknown option '${key}' (known: ${[...spellings.keys()].join(', ')})`);
    if (value === undefined) continue;
    const previous = seen.get(name);
    if (previous !== undefined) throw new TypeError(`${what}: ${key} and ${previous} are the same option; give only one`);
    seen.set(name, key);
    out[name] = value;
  }
  return out;
}

function optionalBool(what: string, name: string, v: unknown, fallback: boolean): boolean {
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw new TypeError(`${what}: ${name} must be a boolean`);
  return v;
}

export class Tokenizer {
  readonly #native: NativeTokenizer;
  readonly #info: NativeModelInfo;

  /** @internal Built by LLM / Engine from the loaded model. */
  constructor(native: NativeTokenizer, info: NativeModelInfo) {
    this.#native = native;
    this.#info = info;
  }

  get vocabSize(): number { return this.#native.nVocab; }
  get bosToken(): string | null { return this.#info.bosToken; }
  get eosToken(): string | null { return this.#info.eosToken; }
  get bosTokenId(): number | null { return this.#info.bosId >= 0 ? this.#info.bosId : null; }
  get eosTokenId(): number | null { return this.#info.eosId >= 0 ? this.#info.eosId : null; }
  /** End-of-generation ids (EOS, EOT, <|im_end|>, ...). */
  get eogTokenIds(): number[] { return [...this.#info.eogIds]; }
  get chatTemplate(): string | null { return this.#info.chatTemplate; }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const o = readOptions('encode', options, ['addSpecialTokens', 'parseSpecial']);
    if (typeof text !== 'string') throw new TypeError('encode: text must be a string');
    const addSpecial = optionalBool('encode', 'addSpecialTokens', o.addSpecialTokens, true);
    const parseSpecial = optionalBool('encode', 'parseSpecial', o.parseSpecial, true);
    return Array.from(this.#native.encode(text, addSpecial, parseSpecial));
  }

  /**
   * A raw prompt (LLM.generate, Engine.generate, /v1/completions): BOS where the model asks for it, except when
   * the text already starts with the BOS text, as a prompt rendered by the chat template does (no second BOS).
   */
  encodePrompt(text: string): number[] {
    const bos = this.#info.bosToken;
    const rendered = typeof text === 'string' && bos !== null && bos.length > 0 && text.startsWith(bos);
    return this.encode(text, { addSpecialTokens: !rendered, parseSpecial: true });
  }

  decode(ids: readonly number[] | Int32Array, options: DecodeOptions = {}): string {
    const o = readOptions('decode', options, ['skipSpecialTokens']);
    const skip = optionalBool('decode', 'skipSpecialTokens', o.skipSpecialTokens, false);
    if (!Array.isArray(ids) && !(ids instanceof Int32Array)) throw new TypeError('decode: ids must be an array of token ids');
    return this.#native.decode(ids instanceof Int32Array ? ids : Array.from(ids), skip);
  }

  /** Renders the chat template; returns token ids (tokenize: true, the default) or the prompt text. */
  applyChatTemplate(messages: readonly ChatMessage[], options: ApplyChatTemplateOptions & { tokenize: false }): string;
  applyChatTemplate(messages: readonly ChatMessage[], options?: ApplyChatTemplateOptions & { tokenize?: true }): number[];
  applyChatTemplate(messages: readonly ChatMessage[], options?: ApplyChatTemplateOptions): number[] | string;
  applyChatTemplate(messages: readonly ChatMessage[], options: ApplyChatTemplateOptions = {}): number[] | string {
    const o = readOptions('applyChatTemplate', options, ['tokenize', 'addGenerationPrompt', 'tools', 'chatTemplate', 'chatTemplateKwargs',
      'mediaMarker', 'continueFinalMessage']);
    const tokenize = optionalBool('applyChatTemplate', 'tokenize', o.tokenize, true);
    const continueFinalMessage = optionalBool('applyChatTemplate', 'continueFinalMessage', o.continueFinalMessage, false);
    // continuing the final message: no generation prompt unless one is asked for (which is then an error)
    const text = renderChatTemplate((o.chatTemplate as string | undefined) ?? this.#info.chatTemplate ?? '', messages, {
      continueFinalMessage,
      addGenerationPrompt: optionalBool('applyChatTemplate', 'addGenerationPrompt', o.addGenerationPrompt, !continueFinalMessage),
      bosToken: this.#info.bosToken,
      eosToken: this.#info.eosToken,
      tools: o.tools as unknown[] | undefined,
      chatTemplateKwargs: o.chatTemplateKwargs as Record<string, unknown> | undefined,
      mediaMarker: o.mediaMarker as string | undefined,
    });
    return tokenize ? this.encode(text, { addSpecialTokens: false, parseSpecial: true }) : text;
  }
}
