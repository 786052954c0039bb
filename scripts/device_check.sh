#!/usr/bin/env bash
# deltagen on ONNX Runtime's CUDA EP, in one command on a lent GPU machine
# (docs/execution-providers.md). Writes one JSON file, $OUT/device_check.json.
#
#   scripts/device_check.sh --stage   HERE (npm and the build packages at hand):
#       fetch + verify the two npm packages, unpack them into third_party/ort-cuda,
#       build build-cuda/deltagen against that core, and pack what the GPU machine
#       lacks into .device-bundle/ (git-ignored; under the 64 MiB a device call
#       carries): the ORT core and providers, the CUDA provider slimmed to sm_90
#       (H100/H200), the deltagen binary with its Debian libraries, the golden
#       tiny-a checkpoint.
#   scripts/device_check.sh           THERE (carry .device-bundle): unpack and verify,
#       check the GPU, golden tiny-a fp32 greedy tokens on --ep cuda, synthesize the
#       0.8B and 4B shapes, build default / --norm-upcast / --l2norm decomposed
#       q4f16 models, bench pp1000/tg100 on cuda and on deltagen's CPU path.
#   DEVICE_CHECK_CPU_ONLY=1 scripts/device_check.sh
#       the same flow on --ep cpu with the tiny shapes: proves the plumbing here.
#
# Environment: OUT (default out/device_check), DEVICE_CHECK_SIZES ("0.8b 4b"),
# DEVICE_CHECK_RUNS (bench runs, 3), DEVICE_CHECK_BUDGET_S (480: later steps are
# skipped, and recorded as skipped, once it is spent), DELTAGEN_GOLDEN (the folder
# holding tiny-a; default: the bundle's copy, else ../shared/golden).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
ort_dir="$root/third_party/ort-cuda"
bundle="$root/.device-bundle"
cpu_only="${DEVICE_CHECK_CPU_ONLY:-0}"
out="${OUT:-$root/out/device_check}"
runs="${DEVICE_CHECK_RUNS:-3}"
budget="${DEVICE_CHECK_BUDGET_S:-480}"
start_s=$SECONDS

# ---- pinned inputs ---------------------------------------------------------------
CORE_TGZ=com.github.asus4.onnxruntime-0.4.9.tgz            # ORT 1.29.0 core (CPU build + provider bridge)
CORE_SHA=e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d
GPU_TGZ=com.github.asus4.onnxruntime.linux-x64-gpu-0.4.9.tgz # its CUDA 13 provider
GPU_SHA=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412
CORE_LIB_SHA=5715f06d8992ca8eeeddcce43df3a7d38f97d537052126f558e912cb312460ca     # libonnxruntime.so (1.29.0)
SHARED_LIB_SHA=086ec1d5388f64153d9c63470d126693db9a182c8ce236d3a1119068471b8a0d   # libonnxruntime_providers_shared.so
CUDA_LIB_SHA=56cf3254b118ad837ccc4ed8f6d1b23504bbf7ef91b34cbc0b289cb7f10b3037     # libonnxruntime_providers_cuda.so, as shipped
CUDA_SM90_SHA=d45c0dbe9690d4139755c2264287f085aa1a009f351e1293d0e3d687b6311c28                                                      # the same with every non-sm_90 cubin zeroed
plugins=package/Plugins/Linux/x64
headers='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'

say() { echo "[device_check $((SECONDS - start_s))s] $*" >&2; }
die() { echo "device_check: error: $*" >&2; exit 1; }
sha_ok() { echo "$1  $2" | sha256sum -c --status 2>/dev/null; }

# ---- ORT: third_party/ort-cuda -----------------------------------------------------
ort_ready() {
  [ -f "$ort_dir/lib/libonnxruntime.so.1" ] && sha_ok "$CORE_LIB_SHA" "$ort_dir/lib/libonnxruntime.so.1" &&
    sha_ok "$SHARED_LIB_SHA" "$ort_dir/lib/libonnxruntime_providers_shared.so" &&
    { sha_ok "$CUDA_LIB_SHA" "$ort_dir/lib/libonnxruntime_providers_cuda.so" ||
      sha_ok "$CUDA_SM90_SHA" "$ort_dir/lib/libonnxruntime_providers_cuda.so"; }
}

