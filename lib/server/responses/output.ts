// The output items of a response (Responses API), assembled from the model's text as it streams: a `reasoning`
// item for a reasoning model's thinking (vLLM's shape: one `reasoning_text` content part, no summary), a `message`
// item holding one `output_text` part for plain text, one `function_call` item per tool call the tool-call parser
// finds; and, when streaming, the events that build them (response.output_item.added, content_part.added,
// reasoning_text.delta / done, output_text.delta / done, function_call_arguments.delta / done, output_item.done).
// Invariant: the non-streamed path feeds the same deltas through the same assembler, so a streamed response's
// items (and their logprobs) are exactly the non-streamed ones; every item that was added is done before the response ends, and a
// response always has at least one item (an empty message when the model said nothing, or only whitespace).
import type { ToolCallParser } from '../../tools/index.js';
import type { ChatTokenLogprob } from '../logprobs.js';
import { OutputSplitter, type OutputEvent, type RequestReasoning } from '../reasoning.js';
import { randomHex } from '../generation.js';

export type Item = Record<string, unknown>;
export type Emit = (type: string, fields: Record<string, unknown>) => void;

export function responseId(prefix: string): string {
  return `${prefix}_${randomHex(16)}`;
}

export class OutputAssembler {
  readonly items: Item[] = [];
  readonly #emit: Emit | null;
  readonly #output: OutputSplitter;
  #open: Item | null = null; // the item being built (last of items)
  #pending = ''; // whitespace before any message text (dropped when a call follows, as around tool calls)
  #calls = 0;
  // Logprobs of tokens whose text has not reached an item yet (held back by the splitter, or whitespace before a
  // message); the message text they turn into takes them, reasoning or a tool call drops them.
  #logprobs: ChatTokenLogprob[] = [];

  constructor(parser: ToolCallParser | null, emit: Emit | null, reasoning: RequestReasoning | null = null) {
    this.#output = new OutputSplitter(reasoning, parser);
    this.#emit = emit;
  }

