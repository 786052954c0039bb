#!/usr/bin/env bash
# Image encode time and peak memory of the vision tower on the Qwen3.5-0.8B
# shape (docs/performance.md, "Images"): a synthetic 0.8B checkpoint with its
# vision tower, built with --vision at each --vision-precision, then
# `generate --image` on a 448x448 and a 1024x768 PNG, REPS runs each per kernel
# set; prints the median encode time (decode + preprocess + vision.onnx), the
# image tokens, the prompt's prefill speed and the peak RSS of the run.
#   bench/vision_results.sh [WORK_DIR] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/deltagen-vision-bench}
reps=${2:-3}
bin=build/deltagen
mkdir -p "$work"
[ -d "$work/ck08" ] || $bin synth --preset 0.8b --vision --out "$work/ck08" >/dev/null
python3 - "$work" <<'PY'
import struct, sys, zlib
def png(path, w, h):  # gradients, a checkerboard and a disc: a picture with edges
    raw = bytearray()
    for y in range(h):
        raw.append(0)
        for x in range(w):
            r, g = 255 * x // (w - 1), 255 * y // (h - 1)
            b = 255 if (x // 32 + y // 32) % 2 else 40
            if (x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 4) ** 2: r, g, b = 220, 30, 30
            raw += bytes((r, g, b))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + chunk(b"IEND", b""))
for w, h in ((448, 448), (1024, 768)): png(f"{sys.argv[1]}/img_{w}x{h}.png", w, h)
PY
# <|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe.<|im_end|>\n<|im_start|>assistant\n
ids=248045,846,198,248053,248056,248054,74785,13,248046,198,248045,74455,198
printf "%-6s %-9s %-9s %7s %10s %12s %9s\n" vision kernels image tokens encode_s prefill_tok_s peak_GB
for vp in fp32 int8 int4; do
  [ -d "$work/m08-$vp" ] || $bin build --checkpoint "$work/ck08" --out "$work/m08-$vp" --precision int4 --vision \
    --vision-precision $vp >/dev/null
  for kernels in deltagen ort; do
    for img in 448x448 1024x768; do
      rows=()
      for ((r = 0; r < reps; ++r)); do
        out=$(/usr/bin/time -f "%M" $bin generate --model "$work/m08-$vp" --ids $ids --image "$work/img_$img.png" \
              --max-new-tokens 1 --threads 2 --kernels $kernels --json 2>"$work/time.txt")
        rows+=("$(echo "$out" | python3 -c "import json,sys; j=json.load(sys.stdin)['sequences'][0]; \
print(j['image_encode_seconds'], j['image_tokens'], j['prompt_tokens_per_second'])") $(tail -1 "$work/time.txt")")
      done
      printf "%s\n" "${rows[@]}" | sort -n | awk -v n=$reps -v vp=$vp -v k=$kernels -v img=$img \
        'NR == int((n + 1) / 2) { printf "%-6s %-9s %-9s %7d %10.3f %12.1f %9.2f\n", vp, k, img, $2, $1, $3, $4 / 1048576 }'
    done
  done
done
