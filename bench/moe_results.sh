#!/usr/bin/env bash
# bench/moe_results.sh: the mixture-of-experts measurements of docs/performance.md
# section 6 on this machine: the 35B-A3B shape cut to LAYERS layers, int4,
# built from a synthetic checkpoint (builder time and peak RSS), then deltagen
# against stock ONNX Runtime on the same file in one process (prefill PROMPT
# tokens, decode GEN), the machine's read bandwidth measured in the same run,
# and each session's peak RSS (deltagen, deltagen keeping the original
# weights, stock ORT) against the model file. Prints markdown.
#
#   bench/moe_results.sh                       # 8 layers: ~16 GB checkpoint (deleted after the build), ~5 GB model
#   MODEL=DIR bench/moe_results.sh             # measure an existing build instead
#
# Settings (environment): BUILD (build), WORK (scratch outside the clone,
# default /tmp/deltagen-moe-work), PRESET (35b-a3b), LAYERS (8), PROMPT/GEN
# (1000/100), RUNS (3), THREADS (2), MEMBW_MIB (1024), KEEP_CHECKPOINT=1.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
WORK=${WORK:-/tmp/deltagen-moe-work}
PRESET=${PRESET:-35b-a3b}
LAYERS=${LAYERS:-8}
PROMPT=${PROMPT:-1000}; GEN=${GEN:-100}; RUNS=${RUNS:-3}; THREADS=${THREADS:-2}
MEMBW_MIB=${MEMBW_MIB:-1024}
DG=$BUILD/deltagen
say() { echo "moe_results.sh: $*" >&2; }
[[ -x $DG && -x $BUILD/membw ]] || { say "missing $DG or $BUILD/membw: run make build"; exit 1; }
mkdir -p "$WORK"

# peak RSS (kB) and wall seconds of a command, from GNU time
timed() {
  /usr/bin/time -f "%M %e" -o "$WORK/time.txt" "$@" > "$WORK/out.txt" 2> "$WORK/err.txt" ||
    { say "failed: $*"; tail -3 "$WORK/err.txt" >&2; exit 1; }
  cat "$WORK/time.txt"
}
gb() { awk -v k="$1" 'BEGIN { printf "%.2f GB", k * 1024 / 1e9 }'; }

MODEL=${MODEL:-}
if [[ -z $MODEL ]]; then
  MODEL=$WORK/m-$PRESET-$LAYERS
  CKPT=$WORK/ck-$PRESET-$LAYERS
  if [[ ! -d $MODEL ]]; then
    [[ -d $CKPT ]] || { say "synth $PRESET, $LAYERS layers"; timed "$DG" synth --preset "$PRESET" --layers "$LAYERS" --out "$CKPT" > /dev/null; }
    say "build int4"
    read -r build_kb build_s < <(timed "$DG" build --checkpoint "$CKPT" --out "$MODEL" --precision int4)
    echo "build ($PRESET, $LAYERS layers, int4): $build_s s, peak RSS $(gb "$build_kb"), checkpoint $(du -sh "$CKPT" | cut -f1)"
    [[ ${KEEP_CHECKPOINT:-0} == 1 ]] || rm -rf "$CKPT"
  fi
fi
file_bytes=$(du -b "$MODEL"/model.onnx* | awk '{ s += $1 } END { print s }')
echo "model: $MODEL, $(awk -v b="$file_bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }') on disk"

say "membw, $THREADS threads"
bw=$("$BUILD/membw" --threads "$THREADS" --mib "$MEMBW_MIB" --json | sed -n 's/.*"best_gbps": \([0-9.]*\).*/\1/p')
echo "read bandwidth (membw, $THREADS threads, best of its passes): $bw GB/s"

say "bench: deltagen vs stock ORT, paired"
"$DG" bench --model "$MODEL" --vs "$MODEL" --vs-kernels ort --prompt "$PROMPT" --gen "$GEN" --runs "$RUNS" \
  --warmup 1 --threads "$THREADS" --mem-bandwidth "$bw" 2> "$WORK/bench.err" | sed -n '/^| /,$p'

say "peak RSS per session"
echo
echo "| session | peak RSS | x model file |"
echo "|---|---:|---:|"
for variant in "deltagen|" "deltagen, originals kept|--session-config deltagen.release_weights=0" "stock ORT|--kernels ort"; do
  label=${variant%%|*}; flags=${variant#*|}
  # shellcheck disable=SC2086
  read -r kb _ < <(timed "$DG" bench --model "$MODEL" --prompt 16 --gen 8 --runs 1 --warmup 0 --threads "$THREADS" $flags)
  echo "| $label | $(gb "$kb") | $(awk -v k="$kb" -v b="$file_bytes" 'BEGIN { printf "%.2fx", k * 1024 / b }') |"
done
