// What a conversation is, as the app keeps it in IndexedDB.

export interface ToolCall {
  id: string;
  name: string;
  arguments: string; // JSON text, as the server sends it
}

export interface ReplyStats {
  promptTokens: number;
  completionTokens: number;
  tokensPerSecond: number; // completion tokens over the time from the first token to the last
  finishReason: string; // 'stop', 'length', 'tool_calls', or 'stopped' when the user pressed Stop
}

export interface ChatMessage {
  id: string;
  role: 'user' | 'assistant' | 'tool';
  content: string;
  reasoning?: string; // a reasoning model's thinking before the answer (reasoning_content)
  images?: string[]; // data URLs
  toolCalls?: ToolCall[];
  toolCallId?: string; // role 'tool': the call it answers
  stats?: ReplyStats;
  error?: string; // the request failed: the server's message
}

export interface Conversation {
  id: string;
  title: string;
  systemPrompt: string;
  messages: ChatMessage[];
  createdAt: number; // ms since the epoch
  updatedAt: number;
}

export const newId = (): string => crypto.randomUUID();
