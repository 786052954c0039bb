#!/usr/bin/env bash
# The quantization table of docs/results.md: every precision and int4 method
# built from the trained model in ../shared/models/qwen35-tiny-en, each
# compared with its fp32 build (the bf16 checkpoint converted exactly) on a
# held-out slice of sample.txt that no build calibrates on.
#   bench/quant_results.sh BUILD/deltagen WORK_DIR > table.md
# Calibration: the first 200 KB of sample.txt; held out: its last 60 KB
# (both are the model's training text: this compares methods with each other,
# it is not a measurement of generalization).
set -euo pipefail
cli="$1"
work="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
src="$here/../shared/models/qwen35-tiny-en"
tok="$here/third_party/tokenizer/qwen3"
tokens="${QUANT_EVAL_TOKENS:-4096}"
mkdir -p "$work/ckpt"
for f in config.json model.safetensors; do ln -sf "$(realpath "$src/$f")" "$work/ckpt/$f"; done
for f in tokenizer.json tokenizer_config.json; do ln -sf "$(realpath "$tok/$f")" "$work/ckpt/$f"; done
head -c 200000 "$src/sample.txt" >"$work/calib.txt"
tail -c 60000 "$src/sample.txt" >"$work/heldout.txt"
cal=(--calibration "$work/calib.txt")

# name | build flags
rows=(
  "fp16|--precision fp16"
  "bf16|--precision bf16"
  "int8 (block 32)|--precision int8"
  "int4 RTN block 32 sym|--precision int4"
  "int4 RTN block 32 asym|--precision int4 --asymmetric"
  "int4 RTN block 128 sym|--precision int4 --block-size 128"
  "int4 RTN block 128 asym|--precision int4 --block-size 128 --asymmetric"
  "int4 search block 32 sym (calibrated)|--precision int4 --quant-method search ${cal[*]}"
  "int4 gptq block 32 sym|--precision int4 --quant-method gptq ${cal[*]}"
  "int4 gptq block 32 asym|--precision int4 --asymmetric --quant-method gptq ${cal[*]}"
  "int4 gptq block 128 sym|--precision int4 --block-size 128 --quant-method gptq ${cal[*]}"
  "mixed gptq, budget 4.5|--precision int4 --quant-method gptq ${cal[*]} --bits-budget 4.5"
  "mixed gptq, budget 5.0|--precision int4 --quant-method gptq ${cal[*]} --bits-budget 5.0"
)
"$cli" build --checkpoint "$work/ckpt" --out "$work/fp32" --precision fp32 >/dev/null
# Quantized weights' parameter count: every 2-D projection, the tied table once.
params=$(python3 - "$src/model.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    header = json.loads(f.read(n))
total = 0
for name, t in header.items():
    if name == '__metadata__' or len(t['shape']) != 2 or 'conv1d' in name: continue
    total += t['shape'][0] * t['shape'][1]
print(total)
PY
)
echo "| build | bits/weight | mean KL | p99 KL | top-1 | PPL ratio | build s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for row in "${rows[@]}"; do
  name="${row%%|*}"
  flags="${row#*|}"
  out="$work/m-$(echo "$name" | tr -c 'a-z0-9' '_')"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$cli" build --checkpoint "$work/ckpt" --out "$out" $flags >/dev/null 2>&1
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  bytes=$(stat -c %s "$out"/model.onnx* | paste -sd+ | bc)
  fp32=$(stat -c %s "$work/fp32"/model.onnx* | paste -sd+ | bc)
  "$cli" compare --a "$work/fp32" --b "$out" --corpus "$work/heldout.txt" --max-tokens "$tokens" \
    --greedy-tokens 0 --threads 2 --json 2>/dev/null >"$out/compare.json"
  python3 - "$out" "$name" "$bytes" "$fp32" "$params" "$secs" <<'PY'
import json, sys
out, name, size, fp32, params, secs = sys.argv[1:]
f = json.load(open(out + '/compare.json'))['comparisons'][0]['fidelity']
# Bits per quantized weight: the file minus the fp32 file's non-projection
# part (norms, conv, rotary tables, graph), over the projections' weights.
other = int(fp32) - 4 * int(params)
bpw = (int(size) - other) * 8 / int(params)
try:
    q = json.load(open(out + '/quantization.json'))
    if 'mixed' in q: bpw = q['mixed']['bits_per_weight']
except FileNotFoundError:
    pass
print(f"| {name} | {bpw:.2f} | {f['kl_mean']:.5f} | {f['kl_p99']:.4f} | {f['top1_agreement']*100:.1f} % | {f['ppl_ratio']:.4f} | {float(secs):.1f} |")
PY
done
