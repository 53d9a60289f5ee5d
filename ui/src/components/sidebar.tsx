// The conversation list: newest first, a New chat button, delete per conversation.
import type { Conversation } from '../types';

interface Props {
  conversations: Conversation[];
  currentId: string;
  onOpen(id: string): void;
  onNew(): void;
  onDelete(id: string): void;
}

export function Sidebar({ conversations, currentId, onOpen, onNew, onDelete }: Props) {
  return (
    <nav class="sidebar" aria-label="Conversations">
      <button type="button" class="primary wide" onClick={onNew}>New chat</button>
      <ul>
        {conversations.map((c) => (
          <li key={c.id} class={c.id === currentId ? 'current' : ''}>
            <button type="button" class="conversation" onClick={() => onOpen(c.id)} title={c.title}>{c.title}</button>
            <button type="button" class="icon" aria-label={`Delete ${c.title}`} onClick={() => onDelete(c.id)}>×</button>
          </li>
        ))}
      </ul>
      {conversations.length === 0 ? <p class="muted">Conversations are kept in this browser.</p> : null}
    </nav>
  );
}
