// The conversation list in IndexedDB (database 'spindle', object store 'conversations', keyed by id): nothing
// leaves the browser; a reload finds every conversation as it was last saved.
import type { Conversation } from './types';

const DB = 'spindle';
const STORE = 'conversations';

let opened: Promise<IDBDatabase> | undefined;

function db(): Promise<IDBDatabase> {
  opened ??= new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE, { keyPath: 'id' });
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(new Error(`could not open the browser's conversation store: ${req.error?.message}`));
  });
  return opened;
}

function run<T>(mode: IDBTransactionMode, fn: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> {
  return db().then((d) => new Promise<T>((resolve, reject) => {
    const req = fn(d.transaction(STORE, mode).objectStore(STORE));
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(new Error(`the conversation store failed: ${req.error?.message}`));
  }));
}

/** Every conversation, the most recently updated first. */
export async function listConversations(): Promise<Conversation[]> {
  const all = await run<Conversation[]>('readonly', (s) => s.getAll() as IDBRequest<Conversation[]>);
  return all.sort((a, b) => b.updatedAt - a.updatedAt);
}

export function saveConversation(c: Conversation): Promise<IDBValidKey> {
  return run('readwrite', (s) => s.put(structuredClone(c)));
}

export function deleteConversation(id: string): Promise<undefined> {
  return run('readwrite', (s) => s.delete(id));
}
