// A single-consumer async queue: producers push without waiting, the consumer iterates with for-await.
// Invariant: items are delivered in push order; after end() or fail() the iterator drains what is left and
// then finishes (or throws the failure); return() (a `break` in for-await) calls onReturn once.
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  #items: T[] = [];
  #waiter: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  #done = false;
  #error: unknown = undefined;
  #failed = false;
  #onReturn: (() => void) | undefined;

  constructor(onReturn?: () => void) {
    this.#onReturn = onReturn;
  }

  push(item: T): void {
    if (this.#done) return;
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = null;
      w.resolve({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
  }

  end(): void {
    if (this.#done) return;
    this.#done = true;
    if (this.#waiter && this.#items.length === 0) {
      const w = this.#waiter;
      this.#waiter = null;
      w.resolve({ value: undefined, done: true });
    }
  }

  fail(error: unknown): void {
    if (this.#done) return;
    this.#failed = true;
    this.#error = error;
    this.#done = true;
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = null;
      w.reject(error);
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#items.length > 0) return Promise.resolve({ value: this.#items.shift() as T, done: false });
    if (this.#done) {
      if (this.#failed) {
        this.#failed = false; // throw once, then report done
        return Promise.reject(this.#error);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<T>> {
    const wasDone = this.#done;
    this.#done = true;
    this.#items = [];
    if (!wasDone && this.#onReturn) this.#onReturn();
    this.#onReturn = undefined;
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
