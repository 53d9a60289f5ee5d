// The API key the user typed (servers started with --api-key), kept in localStorage so a reload keeps it.
const KEY = 'spindle.apiKey';

export function loadApiKey(): string {
  try {
    return localStorage.getItem(KEY) ?? '';
  } catch {
    return '';
  }
}

export function saveApiKey(key: string): void {
  if (key) localStorage.setItem(KEY, key);
  else localStorage.removeItem(KEY);
}
