// The open conversation and the message box; the view follows the reply while it streams.
import { useEffect, useRef } from 'preact/hooks';
import type { Chat } from '../use-chat';
import { Composer } from './composer';
import { MessageView } from './message-view';

export function ChatView({ chat, model, takesImages }: { chat: Chat; model: string; takesImages?: boolean }) {
  const end = useRef<HTMLDivElement>(null);
  const messages = chat.current.messages;
  const last = messages.at(-1);
  useEffect(() => { end.current?.scrollIntoView({ block: 'end' }); }, [messages.length, last?.content.length]);
  return (
    <section class="chat" aria-label="Chat">
      <div class="messages" data-testid="messages">
        {messages.length === 0 ? (
          <div class="empty">
            <h2>Chat with {model || 'the model'}</h2>
            <p class="muted">Enter sends, Shift+Enter adds a line, Esc stops a reply. Settings hold the system prompt and sampling.</p>
          </div>
        ) : messages.map((m, i) => (
          <MessageView key={m.id} message={m} streaming={chat.streaming && i === messages.length - 1}
            isLastReply={i === messages.length - 1 && m.role === 'assistant'} busy={chat.streaming}
            onRegenerate={chat.regenerate} onEdit={(text) => chat.editAndResend(m.id, text)} />
        ))}
        <div ref={end} />
      </div>
      <Composer streaming={chat.streaming} onSend={chat.send} onStop={chat.stop} model={model} takesImages={takesImages} />
    </section>
  );
}
