// A Markdown text rendered through renderMarkdown (sanitized); the Copy button of each code block copies it.
import { useMemo } from 'preact/hooks';
import { renderMarkdown } from '../markdown';
import { copyText } from '../clipboard';

function onClick(e: MouseEvent): void {
  const button = (e.target as HTMLElement).closest('button.copy-code');
  const code = button?.closest('.code-block')?.querySelector('pre');
  if (!button || !code) return;
  void copyText(code.textContent ?? '').then(() => {
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 1200);
  });
}

export function MarkdownView({ text }: { text: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div class="markdown" onClick={onClick} dangerouslySetInnerHTML={{ __html: html }} />;
}
