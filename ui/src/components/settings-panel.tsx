// The sampling settings (temperature, max tokens, top-p, top-k, min-p, repetition penalty, seed) and the
// conversation's system prompt; every value goes into the next request.
import { DEFAULT_SETTINGS, type Settings } from '../settings';

interface Props {
  settings: Settings;
  systemPrompt: string;
  onChange(s: Settings): void;
  onSystemPrompt(text: string): void;
  onClose(): void;
}

interface NumberField {
  key: Exclude<keyof Settings, 'seed'>;
  label: string;
  min: number;
  max: number;
  step: number;
  hint: string;
}

const FIELDS: NumberField[] = [
  { key: 'temperature', label: 'Temperature', min: 0, max: 2, step: 0.05, hint: '0 = always the most likely token' },
  { key: 'maxTokens', label: 'Max tokens', min: 0, max: 32768, step: 1, hint: 'length limit of a reply; 0 = up to the context length' },
  { key: 'topP', label: 'Top-p', min: 0.01, max: 1, step: 0.01, hint: '1 = off' },
  { key: 'topK', label: 'Top-k', min: 0, max: 200, step: 1, hint: '0 = off' },
  { key: 'minP', label: 'Min-p', min: 0, max: 1, step: 0.01, hint: '0 = off' },
  { key: 'repetitionPenalty', label: 'Repetition penalty', min: 0.5, max: 2, step: 0.01, hint: '1 = off' },
];

export function SettingsPanel({ settings, systemPrompt, onChange, onSystemPrompt, onClose }: Props) {
  const set = (key: keyof Settings, raw: string): void => {
    if (key === 'seed') { onChange({ ...settings, seed: raw.replace(/[^\d]/g, '') }); return; }
    const v = Number(raw);
    if (raw.trim() !== '' && Number.isFinite(v)) onChange({ ...settings, [key]: v });
  };
  return (
    <aside class="panel settings" aria-label="Settings">
      <header>
        <h2>Settings</h2>
        <button type="button" class="icon" aria-label="Close settings" onClick={onClose}>×</button>
      </header>
      <label class="field">
        <span>System prompt</span>
        <textarea rows={3} value={systemPrompt} placeholder="You are a helpful assistant." aria-label="System prompt"
          onInput={(e) => onSystemPrompt((e.target as HTMLTextAreaElement).value)} />
      </label>
      {FIELDS.map((f) => (
        <label class="field" key={f.key}>
          <span>{f.label} <small>{f.hint}</small></span>
          <div class="row">
            {f.key !== 'maxTokens'
              ? <input type="range" min={f.min} max={f.max} step={f.step} value={settings[f.key]} aria-hidden="true" tabIndex={-1}
                onInput={(e) => set(f.key, (e.target as HTMLInputElement).value)} />
              : null}
            <input type="number" name={f.key} aria-label={f.label} min={f.min} max={f.max} step={f.step} value={settings[f.key]}
              onChange={(e) => set(f.key, (e.target as HTMLInputElement).value)} />
          </div>
        </label>
      ))}
      <label class="field">
        <span>Seed <small>empty = random</small></span>
        <input type="text" inputMode="numeric" name="seed" aria-label="Seed" value={settings.seed}
          onChange={(e) => set('seed', (e.target as HTMLInputElement).value)} />
      </label>
      <button type="button" onClick={() => onChange({ ...DEFAULT_SETTINGS })}>Reset to defaults</button>
    </aside>
  );
}
