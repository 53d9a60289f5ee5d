// Sends one streaming generation request and feeds its framed messages to a backend's handler.
// Invariant: never throws; every outcome (HTTP error, transport error, error event in the stream, bad
// JSON) ends as a RequestOutput with success=false and a message naming the problem.
import { postStream, type Agents } from './http.js';
import { StreamRecorder, errorBodyMessage, errorText } from './record.js';
import { emptyOutput, nowS, type RequestInput, type RequestOutput } from './types.js';

export interface Framer {
  push(bytes: Buffer): string[];
  end(): string[];
}

/** Handles one framed message received at clock time t (s). */
export type MessageHandler = (message: string, t: number, rec: StreamRecorder) => void;

export async function streamRequest(input: RequestInput, body: object, framer: Framer, handle: MessageHandler,
  agents: Agents): Promise<RequestOutput> {
  const payload = JSON.stringify(body);
  const out = emptyOutput(input.request, nowS());
  const rec = new StreamRecorder(out);
  const onMessage = (message: string, t: number): void => {
    try {
      handle(message, t, rec);
    } catch (e) {
      rec.fail(`bad stream message (${errorText(e)}): ${message.slice(0, 200)}`);
    }
  };
  try {
    const res = await postStream(input.url, input.headers, payload, agents, (chunk) => {
      const t = nowS();
      for (const m of framer.push(chunk)) onMessage(m, t);
    });
    if (res.status < 200 || res.status >= 300) {
      rec.fail(`HTTP ${res.status} ${res.statusMessage}: ${errorBodyMessage(res.errorBody)}`.trim());
      return out;
    }
    const t = nowS();
    for (const m of framer.end()) onMessage(m, t);
    rec.finish();
  } catch (e) {
    rec.fail(errorText(e));
  }
  return out;
}
