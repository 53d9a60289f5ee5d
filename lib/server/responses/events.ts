// The events of a streamed background response (OpenAI's background mode with stream: true, as vLLM serves it),
// kept so that a client can come back: GET /v1/responses/{id}?stream=true&starting_after=N sends the events after
// sequence number N, then the rest as they come, until the response ends.
// Invariant: event i has sequence_number i (the log numbers them as they are pushed); readers see every event in
// order, none twice, whether it was pushed before or after they started; after end() nothing more is pushed.

export interface ResponseEvent {
  type: string;
  data: Record<string, unknown>; // the event's JSON, type and sequence_number included
}

export class ResponseEventLog {
  readonly #events: ResponseEvent[] = [];
  #ended = false;
  #bytes = 0;
  #waiters: Array<() => void> = [];

  /** Appends an event of `type` with `fields`, numbered next; its JSON object is returned. */
  push(type: string, fields: Record<string, unknown>): Record<string, unknown> {
    if (this.#ended) throw new Error(`response event log: '${type}' pushed after the end`);
    const data = { type, sequence_number: this.#events.length, ...fields };
    this.#events.push({ type, data });
    this.#bytes += JSON.stringify(data).length;
    this.#wake();
    return data;
  }

  /** No more events: readers finish once they have sent the ones there are. */
  end(): void {
    this.#ended = true;
    this.#wake();
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Events so far. */
  get length(): number {
    return this.#events.length;
  }

  /** JSON characters of the events so far (the response store counts them). */
  get bytes(): number {
    return this.#bytes;
  }

  /** The events after sequence number `after` (-1: all), then each new one, until the end or `signal` aborts. */
  async *after(after: number, signal?: AbortSignal): AsyncGenerator<ResponseEvent> {
    let next = after + 1;
    for (;;) {
      while (next < this.#events.length) {
        if (signal?.aborted) return;
        yield this.#events[next++];
      }
      if (this.#ended || signal?.aborted) return;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          signal?.removeEventListener('abort', done);
          resolve();
        };
        this.#waiters.push(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}
