#!/usr/bin/env bash
# Installs what `make fuzz` needs on top of scripts/setup.sh, idempotently:
# Debian's clang 14 with its libFuzzer and sanitizer runtimes
# (libclang-rt-14-dev) and llvm-symbolizer (llvm-14) for readable stack traces.
# The sanitizer build of the tests (`make test-asan`) needs nothing extra: it
# uses g++ with libasan/libubsan, which come with it.
set -euo pipefail

APT_PACKAGES=(clang-14 libclang-rt-14-dev llvm-14)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "[setup-fuzz] installing Debian packages: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
