// Preloaded into `spindle bench serve` by bench/serve-compare.sh (node --import), for both engines alike: the
// client's HTTP agents are made without keep-alive (bench serve creates `new http.Agent({ keepAlive: true, ... })`;
// this swaps in a subclass that forces keepAlive: false), so every request opens its own connection and sends
// `Connection: close`. Why: llama-server (llama.cpp de3ff81, cpp-httplib) closes the connection after each
// streamed response although it answered `Keep-Alive: timeout=5, max=100` (its chunked content provider returns
// false after the last chunk, which cpp-httplib treats as the end of the connection); bench serve's keep-alive
// agent sends the next request of a conversation (or the next one the concurrency limit releases) at once, on
// that socket, before the FIN arrives, and the request fails with "ECONNRESET: socket hang up". A fresh
// localhost connection per request costs well under a millisecond. SC_KEEPALIVE=1 in serve-compare.sh leaves this
// out. (Adding only a `Connection: close` header to each request does not do: with the keep-alive agent, Node's
// client still reused sockets, and Spindle, whose SSE responses say `connection: keep-alive` even to a request
// that asked to close, answered those reused requests 400 Bad Request.)
import http from 'node:http';

const Agent = http.Agent;
class NoKeepAliveAgent extends Agent {
  constructor(options) {
    super({ ...(options ?? {}), keepAlive: false });
  }
}
http.Agent = NoKeepAliveAgent;