ort_from_npm() {  # needs npm (or the verified tarballs in the npm cache)
  # shellcheck source=scripts/npm_cache.sh
  source "$root/scripts/npm_cache.sh"  # cache, fetch_verified
  fetch_verified "$CORE_TGZ" com.github.asus4.onnxruntime@0.4.9 "$CORE_SHA"
  fetch_verified "$GPU_TGZ" com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9 "$GPU_SHA"
  say "unpacking ORT 1.29 + its CUDA provider into $ort_dir"
  local tmp; tmp="$(mktemp -d)"
  tar xzf "$cache/$CORE_TGZ" -C "$tmp" "$plugins/libonnxruntime.so" "$plugins/libonnxruntime_providers_shared.so" "$headers"
  tar xzf "$cache/$GPU_TGZ" -C "$tmp" "$plugins/libonnxruntime_providers_cuda.so"
  rm -rf "$ort_dir.tmp" && mkdir -p "$ort_dir.tmp/lib" "$ort_dir.tmp/include"
  cp "$tmp/$plugins/libonnxruntime.so" "$ort_dir.tmp/lib/libonnxruntime.so.1"
  ln -s libonnxruntime.so.1 "$ort_dir.tmp/lib/libonnxruntime.so"
  cp "$tmp/$plugins/libonnxruntime_providers_shared.so" "$tmp/$plugins/libonnxruntime_providers_cuda.so" "$ort_dir.tmp/lib/"
  cp "$tmp/$headers"/*.h "$ort_dir.tmp/include/"
  rm -rf "$tmp" "$ort_dir" && mv "$ort_dir.tmp" "$ort_dir"
}

ort_from_bundle() {
  say "unpacking ORT from $bundle/ort-cuda.tar.xz"
  rm -rf "$ort_dir.tmp" && mkdir -p "$ort_dir.tmp"
  tar xJf "$bundle/ort-cuda.tar.xz" -C "$ort_dir.tmp"
  rm -rf "$ort_dir" && mv "$ort_dir.tmp" "$ort_dir"
}

ensure_ort() {
  ort_ready && return 0
  if [ -f "$bundle/ort-cuda.tar.xz" ]; then ort_from_bundle
  elif command -v npm >/dev/null; then ort_from_npm
  else die "no ONNX Runtime CUDA packages: neither $bundle/ort-cuda.tar.xz (make it with scripts/device_check.sh --stage where npm works, and carry .device-bundle) nor npm"
  fi
  ort_ready || die "$ort_dir: the libraries do not match the pinned SHA-256"
}

# ---- staging (here) ------------------------------------------------------------------
# Zeroes the payload of every cubin that is not for sm_$2 in the .nv_fatbin section
# of $1, in fatbin containers that hold an sm_$2 one (the driver picks the exact
# arch; the rest never loads on that GPU). 230 MB -> 38 MB with xz.
slim_provider() {
  python3 - "$1" "$2" <<'EOF'
import struct, sys
path, keep = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, 'rb').read())
shoff, = struct.unpack_from('<Q', data, 0x28); shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3A)
sh = lambda i: struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize)
strtab = sh(shstrndx)[4]; sec = None
for i in range(shnum):
    s = sh(i)
    if data[strtab + s[0]:data.index(0, strtab + s[0])] == b'.nv_fatbin': sec = (s[4], s[5])
if sec is None: sys.exit('no .nv_fatbin section')
p, end_sec = sec[0], sec[0] + sec[1]; zeroed = 0
while p < end_sec:
    magic, _, hs, fat = struct.unpack_from('<IHHQ', data, p)
    if magic != 0xBA55ED50: p += 8; continue
    entries = []; q = p + hs; end = q + fat
    while q < end:
        _, _, ehs, padded = struct.unpack_from('<HHIQ', data, q)
        entries.append((struct.unpack_from('<I', data, q + 28)[0], q + ehs, padded)); q += ehs + padded
    if any(a == keep for a, _, _ in entries):
        for a, o, n in entries:
            if a != keep: data[o:o + n] = bytes(n); zeroed += n
    p = end
open(path, 'wb').write(data)
print('zeroed %d bytes of non-sm_%d cubins' % (zeroed, keep), file=sys.stderr)
EOF
}

stage() {
  command -v npm >/dev/null || die "--stage needs npm"
  ort_ready || ort_from_npm
  ort_ready || die "$ort_dir: the libraries do not match the pinned SHA-256"
  if [ -z "${DELTAGEN_BIN:-}" ]; then
    say "building build-cuda/deltagen against $ort_dir"
    cmake -S "$root" -B "$root/build-cuda" -DONNXRUNTIME_ROOT="$ort_dir" >/dev/null
    cmake --build "$root/build-cuda" -j "${JOBS:-2}" --target deltagen >/dev/null
  fi
  local bin="${DELTAGEN_BIN:-$root/build-cuda/deltagen}"
  rm -rf "$bundle.tmp" && mkdir -p "$bundle.tmp/bin" "$bundle.tmp/lib" "$bundle.tmp/golden/tiny-a/golden"
  local tmp; tmp="$(mktemp -d)"
  mkdir -p "$tmp/lib" "$tmp/include"
  cp -P "$ort_dir"/lib/libonnxruntime.so* "$ort_dir/lib/libonnxruntime_providers_shared.so" "$tmp/lib/"
  cp "$ort_dir/include"/*.h "$tmp/include/"
  cp "$ort_dir/lib/libonnxruntime_providers_cuda.so" "$tmp/lib/"
  sha_ok "$CUDA_LIB_SHA" "$tmp/lib/libonnxruntime_providers_cuda.so" && slim_provider "$tmp/lib/libonnxruntime_providers_cuda.so" 90
  local got; got="$(sha256sum "$tmp/lib/libonnxruntime_providers_cuda.so" | cut -d' ' -f1)"
  [ "$got" = "$CUDA_SM90_SHA" ] || die "the slimmed provider's SHA-256 is $got, not the pinned $CUDA_SM90_SHA"
  say "compressing the ORT libraries (xz, a minute or two)"
  tar cf - -C "$tmp" lib include | xz -T2 -6 > "$bundle.tmp/ort-cuda.tar.xz"
  rm -rf "$tmp"
  # deltagen and the libraries a CUDA image may lack (Debian's protobuf, onnx, ICU, ...):
  # everything ldd names but glibc, libstdc++, libgcc_s and ORT itself.
  cp "$bin" "$bundle.tmp/bin/deltagen"
  ldd "$bin" | awk '$3 ~ /^\// {print $3}' | grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libonnxruntime)\.so' |
    while read -r l; do cp -L "$l" "$bundle.tmp/lib/"; done
  (cd "$bundle.tmp" && tar cf - lib | xz -T2 -6 > libs.tar.xz && rm -rf lib)
  local golden="${DELTAGEN_GOLDEN:-$root/../shared/golden}"
  cp "$golden/tiny-a/config.json" "$golden/tiny-a/model.safetensors" "$bundle.tmp/golden/tiny-a/"
  cp "$golden/tiny-a/golden/summary.json" "$golden/tiny-a/golden/greedy_step_logits.npy" "$bundle.tmp/golden/tiny-a/golden/"
  rm -rf "$bundle" && mv "$bundle.tmp" "$bundle"
  say "staged $(du -sh "$bundle" | cut -f1) in $bundle: carry .device-bundle (with the working tree: under 64 MiB)"
  du -ab "$bundle" | sort -n | tail -6 >&2
}

# ---- the GPU ---------------------------------------------------------------------------
cuda_libs() {  # puts CUDA 13's runtime libraries on LD_LIBRARY_PATH, or says which one is missing
  command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU ||
    die "no CUDA device: nvidia-smi is missing or lists no GPU (this check needs an NVIDIA GPU; DEVICE_CHECK_CPU_ONLY=1 runs the plumbing on the CPU)"
  local dirs=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
              /usr/lib/x86_64-linux-gnu)
  local py; for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null || continue
    local sp; sp="$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)" || continue
    local d; for d in $sp; do dirs+=("$d"/nvidia/*/lib "$d"/nvidia/cu13/lib); done
  done
  local need lib found path=""
  for need in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10; do
    found=""
    for lib in "${dirs[@]}"; do [ -e "$lib/$need" ] && { found="$lib"; break; }; done
    if [ -z "$found" ] && ldconfig -p 2>/dev/null | grep -q "$need "; then found=system; fi
    [ -n "$found" ] || die "no CUDA device libraries: $need not found (needs the NVIDIA driver and CUDA 13's runtime)"
    [ "$found" = system ] || case ":$path:" in *":$found:"*) ;; *) path="$path:$found" ;; esac
  done
  export LD_LIBRARY_PATH="${path#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$work/gpu.txt" 2>/dev/null || true
  say "GPU: $(cat "$work/gpu.txt")"
}

