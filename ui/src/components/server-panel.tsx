// The server panel: each model's facts (architecture, parameters, quantization, context, chat template), the
// server's URL with ready-to-copy client snippets, the engine's live status from /metrics (polled each second
// while the panel is open), and, when the server runs the model store (runner mode), pull / delete / use.
import { useEffect, useState } from 'preact/hooks';
import { apiFetch, apiJson, serverUrl } from '../api';
import { copyText } from '../clipboard';
import { sampleOf, tokensPerSecond, type MetricsSample } from '../metrics';
import { snippets } from '../snippets';
import type { ModelCard } from '../app';
import { Sparkline } from './sparkline';

interface Show {
  details?: { family?: string; parameter_size?: string; quantization_level?: string };
  model_info?: Record<string, unknown>;
  template?: string;
}

const HISTORY = 60; // samples (seconds)

function ModelFacts({ card, runnerMode }: { card: ModelCard; runnerMode: boolean }) {
  const [show, setShow] = useState<Show | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    apiJson<Show>('/api/show', { model: card.id }).then(setShow, (e: Error) => setError(e.message));
  }, [card.id]);
  const arch = show?.details?.family ?? String(show?.model_info?.['general.architecture'] ?? '');
  const trained = arch ? show?.model_info?.[`${arch}.context_length`] : undefined;
  const context = card.max_model_len ?? trained;
  return (
    <div class="model-card" data-model={card.id}>
      <h3>{card.id}{card.random_weights ? <span class="badge">random weights</span> : null}</h3>
      {error ? <p class="error" role="alert">{error}</p> : null}
      <dl>
        <dt>Architecture</dt><dd data-fact="architecture">{arch || '…'}</dd>
        <dt>Parameters</dt><dd>{show?.details?.parameter_size ?? '…'}</dd>
        <dt>Quantization</dt><dd data-fact="quantization">{show?.details?.quantization_level ?? '…'}</dd>
        <dt>Context</dt><dd data-fact="context">{context !== undefined ? `${String(context)} tokens` : runnerMode ? 'set when loaded' : '…'}</dd>
        {card.device ? <><dt>Device</dt><dd>{card.device}</dd></> : null}
      </dl>
      {show?.template ? (
        <details class="template"><summary>Chat template</summary><pre>{show.template}</pre></details>
      ) : null}
    </div>
  );
}

function Snippets({ model, apiKey }: { model: string; apiKey: boolean }) {
  const list = snippets({ baseUrl: serverUrl(), model, apiKey });
  const [tab, setTab] = useState(0);
  const [copied, setCopied] = useState(false);
  const current = list[Math.min(tab, list.length - 1)];
  return (
    <div class="snippets">
      <div class="tabs" role="tablist">
        {list.map((s, i) => (
          <button type="button" role="tab" aria-selected={i === tab} key={s.name} onClick={() => setTab(i)}>{s.name}</button>
        ))}
      </div>
      <div class="code-block">
        <div class="code-bar"><span>{current.name}</span>
          <button type="button" onClick={() => void copyText(current.code).then(() => { setCopied(true); setTimeout(() => setCopied(false), 1200); })}>
            {copied ? 'Copied' : 'Copy'}
          </button>
        </div>
        <pre><code>{current.code}</code></pre>
      </div>
    </div>
  );
}

function EngineStatus() {
  const [samples, setSamples] = useState<MetricsSample[]>([]);
  const [error, setError] = useState('');
  useEffect(() => {
    let stopped = false;
    const poll = async (): Promise<void> => {
      try {
        const text = await (await apiFetch('/metrics')).text();
        if (!stopped) { setError(''); setSamples((prev) => [...prev.slice(-HISTORY), sampleOf(text, performance.now())]); }
      } catch (e) {
        if (!stopped) setError((e as Error).message);
      }
    };
    void poll();
    const timer = setInterval(() => void poll(), 1000);
    return () => { stopped = true; clearInterval(timer); };
  }, []);
  const rates = samples.slice(1).map((s, i) => tokensPerSecond(samples[i], s));
  return (
    <div class="status">
      {error ? <p class="error" role="alert">{error}</p> : null}
      <div class="charts">
        <Sparkline label="Running" values={samples.map((s) => s.running)} format={(v) => String(v)} />
        <Sparkline label="Waiting" values={samples.map((s) => s.waiting)} format={(v) => String(v)} />
        <Sparkline label="KV cache" values={samples.map((s) => s.kvUsage * 100)} max={100} format={(v) => `${v.toFixed(1)}%`} />
        <Sparkline label="Tokens/s" values={rates} format={(v) => v.toFixed(1)} />
      </div>
    </div>
  );
}

function ModelStore({ onChanged }: { onChanged(): void }) {
  const [name, setName] = useState('');
  const [status, setStatus] = useState('');
  const pull = async (): Promise<void> => {
    setStatus(`pulling ${name}…`);
    try {
      await apiJson('/api/pull', { model: name, stream: false });
      setStatus(`pulled ${name}`);
      setName('');
      onChanged();
    } catch (e) {
      setStatus((e as Error).message);
    }
  };
  return (
    <form class="row pull" onSubmit={(e) => { e.preventDefault(); if (name.trim()) void pull(); }}>
      <input type="text" placeholder="hf.co/org/repo:Q4_K_M" aria-label="Model to pull" value={name}
        onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      <button type="submit">Pull</button>
      {status ? <span class="muted" role="status">{status}</span> : null}
    </form>
  );
}

interface Props {
  models: ModelCard[];
  model: string;
  runnerMode: boolean;
  needsKey: boolean;
  onUse(model: string): void;
  onModelsChanged(): void;
}

export function ServerPanel({ models, model, runnerMode, needsKey, onUse, onModelsChanged }: Props) {
  const [storeError, setStoreError] = useState('');
  const remove = async (id: string): Promise<void> => {
    if (!confirm(`Delete ${id} from the model store?`)) return;
    setStoreError('');
    try {
      await apiJson('/api/delete', { model: id }, 'DELETE');
    } catch (e) {
      setStoreError(`could not delete ${id}: ${(e as Error).message}`);
    } finally {
      onModelsChanged();
    }
  };
  return (
    <section class="server" aria-label="Server">
      <h2>Server</h2>
      <p>Listening on <code data-testid="server-url">{serverUrl()}</code> · OpenAI API at <code>{serverUrl()}/v1</code> · Ollama API at <code>{serverUrl()}/api</code></p>
      <h3>Engine</h3>
      <EngineStatus />
      <h3>Models</h3>
      {runnerMode ? <ModelStore onChanged={onModelsChanged} /> : null}
      {storeError ? <div class="banner error" role="alert">{storeError}</div> : null}
      <div class="models">
        {models.map((m) => (
          <div key={m.id} class={`model${m.id === model ? ' current' : ''}`}>
            <ModelFacts card={m} runnerMode={runnerMode} />
            {runnerMode ? (
              <div class="row">
                <button type="button" disabled={m.id === model} onClick={() => onUse(m.id)}>{m.id === model ? 'In use' : 'Use'}</button>
                <button type="button" onClick={() => void remove(m.id)}>Delete</button>
              </div>
            ) : null}
          </div>
        ))}
      </div>
      <h3>Use it from code</h3>
      <Snippets model={model} apiKey={needsKey} />
    </section>
  );
}