  /** Whether the output reasoned (so far). */
  get reasoned(): boolean { return this.#output.reasoned; }

  /** Function calls made so far. */
  get calls(): number { return this.#calls; }

  /**
   * The next piece of the model's text; `logprobs`: its tokens' (when the request asked for them). A piece's tokens
   * go to the message text it adds to (its output_text part's `logprobs` and its delta event's), whatever else the
   * piece holds; a piece that adds only reasoning or tool-call text, or none while the answer is still to come (a
   * reasoning block's tags, the whitespace after it), drops them and those waiting (those items carry none); a piece
   * held back otherwise waits for the text it turns into.
   */
  push(text: string, logprobs?: readonly ChatTokenLogprob[]): void {
    const events = text.length > 0 ? this.#output.push(text) : [];
    if (logprobs) this.#logprobs.push(...logprobs);
    // no answer text from this piece, and either other items' text or the answer still to come (a reasoning block,
    // its tags, the whitespace after it): what waits is not the message's
    if (!events.some((e) => e.type === 'content') && (events.length > 0 || this.#output.beforeAnswer)) this.#logprobs = [];
    this.#events(events);
  }

  /**
   * The model finished: held-back text is flushed, the open item is done (and an empty message added if none);
   * `incomplete` (cut by max_output_tokens or aborted): the last item's status says so, as OpenAI's does.
   */
  finish(incomplete = false): void {
    this.#events(this.#output.finish());
    if (this.items.length === 0) this.#openMessage();
    this.#close(incomplete ? 'incomplete' : 'completed');
  }

  #events(events: OutputEvent[]): void {
    for (const e of events) {
      if (e.type === 'reasoning') this.#reason(e.text);
      else if (e.type === 'content') this.#text(e.text);
      else if (e.type === 'tool_call') this.#openCall(e.name);
      else this.#arguments(e.fragment);
    }
  }

  #index(): number { return this.items.length - 1; }

  #text(text: string): void {
    if (text.length === 0) return;
    if (this.#open?.type !== 'message') {
      if ((this.#pending + text).trim().length === 0) {
        this.#pending += text;
        return;
      }
      text = this.#pending + text;
      this.#pending = '';
      this.#openMessage();
    }
    const part = (this.#open!.content as Item[])[0];
    part.text = (part.text as string) + text;
    const logprobs = this.#logprobs;
    this.#logprobs = [];
    (part.logprobs as ChatTokenLogprob[]).push(...logprobs);
    this.#emit?.('response.output_text.delta', { item_id: this.#open!.id, output_index: this.#index(), content_index: 0, delta: text, logprobs });
  }

  #reason(text: string): void {
    if (this.#open?.type !== 'reasoning') {
      this.#close();
      const item: Item = { id: responseId('rs'), type: 'reasoning', summary: [], content: [], status: 'in_progress' };
      this.items.push(item);
      this.#open = item;
      this.#emit?.('response.output_item.added', { output_index: this.#index(), item: structuredClone(item) });
      const part = { type: 'reasoning_text', text: '' };
      (item.content as Item[]).push(part);
      this.#emit?.('response.content_part.added', { item_id: item.id, output_index: this.#index(), content_index: 0, part: { ...part } });
    }
    const part = (this.#open!.content as Item[])[0];
    part.text = (part.text as string) + text;
    this.#emit?.('response.reasoning_text.delta', { item_id: this.#open!.id, output_index: this.#index(), content_index: 0, delta: text });
  }

  #openMessage(): void {
    this.#close();
    const item: Item = { id: responseId('msg'), type: 'message', status: 'in_progress', role: 'assistant', content: [] };
    this.items.push(item);
    this.#open = item;
    this.#emit?.('response.output_item.added', { output_index: this.#index(), item: structuredClone(item) });
    const part = { type: 'output_text', text: '', annotations: [], logprobs: [] };
    (item.content as Item[]).push(part);
    // a copy of its own (an event log keeps the object: the part's logprobs grow after)
    this.#emit?.('response.content_part.added', { item_id: item.id, output_index: this.#index(), content_index: 0, part: structuredClone(part) });
  }

  #openCall(name: string): void {
    this.#close();
    this.#pending = '';
    this.#logprobs = [];
    this.#calls++;
    const item: Item = { id: responseId('fc'), type: 'function_call', status: 'in_progress', call_id: responseId('call'), name, arguments: '' };
    this.items.push(item);
    this.#open = item;
    this.#emit?.('response.output_item.added', { output_index: this.#index(), item: { ...item } });
  }

  #arguments(fragment: string): void {
    if (fragment.length === 0 || this.#open?.type !== 'function_call') return;
    this.#open.arguments = (this.#open.arguments as string) + fragment;
    this.#emit?.('response.function_call_arguments.delta', { item_id: this.#open.id, output_index: this.#index(), delta: fragment });
  }

  #close(status = 'completed'): void {
    const item = this.#open;
    if (!item) return;
    this.#open = null;
    item.status = status;
    const index = this.#index();
    if (item.type === 'message') {
      const part = (item.content as Item[])[0];
      this.#emit?.('response.output_text.done', { item_id: item.id, output_index: index, content_index: 0, text: part.text, logprobs: part.logprobs });
      this.#emit?.('response.content_part.done', { item_id: item.id, output_index: index, content_index: 0, part: { ...part } });
    } else if (item.type === 'reasoning') {
      const part = (item.content as Item[])[0];
      this.#emit?.('response.reasoning_text.done', { item_id: item.id, output_index: index, content_index: 0, text: part.text });
      this.#emit?.('response.content_part.done', { item_id: item.id, output_index: index, content_index: 0, part: { ...part } });
    } else {
      this.#emit?.('response.function_call_arguments.done', { item_id: item.id, output_index: index, name: item.name, arguments: item.arguments });
    }
    this.#emit?.('response.output_item.done', { output_index: index, item: structuredClone(item) });
  }
}
