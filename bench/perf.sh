#!/usr/bin/env bash
# bench/perf.sh: stock ONNX Runtime MatMulNBits kernels against deltagen's, on
# the same int4 model file, paired in one process (`deltagen bench --vs` with
# `--kernels ort` for A), for the 0.8B-, 2B- and 4B-shaped checkpoints; plus
# the builder's time and peak memory for each build; for the first preset also
# decode from a short context (pp16 / tg128), deltagen's kernels with and
# without the load-time fusions, without huge pages and the L2 prefetch
# (docs/performance.md 1.14), the `--state-dtype fp16` build, and the
# fidelity of each against ORT's exact kernels. Writes
# docs/performance-results.md (docs/performance.md explains it).
#
#   bench/perf.sh                    # 0.8b 2b 4b, pp1000 + tg100, 1 warm-up + 3 runs
#   PRESETS=0.8b RUNS=2 bench/perf.sh
#
# Settings (environment): BUILD (default build), WORK (default
# $BUILD/perf-work; synthetic checkpoints are cached there), OUT, PRESETS,
# PROMPT/GEN/WARMUP/RUNS (1000/100/1/3), THREADS (nproc), LOCK
# (/tmp/deltagen-bench.lock), PRUNED (1: also the --prune-lm-head build of the
# first preset, whose prefill skips the lm_head for all but the last token).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
WORK=${WORK:-$BUILD/perf-work}
OUT=${OUT:-docs/performance-results.md}
PRESETS=${PRESETS:-0.8b 2b 4b}
PROMPT=${PROMPT:-1000}; GEN=${GEN:-100}; WARMUP=${WARMUP:-1}; RUNS=${RUNS:-3}
THREADS=${THREADS:-$(nproc)}
LOCK=${LOCK:-/tmp/deltagen-bench.lock}
PRUNED=${PRUNED:-1}
DG=$BUILD/deltagen
say() { echo "perf.sh: $*" >&2; }

cmake --build "$BUILD" -j 2 --target deltagen membw >&2
mkdir -p "$WORK"
CTX=$((PROMPT + GEN + 16))

json_field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
membw() { flock "$LOCK" "$BUILD/membw" --threads "$THREADS" --mib 1024 --json "$@" | json_field best_gbps; }
bw=$(membw); bw_huge=$(membw --huge-pages)
say "read bandwidth $bw GB/s ($bw_huge on huge pages)"

BUILDS_MD=$WORK/builds.md; SPEED_MD=$WORK/speed.md
: >"$BUILDS_MD"; : >"$SPEED_MD"

# build_model PRESET NAME FLAGS...: builds (timed) unless present; prints the folder.
build_model() {
  local preset=$1 name=$2; shift 2
  local ckpt=$WORK/ckpt-$preset dir=$WORK/$name-$preset
  if [[ ! -f $ckpt/config.json ]]; then
    say "synthesizing the $preset checkpoint (bf16)"
    "$DG" synth --preset "$preset" --dtype bf16 --seed 0 --out "$ckpt" >&2
  fi
  if [[ ! -f $dir/genai_config.json ]]; then
    say "building $name for $preset"
    # %e wall seconds, %M peak RSS in KiB
    /usr/bin/time -f "%e %M" -o "$WORK/time.txt" \
      "$DG" build --checkpoint "$ckpt" --out "$dir" --context-length "$CTX" "$@" >&2
    read -r secs kib <"$WORK/time.txt"
    local in_mb out_mb
    in_mb=$(du -smL --apparent-size "$ckpt" | cut -f1); out_mb=$(du -sm --apparent-size "$dir" | cut -f1)
    printf '| %s | `build %s` | %s MB | %s MB | %s s | %s MiB |\n' "$preset" "$*" "$in_mb" "$out_mb" "$secs" \
      $((kib / 1024)) >"$dir.build-row"
  fi
  echo "$dir"
}

