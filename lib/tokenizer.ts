// The user-facing tokenizer (llm.tokenizer, engine.tokenizer): encode / decode / applyChatTemplate over the
// native GGUF tokenizer and the model's chat template.
// Invariant: a chat prompt is tokenized without adding BOS (the template writes it, as transformers does),
// and parseSpecial is on, so the template's control tokens become their ids.
import { renderChatTemplate, type ChatMessage } from './chat/template.js';
import type { NativeModelInfo, NativeTokenizer } from './native.js';

export interface EncodeOptions {
  addSpecialTokens?: boolean; // default true: BOS where the model asks for it
  parseSpecial?: boolean; // default true: '<|im_start|>'-style text becomes its special token
}

export interface DecodeOptions {
  skipSpecialTokens?: boolean; // default false
}

export interface ApplyChatTemplateOptions {
  tokenize?: boolean; // default true
  addGenerationPrompt?: boolean; // default true
  tools?: unknown[];
  /** Replaces the model's template. */
  chatTemplate?: string;
  /** Extra template variables, e.g. { enable_thinking: false } for Qwen3. */
  chatTemplateKwargs?: Record<string, unknown>;
}

function checkKeys(what: string, options: object, known: readonly string[]): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`${what}: options must be an object`);
  }
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new TypeError(`${what}: unknown option '${key}' (known: ${known.join(', ')})`);
  }
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
    checkKeys('encode', options, ['addSpecialTokens', 'parseSpecial']);
    if (typeof text !== 'string') throw new TypeError('encode: text must be a string');
    const addSpecial = optionalBool('encode', 'addSpecialTokens', options.addSpecialTokens, true);
    const parseSpecial = optionalBool('encode', 'parseSpecial', options.parseSpecial, true);
    return Array.from(this.#native.encode(text, addSpecial, parseSpecial));
  }

  decode(ids: readonly number[] | Int32Array, options: DecodeOptions = {}): string {
    checkKeys('decode', options, ['skipSpecialTokens']);
    const skip = optionalBool('decode', 'skipSpecialTokens', options.skipSpecialTokens, false);
    if (!Array.isArray(ids) && !(ids instanceof Int32Array)) throw new TypeError('decode: ids must be an array of token ids');
    return this.#native.decode(ids instanceof Int32Array ? ids : Array.from(ids), skip);
  }

  /** Renders the chat template; returns token ids (tokenize: true, the default) or the prompt text. */
  applyChatTemplate(messages: readonly ChatMessage[], options: ApplyChatTemplateOptions & { tokenize: false }): string;
  applyChatTemplate(messages: readonly ChatMessage[], options?: ApplyChatTemplateOptions & { tokenize?: true }): number[];
  applyChatTemplate(messages: readonly ChatMessage[], options?: ApplyChatTemplateOptions): number[] | string;
  applyChatTemplate(messages: readonly ChatMessage[], options: ApplyChatTemplateOptions = {}): number[] | string {
    checkKeys('applyChatTemplate', options, ['tokenize', 'addGenerationPrompt', 'tools', 'chatTemplate', 'chatTemplateKwargs']);
    const tokenize = optionalBool('applyChatTemplate', 'tokenize', options.tokenize, true);
    const text = renderChatTemplate(options.chatTemplate ?? this.#info.chatTemplate ?? '', messages, {
      addGenerationPrompt: optionalBool('applyChatTemplate', 'addGenerationPrompt', options.addGenerationPrompt, true),
      bosToken: this.#info.bosToken,
      eosToken: this.#info.eosToken,
      tools: options.tools,
      chatTemplateKwargs: options.chatTemplateKwargs,
    });
    return tokenize ? this.encode(text, { addSpecialTokens: false, parseSpecial: true }) : text;
  }
}
