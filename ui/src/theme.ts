// Light and dark themes: the user's choice in localStorage, else the system's; applied as <html data-theme>.
export type Theme = 'light' | 'dark';
const KEY = 'spindle.theme';

export function initialTheme(): Theme {
  const saved = localStorage.getItem(KEY);
  if (saved === 'light' || saved === 'dark') return saved;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

export function applyTheme(theme: Theme, remember: boolean): void {
  document.documentElement.dataset.theme = theme;
  if (remember) localStorage.setItem(KEY, theme);
}