bench_pair() {  # TITLE MODEL_DIR [A_KERNELS [A_NAME [A_SESSION_CONFIG]]]
  local title=$1 dir=$2 a_kernels=${3:-ort} a_name=${4:-ONNX Runtime\'s own kernels} md=$WORK/bench-$RANDOM.md
  local a_config=()
  if [[ -n ${5:-} ]]; then a_config=(--session-config "$5"); fi
  say "bench: $title"
  flock "$LOCK" "$DG" bench --model "$dir" --vs "$dir" --kernels "$a_kernels" --vs-kernels deltagen "${a_config[@]}" \
    --prompt "$PROMPT" --gen "$GEN" --warmup "$WARMUP" --runs "$RUNS" --threads "$THREADS" \
    --mem-bandwidth "$bw" --markdown >"$md"
  printf '### %s\n\nA = %s, B = deltagen (kernels and fusions, the default), same file.\n\n' "$title" "$a_name" \
    >>"$SPEED_MD"
  cat "$md" >>"$SPEED_MD"; echo >>"$SPEED_MD"
}

# Fidelity of the fast path (issue: no worse than ORT's own accuracy level 4
# against level 0), teacher-forced over FID_TOKENS pseudo-random ids.
FID_TOKENS=${FID_TOKENS:-512}
FID_MD=$WORK/fidelity.md
: >"$FID_MD"
fidelity() {  # PRESET
  local preset=$1 q4 q4acc0 q4f16 flags="--tokens $FID_TOKENS --context 512 --greedy-tokens 64 --threads $THREADS"
  q4=$(build_model "$preset" int4 --precision int4)
  q4acc0=$(build_model "$preset" int4-acc0 --precision int4 --accuracy-level 0)
  q4f16=$(build_model "$preset" int4-f16state --precision int4 --state-dtype fp16)
  say "fidelity of the kernels on $preset"
  {
    printf '### ORT accuracy level 4 against level 0 (same weights)\n\n'
    # shellcheck disable=SC2086
    flock "$LOCK" "$DG" compare --a "$q4acc0" --b "$q4" --b-kernels ort $flags
    printf '\n### deltagen kernels (level-4 file) against ORT level 0\n\n'
    # shellcheck disable=SC2086
    flock "$LOCK" "$DG" compare --a "$q4acc0" --b "$q4" $flags
    printf '\n### deltagen kernels against ORT kernels, same file\n\n'
    # shellcheck disable=SC2086
    flock "$LOCK" "$DG" compare --a "$q4" --a-kernels ort --b "$q4" $flags
    printf '\n### deltagen kernels, `--state-dtype fp16` build, against ORT level 0 (fp32 state)\n\n'
    # shellcheck disable=SC2086
    flock "$LOCK" "$DG" compare --a "$q4acc0" --b "$q4f16" $flags
  } >>"$FID_MD"
}

first=1
for preset in $PRESETS; do
  dir=$(build_model "$preset" int4 --precision int4)
  bench_pair "$preset, int4 (block 32, accuracy level 4)" "$dir"
  if [[ $first == 1 ]]; then
    PROMPT=16 GEN=128 bench_pair "$preset, int4, decode from a short context (pp16 / tg128, as llama-bench's tg128)" "$dir"
    fidelity "$preset"
    bench_pair "$preset, int4: what the fusions add" "$dir" deltagen-ops "deltagen's kernels without the fusions"
    PROMPT=16 GEN=128 bench_pair "$preset, int4: what huge pages and the L2 prefetch add (pp16 / tg128)" "$dir" \
      deltagen "deltagen with its weights on 4 KiB pages and the L1 prefetch of before (the state buffers stay on huge pages)" \
      deltagen.matmul.huge_pages=0,deltagen.matmul.prefetch=l1:4096
    dir=$(build_model "$preset" int4-f16state --precision int4 --state-dtype fp16)
    bench_pair "$preset, int4 with --state-dtype fp16 (linear-attention states in fp16)" "$dir"
    PROMPT=16 GEN=128 bench_pair "$preset, int4 with --state-dtype fp16, decode from a short context" "$dir"
  fi
  if [[ $first == 1 && $PRUNED == 1 ]]; then
    dir=$(build_model "$preset" int4-pruned --precision int4 --prune-lm-head)
    bench_pair "$preset, int4 with --prune-lm-head (last-token logits in prefill)" "$dir"
  fi
  first=0
done

for preset in $PRESETS; do
  for name in int4 int4-acc0 int4-f16state int4-pruned; do
    if [[ -f $WORK/$name-$preset.build-row ]]; then cat "$WORK/$name-$preset.build-row" >>"$BUILDS_MD"; fi
  done
done

bw_end=$(membw); bw_huge_end=$(membw --huge-pages)
say "read bandwidth at the end $bw_end GB/s ($bw_huge_end on huge pages)"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit + uncommitted changes"
tmp=$OUT.tmp
{
  cat <<EOF
# Kernel results on this machine

Generated by \`bench/perf.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') from commit $commit; see
docs/performance.md for the method and what the kernels do.

- Machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs; memory read
  bandwidth $bw GB/s at the start, $bw_end GB/s at the end (\`membw --threads $THREADS\`; on huge pages,
  \`--huge-pages\`: $bw_huge and $bw_huge_end GB/s). The efficiency column divides by the first.
- Models: synthetic checkpoints (\`deltagen synth --preset P --dtype bf16\`: real shapes, random weights),
  built to int4 (block 32, symmetric, accuracy level 4, embedding read from the tied int4 lm_head).
- Speed: \`deltagen bench --model M --vs M --kernels ort --vs-kernels deltagen\`: pp$PROMPT / tg$GEN,
  $WARMUP warm-up + $RUNS runs per side, A and B alternating in one process, $THREADS threads.

## Builder: time and peak memory

| preset | command | checkpoint | output | wall time | peak RSS |
|---|---|---:|---:|---:|---:|
$(cat "$BUILDS_MD")

## Speed

$(cat "$SPEED_MD")

## Fidelity of the kernels (${PRESETS%% *})

\`deltagen compare\`, teacher-forced over $FID_TOKENS pseudo-random ids (windows of 512), greedy
continuation of 64 tokens. The accuracy-level-0 build runs on ORT's kernels either way (deltagen's
kernels only take level-4 nodes).

$(cat "$FID_MD")
EOF
} >"$tmp"
mv "$tmp" "$OUT"
say "wrote $OUT"