# ---- steps: each with a timeout; its status goes to steps.tsv ---------------------
step() {  # step NAME TIMEOUT_S CMD...: runs CMD (stdout+stderr to logs/NAME.log)
  local name="$1" limit="$2"; shift 2
  local left=$((budget - (SECONDS - start_s)))
  if [ "$left" -le 5 ]; then printf '%s\tskipped\t0\tbudget spent\n' "$name" >> "$work/steps.tsv"; say "$name: skipped (budget spent)"; return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "$name (at most ${limit}s)"
  local t0=$SECONDS rc=0
  timeout "$limit" "$@" > "$work/logs/$name.log" 2>&1 || rc=$?
  local status=ok; [ $rc -eq 124 ] && status=timeout; [ $rc -ne 0 ] && [ $rc -ne 124 ] && status="failed rc $rc"
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" "$(tail -1 "$work/logs/$name.log" | tr '\t' ' ' | cut -c1-300)" >> "$work/steps.tsv"
  [ $rc -eq 0 ] || say "$name: $status: $(tail -1 "$work/logs/$name.log")"
  return $rc
}

run_check() {
  local ep=cuda sizes="${DEVICE_CHECK_SIZES:-0.8b 4b}" threads; threads="$(nproc)"
  # ORT 1.29's CPU EP has no LinearAttentionGate or GatedRMSNorm kernel (its CUDA EP has both):
  # CPU runs on this core use the decomposed forms.
  local cpu_flags=(--no-linear-attention-gate --no-gated-rmsnorm)
  [ "$cpu_only" = 1 ] && { ep=cpu; sizes="${DEVICE_CHECK_SIZES:-tiny}"; }
  work="$root/out/device_check_work"; rm -rf "$work"; mkdir -p "$work/logs" "$out"
  : > "$work/steps.tsv"
  ensure_ort
  local dg
  if [ -n "${DELTAGEN_BIN:-}" ]; then dg="$DELTAGEN_BIN"
  elif [ -f "$bundle/bin/deltagen" ]; then
    mkdir -p "$work/lib" && tar xJf "$bundle/libs.tar.xz" -C "$work"
    export LD_LIBRARY_PATH="$ort_dir/lib:$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    dg="$bundle/bin/deltagen"
  else
    say "no staged binary: building build-cuda/deltagen"
    cmake -S "$root" -B "$root/build-cuda" -DONNXRUNTIME_ROOT="$ort_dir" > "$work/logs/cmake.log" 2>&1 ||
      die "cannot configure build-cuda (see $work/logs/cmake.log): stage a binary with --stage where the build packages are"
    cmake --build "$root/build-cuda" -j "$threads" --target deltagen >> "$work/logs/cmake.log" 2>&1 || die "build-cuda failed (see $work/logs/cmake.log)"
    dg="$root/build-cuda/deltagen"
  fi
  export LD_LIBRARY_PATH="$ort_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  "$dg" --version > "$work/version.txt" 2>&1 || true
  [ "$cpu_only" = 1 ] || cuda_libs

  # Golden: tiny-a fp32, greedy tokens exact, logits within 1e-4 (README of the golden set).
  local golden="${DELTAGEN_GOLDEN:-}"
  [ -z "$golden" ] && { [ -d "$bundle/golden/tiny-a" ] && golden="$bundle/golden" || golden="$root/../shared/golden"; }
  local prompt; prompt="$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$golden/tiny-a/golden/summary.json" 2>/dev/null || echo 5,17,300,42,7,99,123,256,1,400,33,77)"
  step golden_build 60 "$dg" build --checkpoint "$golden/tiny-a" --out "$work/tiny-a-fp32" &&
    step golden_generate 120 "$dg" generate --model "$work/tiny-a-fp32" --ids "$prompt" --max-new-tokens 16 --temperature 0 \
      --ignore-eos --json --ep "$ep" --logits-out "$work/golden_logits.npy" || true
  [ -f "$work/logs/golden_generate.log" ] && grep '^{' "$work/logs/golden_generate.log" > "$work/golden_generate.json" || true

  # Synthetic shapes: default, --norm-upcast, --l2norm decomposed, all q4f16.
  local s v
  for s in $sizes; do
    step "synth_$s" 120 "$dg" synth --preset "$s" --out "$work/ckpt-$s" || continue
    for v in default norm-upcast l2norm-decomposed; do
      local extra=(); [ $v = norm-upcast ] && extra=(--norm-upcast); [ $v = l2norm-decomposed ] && extra=(--l2norm decomposed)
      [ "$ep" = cpu ] && extra+=("${cpu_flags[@]}")
      step "build_${s}_$v" 180 "$dg" build --checkpoint "$work/ckpt-$s" --out "$work/m-$s-$v" --precision int4 --activations fp16 "${extra[@]}" || true
    done
    if [ "$ep" != cpu ]; then
      step "build_${s}_default-cpu" 180 "$dg" build --checkpoint "$work/ckpt-$s" --out "$work/m-$s-default-cpu" --precision int4 \
        --activations fp16 "${cpu_flags[@]}" || true
    fi
    rm -rf "$work/ckpt-$s"
  done
  for s in $sizes; do
    for v in default norm-upcast l2norm-decomposed; do
      [ -d "$work/m-$s-$v" ] || continue
      step "bench_${s}_${v}_$ep" 150 "$dg" bench --model "$work/m-$s-$v" --ep "$ep" --prompt 1000 --gen 100 --warmup 1 \
        --runs "$runs" --threads "$threads" --json-out "$out/bench_${s}_${v}_$ep.json" || true
    done
    # deltagen's CPU path (its own kernels) on the default build, for comparison.
    if [ "$ep" != cpu ] && [ -d "$work/m-$s-default-cpu" ]; then
      step "bench_${s}_default_cpu" 150 "$dg" bench --model "$work/m-$s-default-cpu" --ep cpu --prompt 1000 --gen 100 --warmup 1 \
        --runs 2 --threads "$threads" --json-out "$out/bench_${s}_default_cpu.json" || true
    fi
  done
  assemble "$ep" "$golden"
}

