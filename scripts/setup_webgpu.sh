#!/usr/bin/env bash
# Makes ONNX Runtime's WebGPU execution provider runnable on this machine, for
# the test suite (make test). Not needed by `make demo`, nor on a machine whose
# GPU driver already provides a Vulkan adapter.
#
# ORT's WebGPU EP (Dawn) needs a Vulkan adapter. On a machine without a GPU,
# Mesa's lavapipe (Vulkan on the CPU) serves, but Debian 12's own Mesa (22.3)
# is too old for Dawn ("shaderUniform*ArrayDynamicIndexing required"); the
# bookworm-backports suite's Mesa (25.x) works. What this changes on the system:
#   - adds /etc/apt/sources.list.d/deltagen-bookworm-backports.sources (the
#     backports suite, main only, on the mirror the bookworm entries use);
#     apt prefers stable over backports unless asked, so nothing else moves;
#   - installs libvulkan1, vulkan-tools and mesa-vulkan-drivers from backports.
# Quick when done already. Skipped when a non-Mesa Vulkan driver (a GPU's) is
# installed. DELTAGEN_SKIP_WEBGPU_SETUP=1 skips it altogether (then the WebGPU
# tests fail, loudly, if no adapter exists).
set -euo pipefail

say() { echo "[setup-webgpu] $*" >&2; }

[ "${DELTAGEN_SKIP_WEBGPU_SETUP:-0}" = 1 ] && exit 0

icd_dirs=(/usr/share/vulkan/icd.d /etc/vulkan/icd.d)
# A GPU vendor's driver (nvidia_icd.json, ...): the user's own Vulkan, leave it alone.
for d in "${icd_dirs[@]}"; do
  for f in "$d"/*.json; do
    [ -e "$f" ] || continue
    case "$(basename "$f")" in
      lvp_icd.*|radeon_icd.*|intel_icd.*|intel_hasvk_icd.*|nouveau_icd.*|virtio_icd.*|asahi_icd.*|freedreno_icd.*|broadcom_icd.*|panfrost_icd.*|powervr_mesa_icd.*) ;;
      *) exit 0 ;;
    esac
  done
done

mesa_version() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true; }
new_enough() {  # Mesa 23 or newer
  local v; v="$(mesa_version)"
  [ -n "$v" ] && dpkg --compare-versions "$v" ge 23 && dpkg-query -W -f='${Status}' libvulkan1 2>/dev/null | grep -q "ok installed"
}
new_enough && exit 0

if ! grep -q '^ID=debian' /etc/os-release || ! grep -q 'VERSION_CODENAME=bookworm' /etc/os-release; then
  say "error: no Vulkan driver new enough for WebGPU, and this is not Debian 12 (bookworm): install Mesa >= 23's lavapipe (mesa-vulkan-drivers) or a GPU driver"
  exit 1
fi

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
list=/etc/apt/sources.list.d/deltagen-bookworm-backports.sources
if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  # The mirror the bookworm suite comes from (deb822 or one-line form).
  mirror="$(grep -rhs -B3 -A3 '^Suites:.*\bbookworm\b' /etc/apt/sources.list.d/*.sources 2>/dev/null |
            sed -n 's/^URIs: *\([^ ]*\).*/\1/p' | grep -v security | head -1 || true)"
  [ -z "$mirror" ] && mirror="$(grep -hs '^deb .* bookworm ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
                                 awk '{print $2}' | head -1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  say "adding the bookworm-backports suite ($mirror) to apt's sources: $list"
  printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" | $sudo tee "$list.tmp" >/dev/null
  $sudo mv "$list.tmp" "$list"
fi
say "installing Mesa's lavapipe (Vulkan on the CPU) from bookworm-backports, for the WebGPU tests"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -t bookworm-backports \
  mesa-vulkan-drivers libvulkan1 vulkan-tools >/dev/null
new_enough || { say "error: mesa-vulkan-drivers $(mesa_version) installed, Mesa >= 23 needed"; exit 1; }
