# A key-gated serverless app: the platform routes {base}/<org_id>/<app_id>/... to this ASGI app and, deployed with
# `--auth private`, checks `Authorization: Key <key>` itself; spindle checks the same header too (SPINDLE_API_KEY;
# `Key` and `Bearer` both accepted), so a request that reaches the container without the key is refused either way.
# The app starts `spindle serve` beside it (SPINDLE_ROOT_PATH=/<org_id>/<app_id>: every route also answers under
# the prefix the platform forwards) and streams every request through unchanged, headers and SSE included.
#   export SPINDLE_ROOT_PATH=/my-org/spindle MODEL_NAME=hf.co/Qwen/Qwen3-0.6B-GGUF:Q8_0   # plus the key as a secret
#   <platform> deploy deploy/keygated/app.py --auth private        (the image: docker/Dockerfile.cuda + httpx)
# Not executed in this repository's CI (no platform account, no Docker engine, no Python packages): deploy/README.md.
import os
import subprocess
import time
import urllib.request

import httpx

PORT = int(os.environ.get("SPINDLE_PORT", "8000"))
UPSTREAM = f"http://127.0.0.1:{PORT}"
HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"upgrade", b"host", b"content-length"}


def start_spindle():
    env = dict(os.environ, PORT=str(PORT), SPINDLE_HOST=f"127.0.0.1:{PORT}")
    server = subprocess.Popen(["spindle-entrypoint", "serve"], env=env)
    deadline = time.time() + 600
    while time.time() < deadline:  # /health turns 200 after the load and spindle's warm-up generation
        if server.poll() is not None:
            raise RuntimeError(f"spindle exited with {server.returncode}")
        try:
            if urllib.request.urlopen(f"{UPSTREAM}/health", timeout=2).status == 200:
                return server
        except OSError:
            time.sleep(1)
    raise RuntimeError("spindle did not become ready within 600 s")


server = start_spindle()
client = httpx.AsyncClient(base_url=UPSTREAM, timeout=None)


async def app(scope, receive, send):
    """ASGI entry point: forwards the request to spindle and streams its answer back."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                server.terminate()  # SIGTERM: spindle drains in-flight requests, then exits 0
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope.get("raw_path") or scope["path"].encode()
    url = path.decode() + (("?" + scope["query_string"].decode()) if scope.get("query_string") else "")
    headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
    request = client.build_request(scope["method"], url, headers=headers, content=body)
    response = await client.send(request, stream=True)
    try:
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP]})
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await response.aclose()
