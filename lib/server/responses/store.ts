// Stored responses (the Responses API's `store`, default true): what `previous_response_id` continues and GET
// /v1/responses/{id} returns. In memory, per server, bounded: the oldest go first beyond `max` responses, as a
// cache (a continued conversation older than that is a 404 naming the id).
// Invariant: a stored entry holds the response object as sent and the whole conversation up to and including
// its output (chat messages), so a continuation never re-reads earlier responses.
import type { ChatMessage } from '../../chat/template.js';

export interface StoredResponse {
  response: Record<string, unknown>;
  conversation: ChatMessage[]; // instructions excluded (OpenAI: they do not carry over), input, then the output
}

export class ResponseStore {
  readonly #max: number;
  readonly #entries = new Map<string, StoredResponse>();

  constructor(max = 1000) {
    this.#max = max;
  }

  get(id: string): StoredResponse | undefined {
    return this.#entries.get(id);
  }

  put(id: string, entry: StoredResponse): void {
    this.#entries.delete(id);
    this.#entries.set(id, entry);
    while (this.#entries.size > this.#max) this.#entries.delete(this.#entries.keys().next().value as string);
  }

  delete(id: string): boolean {
    return this.#entries.delete(id);
  }
}
