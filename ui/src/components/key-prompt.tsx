// Asked when the server wants an API key (started with --api-key): the key is checked against /v1/models
// before the app uses it, and kept in this browser.
import { useState } from 'preact/hooks';

export function KeyPrompt({ error, onSubmit }: { error: string; onSubmit(key: string): void }) {
  const [key, setKey] = useState('');
  return (
    <div class="key-prompt" role="dialog" aria-label="API key">
      <form onSubmit={(e) => { e.preventDefault(); if (key.trim()) onSubmit(key.trim()); }}>
        <h2>API key</h2>
        <p>This server was started with <code>--api-key</code>. Enter the key to chat; it is kept in this browser.</p>
        <input type="password" autoFocus aria-label="API key" value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} />
        {error ? <p class="error" role="alert">{error}</p> : null}
        <button type="submit" class="primary">Continue</button>
      </form>
    </div>
  );
}
