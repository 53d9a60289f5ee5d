#!/bin/sh
# The container's entrypoint: `spindle` with the container's defaults, run with exec so that spindle is PID 1 and
# receives the platform's stop signal (SIGTERM: stop taking requests, drain, exit 0).
#   MODEL_NAME      the model (a .gguf path, a store name or hf.co/<org>/<repo>[:<quant>]) when SPINDLE_MODEL is unset
#   PORT            the port (default 8000) on every interface, unless SPINDLE_HOST ([scheme://]host[:port]) is set
#   first argument  a spindle command (serve, pull, list, ...); a flag or a model first means `serve`
# No MODEL_NAME, SPINDLE_MODEL or model argument: runner mode (Ollama-style: /api/pull, models loaded on demand from
# SPINDLE_HOME). Flags given as arguments win over the SPINDLE_* variables (docs/api.md).
set -eu

if [ -z "${SPINDLE_MODEL:-}" ] && [ -n "${MODEL_NAME:-}" ]; then
  SPINDLE_MODEL=$MODEL_NAME
  export SPINDLE_MODEL
fi

if [ -z "${SPINDLE_HOST:-}" ]; then
  case "${PORT:-8000}" in
    ''|*[!0-9]*) echo "spindle-entrypoint: PORT must be a port number (got '${PORT}')" >&2; exit 2 ;;
  esac
  SPINDLE_HOST="0.0.0.0:${PORT:-8000}"
  export SPINDLE_HOST
fi

if [ "$#" -eq 0 ]; then
  set -- serve
else
  case "$1" in
    serve|run|pull|list|ls|show|create|rm|cp|ps|bench|--help|-h|help) ;;
    *) set -- serve "$@" ;;
  esac
fi

exec spindle "$@"
