// The message box: Enter sends, Shift+Enter is a newline; images come by drag-and-drop, paste or the file
// picker (image files up to 20 MiB, sent as data URLs). A model whose card says it takes no images (no 'vision'
// capability) refuses them here with a message saying why; where that is unknown (a runner's store model, loaded
// on demand) they go to the server, whose refusal is shown.
import { useRef, useState } from 'preact/hooks';

const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

interface Props {
  streaming: boolean;
  model: string;
  takesImages?: boolean; // false: refuse images; undefined: unknown, send them
  onSend(text: string, images: string[]): void;
  onStop(): void;
}

function readDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result as string);
    r.onerror = () => reject(new Error(`could not read ${file.name}`));
    r.readAsDataURL(file);
  });
}

export function Composer({ streaming, onSend, onStop, model, takesImages }: Props) {
  const [text, setText] = useState('');
  const [images, setImages] = useState<string[]>([]);
  const [notice, setNotice] = useState('');
  const [dragging, setDragging] = useState(false);
  const picker = useRef<HTMLInputElement>(null);

  const addFiles = async (files: File[]): Promise<void> => {
    if (files.length && takesImages === false) {
      const names = files.map((f) => f.name || 'the image').join(', ');
      setNotice(`${names} not attached: ${model || 'this model'} takes no images (the server runs it without a vision ` +
        'projector, an mmproj file); serve a vision model to send pictures');
      return;
    }
    const added: string[] = [];
    for (const f of files) {
      if (!f.type.startsWith('image/')) { setNotice(`${f.name || 'that file'} is not an image; only images can be attached`); continue; }
      if (f.size > MAX_IMAGE_BYTES) { setNotice(`${f.name} is over the 20 MiB image limit`); continue; }
      added.push(await readDataUrl(f));
    }
    if (added.length) { setNotice(''); setImages((prev) => [...prev, ...added]); }
  };

  const send = (): void => {
    if (streaming || (!text.trim() && images.length === 0)) return;
    onSend(text, images);
    setText('');
    setImages([]);
  };

  return (
    <form class={`composer${dragging ? ' dragging' : ''}`} onSubmit={(e) => { e.preventDefault(); send(); }}
      onDragOver={(e) => { e.preventDefault(); setDragging(true); }} onDragLeave={() => setDragging(false)}
      onDrop={(e) => { e.preventDefault(); setDragging(false); void addFiles(Array.from(e.dataTransfer?.files ?? [])); }}>
      {images.length ? (
        <div class="attachments">
          {images.map((src, i) => (
            <span class="attachment" key={i}>
              <img src={src} alt={`image ${i + 1} to send`} />
              <button type="button" aria-label="remove image" onClick={() => setImages(images.filter((_, j) => j !== i))}>×</button>
            </span>
          ))}
        </div>
      ) : null}
      {notice ? <div class="notice" role="status">{notice}</div> : null}
      <div class="row">
        <button type="button" class="icon" title="Attach an image" aria-label="Attach an image" onClick={() => picker.current?.click()}>+</button>
        <input ref={picker} type="file" accept="image/*" multiple hidden
          onChange={(e) => { const input = e.target as HTMLInputElement; void addFiles(Array.from(input.files ?? [])); input.value = ''; }} />
        <textarea value={text} rows={1} placeholder="Message (Enter sends, Shift+Enter for a new line)" aria-label="Message"
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          onPaste={(e) => {
            const files = Array.from(e.clipboardData?.files ?? []);
            if (files.length) { e.preventDefault(); void addFiles(files); }
          }}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
          }} />
        {streaming
          ? <button type="button" class="stop" onClick={onStop} title="Stop (Esc)">Stop</button>
          : <button type="submit" class="primary" disabled={!text.trim() && images.length === 0}>Send</button>}
      </div>
    </form>
  );
}