assemble() {  # one JSON: steps, golden verdict, GPU, every bench report
  python3 - "$work" "$out" "$1" "$2/tiny-a/golden" "$cpu_only" <<'EOF'
import json, os, struct, sys, glob, array
work, out, ep, gdir, cpu_only = sys.argv[1:6]
def npy(path):
    raw = open(path, 'rb').read(); hl, = struct.unpack_from('<H', raw, 8); hdr = raw[10:10 + hl].decode()
    assert "'<f4'" in hdr, hdr
    a = array.array('f'); a.frombytes(raw[10 + hl:]); return a
res = {'ep': ep, 'cpu_only': cpu_only == '1', 'steps': [], 'golden': {}, 'bench': {}}
for line in open(os.path.join(work, 'steps.tsv')):
    name, status, secs, last = (line.rstrip('\n').split('\t') + [''] * 4)[:4]
    res['steps'].append({'name': name, 'status': status, 'seconds': int(secs or 0), 'last_line': last})
for f, key in (('gpu.txt', 'gpu'), ('version.txt', 'deltagen_version')):
    p = os.path.join(work, f)
    if os.path.exists(p): res[key] = open(p).read().strip()
g = res['golden']
try:
    want = json.load(open(os.path.join(gdir, 'summary.json')))
    want_ids = want['greedy_new_tokens']
    got = json.load(open(os.path.join(work, 'golden_generate.json')))
    g['expected_tokens'] = want_ids; g['tokens'] = got['generated_ids']
    g['tokens_exact'] = got['generated_ids'] == want_ids
    ours = npy(os.path.join(work, 'golden_logits.npy')); ref = npy(os.path.join(gdir, 'greedy_step_logits.npy'))
    # ours: the prompt rows then one per decode step; the reference: one row per new token
    vocab = 512; steps = len(ref) // vocab; prompt = len(ours) // vocab - steps + 1
    rows = list(range(prompt - 1, prompt - 1 + steps))
    g['max_abs_logit_diff'] = max(abs(ours[r * vocab + i] - ref[j * vocab + i]) for j, r in enumerate(rows) for i in range(vocab))
    g['pass'] = g['tokens_exact'] and g['max_abs_logit_diff'] < 1e-4 * (100 if ep != 'cpu' else 1)
except Exception as e:
    g['error'] = '%s: %s' % (type(e).__name__, e); g['pass'] = False
for p in sorted(glob.glob(os.path.join(out, 'bench_*.json'))):
    res['bench'][os.path.basename(p)[6:-5]] = json.load(open(p))
path = os.path.join(out, 'device_check.json')
json.dump(res, open(path, 'w'), indent=1)
bad = [s['name'] for s in res['steps'] if s['status'] != 'ok']
print('device_check: wrote %s: golden %s, %d bench reports, %d steps not ok%s' % (
    path, 'pass' if g.get('pass') else 'FAIL', len(res['bench']), len(bad), (': ' + ', '.join(bad)) if bad else ''), file=sys.stderr)
EOF
  # only the merged file comes back from a device call (8 files at most): fold the parts in
  rm -f "$out"/bench_*.json
}

case "${1:-}" in
  --stage) stage ;;
  "") run_check ;;
  *) die "usage: scripts/device_check.sh [--stage]" ;;
esac
