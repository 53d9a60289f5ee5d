// A one-line progress bar on stderr, drawn only when stderr is a TTY (never in logs or pipes).
// Invariant: the clock starts at the first update (call update(0, 0) when the phase starts); redraws at
// most every 100 ms, always draws the final state, and finish() leaves the cursor on a fresh line.
import type { Writable } from 'node:stream';

export interface Progress {
  update(done: number, failed: number): void;
  finish(): void;
}

const NOOP: Progress = { update: () => {}, finish: () => {} };

export function createProgress(total: number, label: string, stream: Writable & { isTTY?: boolean }, enabled: boolean): Progress {
  if (!enabled || !stream.isTTY || total <= 0) return NOOP;
  let started: number | null = null;
  let last = 0;
  let drawnFinal = false;
  let state = { done: 0, failed: 0 };
  const draw = () => {
    started ??= Date.now();
    drawnFinal = state.done === total;
    const width = 30;
    const filled = Math.round((state.done / total) * width);
    const secs = (Date.now() - started) / 1000;
    const rate = secs > 0 ? state.done / secs : 0;
    const bar = '#'.repeat(filled) + '.'.repeat(width - filled);
    const fail = state.failed > 0 ? ` ${state.failed} failed` : '';
    stream.write(`\r${label} [${bar}] ${state.done}/${total}${fail} ${secs.toFixed(1)}s ${rate.toFixed(2)} req/s\x1b[K`);
  };
  return {
    update(done, failed) {
      started ??= Date.now();
      state = { done, failed };
      const now = Date.now();
      if (now - last >= 100 || done === total) {
        last = now;
        draw();
      }
    },
    finish() {
      if (!drawnFinal) draw();
      stream.write('\n');
    },
  };
}
