// One message of the conversation: Markdown for the assistant, plain text for the user, images, a reasoning
// model's thinking (open while it is being written, folded once the answer starts) and tool calls folded, the error of a failed request, token counts and speed under a reply, and its actions.
import { useState } from 'preact/hooks';
import { copyText } from '../clipboard';
import type { ChatMessage } from '../types';
import { MarkdownView } from './markdown-view';

interface Props {
  message: ChatMessage;
  streaming: boolean; // this message is being written now
  isLastReply: boolean;
  busy: boolean; // a reply is streaming somewhere
  onRegenerate(): void;
  onEdit(text: string): void;
}

function Stats({ message }: { message: ChatMessage }) {
  const s = message.stats;
  if (!s) return null;
  const parts = s.finishReason === 'stopped'
    ? [`stopped after ~${s.completionTokens} tokens`]
    : [`${s.promptTokens} prompt tokens`, `${s.completionTokens} tokens`];
  if (s.tokensPerSecond > 0) parts.push(`${s.tokensPerSecond.toFixed(1)} tokens/s`);
  if (s.finishReason === 'length') parts.push('stopped at max tokens');
  return <div class="stats" data-testid="reply-stats">{parts.join(' · ')}</div>;
}

function ToolCalls({ message }: { message: ChatMessage }) {
  if (!message.toolCalls?.length) return null;
  return (
    <div class="tool-calls">
      {message.toolCalls.map((t) => (
        <details key={t.id || t.name} class="tool-call">
          <summary>Tool call: <code>{t.name}</code></summary>
          <pre>{t.arguments}</pre>
        </details>
      ))}
    </div>
  );
}

function Reasoning({ message, streaming }: { message: ChatMessage; streaming: boolean }) {
  if (!message.reasoning) return null;
  const thinking = streaming && !message.content && !message.toolCalls?.length;
  return (
    <details class="reasoning" open={thinking}>
      <summary>{thinking ? 'Thinking…' : 'Thought'}</summary>
      <div class="reasoning-text">{message.reasoning}</div>
    </details>
  );
}

function Editor({ initial, onSave, onCancel }: { initial: string; onSave(text: string): void; onCancel(): void }) {
  const [text, setText] = useState(initial);
  return (
    <div class="editor">
      <textarea value={text} rows={Math.min(12, text.split('\n').length + 1)} aria-label="Edit message"
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
      <div class="row">
        <button type="button" class="primary" onClick={() => onSave(text)}>Save and resend</button>
        <button type="button" onClick={onCancel}>Cancel</button>
      </div>
    </div>
  );
}

export function MessageView({ message, streaming, isLastReply, busy, onRegenerate, onEdit }: Props) {
  const [editing, setEditing] = useState(false);
  if (message.role === 'tool') {
    return (
      <details class="message tool" data-role="tool">
        <summary>Tool result</summary>
        <pre>{message.content}</pre>
      </details>
    );
  }
  const user = message.role === 'user';
  return (
    <article class={`message ${message.role}`} data-role={message.role} aria-busy={streaming}>
      {message.images?.length ? (
        <div class="images">{message.images.map((src, i) => <img key={i} src={src} alt={`attached image ${i + 1}`} />)}</div>
      ) : null}
      {!user ? <Reasoning message={message} streaming={streaming} /> : null}
      {editing ? (
        <Editor initial={message.content} onCancel={() => setEditing(false)} onSave={(t) => { setEditing(false); onEdit(t); }} />
      ) : user ? (
        <div class="user-text">{message.content}</div>
      ) : (
        <MarkdownView text={message.content} />
      )}
      {streaming && !message.content && !message.reasoning && !message.toolCalls?.length ? <div class="typing" aria-label="waiting for the reply">…</div> : null}
      <ToolCalls message={message} />
      {message.error ? <div class="error" role="alert">{message.error}</div> : null}
      <Stats message={message} />
      {!streaming && !editing ? (
        <div class="actions">
          <button type="button" class="link" onClick={() => void copyText(message.content)}>Copy</button>
          {user && !busy ? <button type="button" class="link" onClick={() => setEditing(true)}>Edit</button> : null}
          {!user && isLastReply && !busy ? <button type="button" class="link" onClick={onRegenerate}>Regenerate</button> : null}
        </div>
      ) : null}
    </article>
  );
}
