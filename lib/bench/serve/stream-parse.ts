// Incremental framing of streamed HTTP bodies: Server-Sent Events (OpenAI) and NDJSON (Ollama).
// Invariant: bytes go in as they arrive (any split, including inside a UTF-8 sequence or a CRLF), and a
// message comes out as soon as its terminator has arrived, never earlier and never twice.
import { StringDecoder } from 'node:string_decoder';

/** Splits a byte stream into lines (without '\n' or a trailing '\r'). */
class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';

  push(bytes: Buffer | string): string[] {
    this.buffer += typeof bytes === 'string' ? bytes : this.decoder.write(bytes);
    const lines: string[] = [];
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      lines.push(line.endsWith('\r') ? line.slice(0, -1) : line);
    }
    return lines;
  }

  /** The unterminated rest, at end of stream. */
  end(): string {
    const rest = this.buffer + this.decoder.end();
    this.buffer = '';
    return rest.endsWith('\r') ? rest.slice(0, -1) : rest;
  }
}

/**
 * SSE: returns the data payload of each complete event (data lines joined by '\n'); comments
 * (':' lines, used as keep-alive pings) and event/id/retry fields are skipped.
 */
export class SseParser {
  private readonly lines = new LineSplitter();
  private data: string[] = [];

  push(bytes: Buffer | string): string[] {
    return this.take(this.lines.push(bytes));
  }

  /** Events still pending when the body ended (a server that omits the final blank line). */
  end(): string[] {
    const rest = this.lines.end();
    const out = this.take(rest ? [rest] : []);
    if (this.data.length > 0) out.push(this.data.join('\n'));
    this.data = [];
    return out;
  }

  private take(lines: string[]): string[] {
    const out: string[] = [];
    for (const line of lines) {
      if (line === '') {
        if (this.data.length > 0) out.push(this.data.join('\n'));
        this.data = [];
      } else if (line.startsWith('data:')) {
        const value = line.slice(5);
        this.data.push(value.startsWith(' ') ? value.slice(1) : value);
      }
    }
    return out;
  }
}

/** NDJSON: returns each complete non-blank line. */
export class NdjsonParser {
  private readonly lines = new LineSplitter();

  push(bytes: Buffer | string): string[] {
    return this.lines.push(bytes).filter((l) => l.trim() !== '');
  }

  end(): string[] {
    const rest = this.lines.end();
    return rest.trim() !== '' ? [rest] : [];
  }
}
