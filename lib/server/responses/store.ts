// Stored responses (the Responses API's `store`, default true): what `previous_response_id` continues and GET
// /v1/responses/{id} returns. In memory, per server, bounded: the oldest go first beyond `max` responses or
// `maxBytes` of their JSON (conversations included), as a cache (a continued conversation older than that is a
// 404 naming the id).
// Invariant: a stored entry holds the response object as sent and the whole conversation up to and including
// its output (chat messages), so a continuation never re-reads earlier responses; its output items can be
// named by id (`item_reference` input items) while it is stored; a streamed background response keeps its events
// (counted in the bytes) to be streamed again.
import type { ChatMessage } from '../../chat/template.js';
import type { ResponseEventLog } from './events.js';

export interface StoredResponse {
  response: Record<string, unknown>;
  conversation: ChatMessage[]; // instructions excluded (OpenAI: they do not carry over), input, then the output
  events?: ResponseEventLog; // a streamed background response's events (GET ?stream=true)
}

export class ResponseStore {
  readonly #max: number;
  readonly #maxBytes: number;
  #bytes = 0;
  readonly #sizes = new Map<string, number>();
  readonly #entries = new Map<string, StoredResponse>();
  readonly #items = new Map<string, { item: Record<string, unknown>; response: string }>(); // output item id -> item

  constructor(max = 1000, maxBytes = 64 << 20) {
    this.#max = max;
    this.#maxBytes = maxBytes;
  }

  get(id: string): StoredResponse | undefined {
    return this.#entries.get(id);
  }

  /** An output item of a stored response, by its id (msg_..., fc_...). */
  item(id: string): Record<string, unknown> | undefined {
    return this.#items.get(id)?.item;
  }

  put(id: string, entry: StoredResponse): void {
    this.delete(id);
    const size = JSON.stringify(entry.response).length + JSON.stringify(entry.conversation).length + (entry.events?.bytes ?? 0);
    this.#entries.set(id, entry);
    this.#sizes.set(id, size);
    this.#bytes += size;
    for (const item of entry.response.output as Record<string, unknown>[]) this.#items.set(item.id as string, { item, response: id });
    while (this.#entries.size > this.#max || (this.#bytes > this.#maxBytes && this.#entries.size > 1)) {
      this.delete(this.#entries.keys().next().value as string);
    }
  }

  /** Counts a stored entry's size again (a streamed response's events that came after put). */
  refresh(id: string): void {
    const entry = this.#entries.get(id);
    if (entry) this.put(id, entry);
  }

  delete(id: string): boolean {
    const entry = this.#entries.get(id);
    if (!entry) return false;
    for (const item of entry.response.output as Record<string, unknown>[]) this.#items.delete(item.id as string);
    this.#bytes -= this.#sizes.get(id) ?? 0;
    this.#sizes.delete(id);
    return this.#entries.delete(id);
  }
}
