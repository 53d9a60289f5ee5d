// The chat's state and actions: the conversation list (IndexedDB), the open conversation, and one reply being
// streamed at a time (send, stop, regenerate, edit and resend). A reply's text is saved when it ends, stopped or
// failed; while it streams, the page re-renders at most once per animation frame.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiRequestError } from './api';
import { requestMessages, streamChat } from './chat-stream';
import { requestFields, type Settings } from './settings';
import { deleteConversation, listConversations, saveConversation } from './store';
import { newId, type ChatMessage, type Conversation } from './types';

export function emptyConversation(systemPrompt = ''): Conversation {
  const now = Date.now();
  return { id: newId(), title: 'New chat', systemPrompt, messages: [], createdAt: now, updatedAt: now };
}

const titleOf = (text: string): string => text.replace(/\s+/g, ' ').trim().slice(0, 60) || 'Image';

export interface Chat {
  conversations: Conversation[];
  current: Conversation;
  streaming: boolean;
  open(id: string): void;
  startNew(): void;
  remove(id: string): Promise<void>;
  setSystemPrompt(text: string): void;
  send(text: string, images: string[]): void;
  stop(): void;
  regenerate(): void;
  editAndResend(messageId: string, text: string): void;
}

export function useChat(model: string, settings: Settings): Chat {
  const [conversations, setConversations] = useState<Conversation[]>([]);
  const [current, setCurrent] = useState<Conversation>(() => emptyConversation());
  const [streaming, setStreaming] = useState(false);
  const abort = useRef<AbortController | null>(null);
  const live = useRef(current); // the conversation being written to, between renders

  useEffect(() => {
    void listConversations().then((list) => {
      setConversations(list);
      if (list.length > 0 && live.current.messages.length === 0) {
        live.current = list[0];
        setCurrent(list[0]);
      }
    });
  }, []);

  const persist = useCallback(async (c: Conversation) => {
    await saveConversation(c);
    setConversations(await listConversations());
  }, []);

  const show = (c: Conversation): void => {
    live.current = c;
    setCurrent(c);
  };

  const generate = useCallback(async (base: Conversation) => {
    const reply: ChatMessage = { id: newId(), role: 'assistant', content: '' };
    let c: Conversation = { ...base, messages: [...base.messages, reply], updatedAt: Date.now() };
    show(c);
    await persist(c);
    const controller = new AbortController();
    abort.current = controller;
    setStreaming(true);
    let frame = 0;
    let deltas = 0;
    let first = 0;
    const update = (patch: Partial<ChatMessage>): void => {
      c = { ...c, messages: c.messages.map((m) => (m.id === reply.id ? { ...m, ...patch } : m)) };
      live.current = c;
      if (!frame) frame = requestAnimationFrame(() => { frame = 0; setCurrent(live.current); });
    };
    let text = '';
    let thought = '';
    try {
      const stats = await streamChat(model, requestMessages(base, base.messages), requestFields(settings), controller.signal, {
        onText(delta) {
          deltas += 1;
          first ||= performance.now();
          text += delta;
          update({ content: text });
        },
        onReasoning(delta) {
          deltas += 1;
          first ||= performance.now();
          thought += delta;
          update({ reasoning: thought });
        },
        onToolCalls(calls) { update({ toolCalls: calls }); },
      });
      update({ stats });
    } catch (e) {
      if ((e as Error).name === 'AbortError') {
        const seconds = first ? (performance.now() - first) / 1000 : 0;
        update({ stats: { promptTokens: 0, completionTokens: deltas, finishReason: 'stopped', tokensPerSecond: seconds > 0 && deltas > 1 ? (deltas - 1) / seconds : 0 } });
      } else {
        const message = e instanceof ApiRequestError || e instanceof Error ? e.message : String(e);
        update({ error: message });
      }
    } finally {
      cancelAnimationFrame(frame);
      frame = 0;
      abort.current = null;
      c = { ...c, updatedAt: Date.now() };
      show(c);
      setStreaming(false);
      await persist(c);
    }
  }, [model, settings, persist]);

  return {
    conversations,
    current,
    streaming,
    open(id) {
      const c = conversations.find((x) => x.id === id);
      if (c && !abort.current) show(c);
    },
    startNew() {
      if (!abort.current) show(emptyConversation(live.current.systemPrompt));
    },
    async remove(id) {
      await deleteConversation(id);
      const list = await listConversations();
      setConversations(list);
      if (live.current.id === id) show(list[0] ?? emptyConversation());
    },
    setSystemPrompt(text) {
      const c = { ...live.current, systemPrompt: text };
      show(c);
      if (c.messages.length > 0) void persist(c);
    },
    send(text, images) {
      if (abort.current || (!text.trim() && images.length === 0)) return;
      const base = live.current;
      const user: ChatMessage = { id: newId(), role: 'user', content: text, ...(images.length ? { images } : {}) };
      const title = base.messages.length === 0 ? titleOf(text) : base.title;
      void generate({ ...base, title, messages: [...base.messages, user] });
    },
    stop() {
      abort.current?.abort();
    },
    regenerate() {
      const msgs = live.current.messages;
      if (abort.current || msgs.length === 0) return;
      let end = msgs.length;
      while (end > 0 && msgs[end - 1].role !== 'user') end -= 1;
      if (end === 0) return;
      void generate({ ...live.current, messages: msgs.slice(0, end) });
    },
    editAndResend(messageId, text) {
      const msgs = live.current.messages;
      const i = msgs.findIndex((m) => m.id === messageId);
      if (abort.current || i < 0 || msgs[i].role !== 'user') return;
      void generate({ ...live.current, messages: [...msgs.slice(0, i), { ...msgs[i], content: text }] });
    },
  };
}
