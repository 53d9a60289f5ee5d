# An autoscaling serverless deployment (Modal-style): `modal deploy deploy/autoscale/deploy.py`.
# One container stays warm (min_containers = 1) and one more is started ahead of demand (buffer_containers = 1), so
# a burst never waits for a cold start; each container runs spindle from the image built by docker/Dockerfile(.cuda)
# and is handed traffic only after /health is 200, i.e. after the model is loaded and spindle's own warm-up
# generation has run. MODEL_NAME picks the model; HF_TOKEN and SPINDLE_API_KEY come from a platform secret.
#   modal secret create spindle HF_TOKEN=... SPINDLE_API_KEY=...
#   MODEL_NAME=hf.co/Qwen/Qwen3-0.6B-GGUF:Q8_0 SPINDLE_GPU=L4 modal deploy deploy/autoscale/deploy.py
# Not executed in this repository's CI (no platform account, no Docker engine): see deploy/README.md.
import os
import subprocess
import time
import urllib.request

import modal

PORT = 8000
MODEL_NAME = os.environ.get("MODEL_NAME", "hf.co/Qwen/Qwen3-0.6B-GGUF:Q8_0")
GPU = os.environ.get("SPINDLE_GPU") or None  # None: CPU containers with the spindle:cpu image
IMAGE = os.environ.get("SPINDLE_IMAGE", "ghcr.io/your-org/spindle:cuda" if GPU else "ghcr.io/your-org/spindle:cpu")

image = modal.Image.from_registry(IMAGE).env({"MODEL_NAME": MODEL_NAME, "PORT": str(PORT)})
cache = modal.Volume.from_name("spindle-model-cache", create_if_missing=True)
app = modal.App("spindle", image=image)


@app.function(
    gpu=GPU,
    cpu=4 if GPU is None else 2,
    memory=16384,
    min_containers=1,
    buffer_containers=1,
    scaledown_window=300,
    timeout=3600,
    volumes={"/data": cache},
    secrets=[modal.Secret.from_name("spindle")],
)
@modal.concurrent(max_inputs=32)
@modal.web_server(PORT, startup_timeout=600)
def serve():
    subprocess.Popen(["spindle-entrypoint", "serve"] + (["--device", "cuda"] if GPU else []))
    # web_server only waits for the port to open; spindle listens while it loads, so wait for /health 200 (load +
    # warm-up) before the container takes traffic.
    deadline = time.time() + 600
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2).status == 200:
                return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError("spindle did not become ready within 600 s")
