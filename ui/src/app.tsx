// The app: a header (model, Chat / Server views, settings, theme), the conversation list, and the open view.
// It starts by listing the models (GET /v1/models); a 401 there means the server wants an API key.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiRequestError, apiJson } from './api';
import { loadApiKey, saveApiKey } from './api-key';
import { ChatView } from './components/chat-view';
import { KeyPrompt } from './components/key-prompt';
import { ServerPanel } from './components/server-panel';
import { SettingsPanel } from './components/settings-panel';
import { Sidebar } from './components/sidebar';
import { loadSettings, saveSettings, type Settings } from './settings';
import { applyTheme, initialTheme, type Theme } from './theme';
import { useChat } from './use-chat';

export interface ModelCard {
  id: string;
  max_model_len?: number;
  device?: string;
  random_weights?: boolean;
  capabilities?: string[]; // a loaded model's ('completion', 'vision', 'tools'); absent for a runner's store models
}

type Load = { state: 'loading' } | { state: 'key'; error: string } | { state: 'ready' } | { state: 'error'; error: string };

export function App() {
  const [load, setLoad] = useState<Load>({ state: 'loading' });
  const [models, setModels] = useState<ModelCard[]>([]);
  const [model, setModel] = useState('');
  const [view, setView] = useState<'chat' | 'server'>('chat');
  const [settings, setSettings] = useState<Settings>(loadSettings);
  const [settingsOpen, setSettingsOpen] = useState(false);
  const [sidebarOpen, setSidebarOpen] = useState(false);
  const [theme, setTheme] = useState<Theme>(initialTheme);
  const chat = useChat(model, settings);

  useEffect(() => applyTheme(theme, false), [theme]);

  const loadModels = useCallback(async () => {
    try {
      const list = await apiJson<{ data: ModelCard[] }>('/v1/models');
      setModels(list.data);
      setModel((m) => (list.data.some((c) => c.id === m) ? m : list.data[0]?.id ?? ''));
      setLoad({ state: 'ready' });
    } catch (e) {
      if (e instanceof ApiRequestError && e.status === 401) {
        setLoad({ state: 'key', error: loadApiKey() ? `the server refused the key: ${e.message}` : '' });
      } else {
        setLoad({ state: 'error', error: (e as Error).message });
      }
    }
  }, []);
  useEffect(() => { void loadModels(); }, [loadModels]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent): void => { if (e.key === 'Escape') chat.stop(); };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [chat.stop]);

  const changeSettings = (s: Settings): void => { setSettings(s); saveSettings(s); };
  const toggleTheme = (): void => {
    const next = theme === 'dark' ? 'light' : 'dark';
    setTheme(next);
    applyTheme(next, true);
  };

  if (load.state === 'key') {
    return <KeyPrompt error={load.error} onSubmit={(key) => { saveApiKey(key); setLoad({ state: 'loading' }); void loadModels(); }} />;
  }
  const runnerMode = models.length > 0 && models.every((m) => m.max_model_len === undefined);
  // whether the model takes images: known for a loaded model, unknown (left to the server) for a store model
  const capabilities = models.find((m) => m.id === model)?.capabilities;
  const takesImages = capabilities ? capabilities.includes('vision') : undefined;
  return (
    <div class={`app${sidebarOpen ? ' sidebar-open' : ''}`}>
      <header class="topbar">
        <button type="button" class="icon menu" aria-label="Conversations" onClick={() => setSidebarOpen(!sidebarOpen)}>☰</button>
        <strong class="brand">Spindle</strong>
        <select aria-label="Model" value={model} onChange={(e) => setModel((e.target as HTMLSelectElement).value)}>
          {models.map((m) => <option key={m.id} value={m.id}>{m.id}</option>)}
        </select>
        <nav class="views" role="tablist">
          <button type="button" role="tab" aria-selected={view === 'chat'} onClick={() => setView('chat')}>Chat</button>
          <button type="button" role="tab" aria-selected={view === 'server'} onClick={() => setView('server')}>Server</button>
        </nav>
        <span class="spacer" />
        <button type="button" class="icon" aria-label="Settings" title="Settings" onClick={() => setSettingsOpen(!settingsOpen)}>⚙</button>
        <button type="button" class="icon" aria-label={`Switch to ${theme === 'dark' ? 'light' : 'dark'} theme`} title="Theme" onClick={toggleTheme}>
          {theme === 'dark' ? '☀' : '☾'}
        </button>
      </header>
      {load.state === 'error' ? <div class="banner error" role="alert">{load.error}</div> : null}
      <div class="body">
        <Sidebar conversations={chat.conversations} currentId={chat.current.id}
          onOpen={(id) => { chat.open(id); setView('chat'); setSidebarOpen(false); }}
          onNew={() => { chat.startNew(); setView('chat'); setSidebarOpen(false); }} onDelete={(id) => void chat.remove(id)} />
        <main>
          {view === 'chat'
            ? <ChatView chat={chat} model={model} takesImages={takesImages} />
            : <ServerPanel models={models} model={model} runnerMode={runnerMode} needsKey={loadApiKey() !== ''}
              onUse={(id) => { setModel(id); setView('chat'); }} onModelsChanged={() => void loadModels()} />}
        </main>
        {settingsOpen ? (
          <SettingsPanel settings={settings} systemPrompt={chat.current.systemPrompt} onChange={changeSettings}
            onSystemPrompt={chat.setSystemPrompt} onClose={() => setSettingsOpen(false)} />
        ) : null}
      </div>
    </div>
  );
}
