// Builds the web UI (`spindle serve` at `/`) into dist/ui: one index.html plus hashed assets under /ui/assets/,
// everything bundled (no CDN, works offline). The server (lib/server/routes/ui.ts) serves that folder.
import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/ui/',
  plugins: [preact()],
  build: {
    outDir: fileURLToPath(new URL('../dist/ui', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    reportCompressedSize: true,
    chunkSizeWarningLimit: 600,
  },
});
