// Download progress for the CLI: a bar redrawn in place on a terminal, plain lines (every 10%, and each phase)
// otherwise, so logs and CI output stay readable.
import type { Progress } from '../../models/download.js';
import type { CommandIo } from '../io.js';

const mb = (n: number) => `${(n / 1e6).toFixed(n < 1e8 ? 1 : 0)} MB`;

export function progressPrinter(io: CommandIo): Progress {
  const tty = io.stderr.isTTY === true;
  let lastFile = '', lastTenth = -1, lastDraw = 0;
  return ({ file, done, total, phase }) => {
    if (file !== lastFile) {
      lastFile = file;
      lastTenth = -1;
      if (!tty) io.stderr.write(`pulling ${file} (${mb(total)})\n`);
    }
    if (phase === 'verify') {
      io.stderr.write(`${tty ? '\r\x1b[K' : ''}verifying sha256 of ${file}\n`);
      return;
    }
    if (phase === 'done') {
      if (tty) io.stderr.write(`\r\x1b[K${file}: ${mb(total)} done\n`);
      return;
    }
    const frac = total > 0 ? done / total : 0;
    if (tty) {
      const now = Date.now();
      if (now - lastDraw < 100 && done < total) return;
      lastDraw = now;
      const width = 30, full = Math.round(frac * width);
      io.stderr.write(`\r\x1b[Kpulling ${file} ${(frac * 100).toFixed(0).padStart(3)}% [${'#'.repeat(full)}${' '.repeat(width - full)}] ${mb(done)}/${mb(total)}`);
      return;
    }
    const tenth = Math.floor(frac * 10);
    if (tenth > lastTenth) {
      lastTenth = tenth;
      io.stderr.write(`  ${file}: ${tenth * 10}% (${mb(done)} of ${mb(total)})\n`);
    }
  };
}
