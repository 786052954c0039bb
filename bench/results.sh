#!/usr/bin/env bash
# bench/results.sh: measure the upstream tables on this machine and write
# docs/results.md. Anyone can rerun it; the numbers are only comparable to
# other machines through the bandwidth-efficiency column (membw).
#
#   bench/results.sh                 # the full run: 0.8B-shaped model, 1000+100 tokens, 5 runs
#   QUICK=1 bench/results.sh         # a smoke run on the tiny preset (seconds; writes under $WORK)
#
# Settings (environment): BUILD (build folder, default build), WORK (scratch,
# default $BUILD/results-work), OUT (default docs/results.md), THREADS
# (default nproc), PROMPT/GEN/WARMUP/RUNS (1000/100/1/5), RERUN (extra pairs
# allowed to replace noisy ones, 5), ATTEMPTS (whole measurements of a pair
# while none of its run pairs is clean, 2), MAX_FOREIGN (% of a core, 15), PRESET
# (0.8b), DEPTHS (24,36), FID_TOKENS/FID_CONTEXT (1024/512), LOCK (the shared
# benchmark lock, /tmp/deltagen-bench.lock), SKIP_BUILD=1 (use the binaries as
# they are).
#
# Every timing command runs under `flock $LOCK`, so benchmarks of different
# people never overlap; builds and compiles of other people still can, which
# is what the interference meter in every bench run records.
#
# What is compared: the two upstream graph changes in the activation dtypes
# where they matter, as the upstream PRs measured them (int4 weights,
# MatMulNBits, the CPU default):
#   - the q/k L2 norm, one LpNormalization vs the decomposed form (#2127), with
#     fp32 activations (q4) and fp16 activations (q4f16);
#   - the RMSNorm fp32 upcast (#2101): fp16 norms vs Casts around every norm,
#     with fp16 activations (with fp32 activations the switch changes nothing).
# A variant the builder cannot build yet is reported as missing, not fatal.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=${QUICK:-0}
BUILD=${BUILD:-build}
WORK=${WORK:-$BUILD/results-work}
THREADS=${THREADS:-$(nproc)}
LOCK=${LOCK:-/tmp/deltagen-bench.lock}
JOBS=${JOBS:-2}
MAX_FOREIGN=${MAX_FOREIGN:-15}
RERUN=${RERUN:-5}
SEED=${SEED:-0}
if [[ $QUICK == 1 ]]; then
  OUT=${OUT:-$WORK/results-quick.md}
  RETRY_SLEEP=${RETRY_SLEEP:-1}
  PRESET=${PRESET:-tiny}; PROMPT=${PROMPT:-64}; GEN=${GEN:-16}; WARMUP=${WARMUP:-1}; RUNS=${RUNS:-2}
  DEPTHS=${DEPTHS:-4,8}; FID_TOKENS=${FID_TOKENS:-128}; FID_CONTEXT=${FID_CONTEXT:-64}; MEMBW_MIB=${MEMBW_MIB:-64}
else
  OUT=${OUT:-docs/results.md}
  PRESET=${PRESET:-0.8b}; PROMPT=${PROMPT:-1000}; GEN=${GEN:-100}; WARMUP=${WARMUP:-1}; RUNS=${RUNS:-5}
  DEPTHS=${DEPTHS:-24,36}; FID_TOKENS=${FID_TOKENS:-1024}; FID_CONTEXT=${FID_CONTEXT:-512}; MEMBW_MIB=${MEMBW_MIB:-1024}
fi
ATTEMPTS=${ATTEMPTS:-2}         # measurements of a pair when none of its pairs of runs was clean
RETRY_SLEEP=${RETRY_SLEEP:-60}  # ... and the pause before the next one
DG=$BUILD/deltagen
MEMBW=$BUILD/membw

say() { echo "results.sh: $*" >&2; }

# ---- the pairs -----------------------------------------------------------------------
# "title|build flags of A|build flags of B"
Q4="--precision int4"
Q4F16="--precision int4 --activations fp16"
BENCH_PAIRS=(
  "q4 (fp32 activations): LpNormalization vs decomposed L2 norm|$Q4|$Q4 --l2norm decomposed"
  "q4f16: LpNormalization vs decomposed L2 norm|$Q4F16|$Q4F16 --l2norm decomposed"
  "q4f16: fp16 RMSNorm vs --norm-upcast|$Q4F16|$Q4F16 --norm-upcast"
)
# The same pairs for fidelity, plus each fp16 form against fp32 activations
# (same int4 weights): which one stays closer to fp32 is the real question.
FIDELITY_PAIRS=(
  "${BENCH_PAIRS[@]}"
  "q4 fp32 activations vs q4f16 (fp16 RMSNorm, the new form)|$Q4|$Q4F16"
  "q4 fp32 activations vs q4f16 --norm-upcast (the old form)|$Q4|$Q4F16 --norm-upcast"
)

# ---- build ---------------------------------------------------------------------------
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  say "building deltagen and membw in $BUILD"
  [[ -f $BUILD/CMakeCache.txt ]] || cmake -S . -B "$BUILD" >&2
  cmake --build "$BUILD" -j "$JOBS" --target deltagen membw >&2
fi
[[ -x $DG && -x $MEMBW ]] || { say "missing $DG or $MEMBW (build them, or set BUILD)"; exit 1; }
mkdir -p "$WORK" "$(dirname "$OUT")"
: >"$WORK/missing.txt"

# A model folder name for a set of build flags; it is also the model's label
# in the bench tables ("--precision int4 --activations fp16" -> int4_act-fp16).
slug() {
  local s=$1
  s=${s//--precision /}; s=${s//--activations /act-}; s=${s//--/}; s=${s// /_}
  echo "${s:-fp32}"
}

# ---- the machine ---------------------------------------------------------------------
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem_total=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit + uncommitted changes"
ort_lib=$(ls third_party/ort/lib/libonnxruntime.so.* 2>/dev/null | sed 's|.*/||' | sort | tail -1)

# membw at the benchmark's thread count and at 1 thread; the best of up to 3
# tries whose passes were quiet.
json_field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
measure_bw() {
  local threads=$1 best=0 foreign=999 out bw f
  for _ in 1 2 3; do
    out=$(flock "$LOCK" "$MEMBW" --threads "$threads" --mib "$MEMBW_MIB" --json)
    bw=$(json_field best_gbps <<<"$out"); f=$(json_field max_foreign_cpu_pct <<<"$out")
    if awk -v a="$bw" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$bw; foreign=$f; fi
    awk -v f="$f" -v m="$MAX_FOREIGN" 'BEGIN {exit !(f <= m)}' && break
    say "membw: ${f} % foreign CPU during the passes, measuring again"; sleep 5
  done
  echo "$best $foreign"
}
say "measuring memory read bandwidth"
read -r BW BW_FOREIGN <<<"$(measure_bw "$THREADS")"
read -r BW1 BW1_FOREIGN <<<"$(measure_bw 1)"

# ---- models for the speed pairs ----------------------------------------------------------
CKPT=$WORK/ckpt-$PRESET-seed$SEED
if [[ ! -f $CKPT/config.json ]]; then
  say "synthesizing the $PRESET checkpoint"
  "$DG" synth --preset "$PRESET" --seed "$SEED" --out "$CKPT" >&2
fi
CTX=$((PROMPT + GEN + 16))
declare -A BUILT  # flags -> model dir, or empty when the build failed
build_variant() {
  local flags=$1 dir err
  [[ -n ${BUILT[$flags]+x} ]] && return
  dir=$WORK/models/$(slug "$flags")
  say "building [$flags]"
  rm -rf "$dir"
  # shellcheck disable=SC2086  # the flags are words
  if err=$("$DG" build --checkpoint "$CKPT" --out "$dir" --context-length "$CTX" $flags 2>&1 >/dev/null); then
    BUILT[$flags]=$dir
  else
    BUILT[$flags]=""
    echo "- \`deltagen build $flags\`: $(tail -1 <<<"$err")" >>"$WORK/missing.txt"
    say "cannot build [$flags]: $(tail -1 <<<"$err")"
  fi
}

# ---- speed ----------------------------------------------------------------------------
NODES_MD=$WORK/nodes.md
SPEED_MD=$WORK/speed.md
BW_ROWS=$WORK/bandwidth-rows.md
: >"$NODES_MD"; : >"$SPEED_MD"; : >"$BW_ROWS"
i=0
for pair in "${BENCH_PAIRS[@]}"; do
  IFS='|' read -r title fa fb <<<"$pair"
  i=$((i + 1))
  build_variant "$fa"; build_variant "$fb"
  a=${BUILT[$fa]}; b=${BUILT[$fb]}
  if [[ -z $a || -z $b ]]; then
    echo "| $title | not built | | | |" >>"$NODES_MD"
    printf '### %s\n\nNot measured: a variant could not be built (see "Missing" below).\n\n' "$title" >>"$SPEED_MD"
    continue
  fi
  # Node counts: totals and the op types that changed, from inspect --diff.
  "$DG" inspect "$a" --diff "$b" | awk -v title="$title" '
    $1 == "nodes" { na = $2; nb = $3; d = $4 }
    NF == 4 && $1 != "nodes" && $1 != "initializers" && $4 != "0" && $1 !~ /^(weight|graph)/ {
      ch = ch (ch ? ", " : "") $1 " " $2 "→" $3 }
    END { printf "| %s | %s | %s | %s | %s |\n", title, na, nb, d, ch }' >>"$NODES_MD"

  say "bench pair $i/${#BENCH_PAIRS[@]}: $title"
  json=$WORK/bench-$i.json
  for ((attempt = 1; attempt <= ATTEMPTS; attempt++)); do
    flock "$LOCK" "$DG" bench --model "$a" --vs "$b" --prompt "$PROMPT" --gen "$GEN" --warmup "$WARMUP" \
      --runs "$RUNS" --threads "$THREADS" --max-foreign "$MAX_FOREIGN" --rerun-noisy "$RERUN" \
      --mem-bandwidth "$BW" --markdown --json-out "$json" >"$WORK/bench-$i.md"
    # A whole measurement without a single clean pair is measured again.
    grep -q '"clean_pairs": 0,' "$json" || break
    ((attempt == ATTEMPTS)) && { say "no clean pair: keeping the noisy measurement (flagged)"; break; }
    say "no clean pair (machine busy); measuring again in $RETRY_SLEEP s"
    sleep "$RETRY_SLEEP"
  done
  {
    printf '### %s\n\nA = `%s`, B = `%s`\n\n' "$title" "$fa" "$fb"
    cat "$WORK/bench-$i.md"
    echo
  } >>"$SPEED_MD"
  # The bandwidth columns of both rows: model | read/step | tg t/s | GB/s (of membw).
  awk -F'|' -v title="$title" '/^\| [AB]: / {
      gsub(/^ +| +$/, "", $2); printf "| %s (%s) | %s | %s | %s |\n", $2, title, $5, $9, $12 }' \
    "$WORK/bench-$i.md" >>"$BW_ROWS"
done

# ---- fidelity ---------------------------------------------------------------------------
FID_MD=$WORK/fidelity.md
: >"$FID_MD"
i=0
for pair in "${FIDELITY_PAIRS[@]}"; do
  IFS='|' read -r title fa fb <<<"$pair"
  i=$((i + 1))
  say "fidelity $i/${#FIDELITY_PAIRS[@]} at depths $DEPTHS: $title"
  # Not a timing run, but it keeps both cores busy: take the lock so nobody's
  # benchmark runs beside it.
  # shellcheck disable=SC2086
  if out=$(flock "$LOCK" "$DG" compare --depth "$DEPTHS" --preset "$PRESET" --build-a "$fa" --build-b "$fb" \
        --synth-seed "$SEED" --work-dir "$WORK/depth" --tokens "$FID_TOKENS" --context "$FID_CONTEXT" \
        --threads "$THREADS" --json-out "$WORK/fidelity-$i.json" 2>"$WORK/fidelity-$i.err"); then
    printf '### %s\n\n%s\n\n' "$title" "$out" >>"$FID_MD"
  else
    printf '### %s\n\nNot measured: %s\n\n' "$title" "$(tail -1 "$WORK/fidelity-$i.err")" >>"$FID_MD"
    echo "- fidelity of $title: $(tail -1 "$WORK/fidelity-$i.err")" >>"$WORK/missing.txt"
  fi
done

# ---- the document ----------------------------------------------------------------------------
# The WebGPU section is measured by hand (lavapipe is too slow for this script; its commands are
# in the section) and the quantization one by bench/quant_results.sh: both are carried over from
# the previous document as they are.
webgpu_section=""
[[ -f $OUT ]] && webgpu_section=$(awk '/^## /{ on = /^## (WebGPU|Quantization)/ } on' "$OUT")
tmp=$OUT.tmp
{
  cat <<EOF
# Results on this machine

Generated by \`bench/results.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') from commit $commit. Rerun it to refresh
every number below (\`QUICK=1 bench/results.sh\` is a smoke run that writes elsewhere).

- **Machine:** $cpu_model, $(nproc) CPUs, $mem_total. ONNX Runtime: ${ort_lib:-unknown}, CPU EP.
- **Memory read bandwidth** (\`membw\`: $THREADS thread(s) summing 3 × $MEMBW_MIB MiB, best pass): **$BW GB/s**
  (other processes used up to $BW_FOREIGN % of a core meanwhile); 1 thread: $BW1 GB/s.
- **Model:** a synthetic Qwen3.5-$PRESET-shaped checkpoint (\`deltagen synth --preset $PRESET --seed $SEED\`:
  real shapes, random bf16 weights), built with \`deltagen build --context-length $CTX\` plus the flags shown.
  Random weights do not change the speed; they make the fidelity numbers a statement about
  numerics on random activations, not about a real model's quality.

## Method

**Speed** (\`deltagen bench --vs\`, upstream's benchmark method): a prompt of $PROMPT pseudo-random ids in
one prefill run (logits of the last position), then greedy decoding to $GEN generated tokens, one model run
per token. Prompt tokens/s = $PROMPT / prefill wall time; generation tokens/s = 1 / mean decode-step time,
the first decode step excluded (as upstream); TTFT = prefill + the first argmax; decode latency percentiles
over all measured steps. $WARMUP warm-up + $RUNS measured runs per model, **A and B loaded in one process
and run alternately** (A B A B ...), so that each pair's ratio B/A sees the same machine state. $THREADS
intra-op threads. Every run records the interference meter (CPU time of other processes from
\`/proc/stat\` minus our own); a run with more than $MAX_FOREIGN % of a core foreign is *noisy*, noisy pairs
are re-run (up to $RERUN extra pairs; a measurement without any clean pair is repeated, $ATTEMPTS attempt(s)
in all) and summaries use clean runs only, or all runs flagged "(all noisy)" when none was clean. Every bench ran under
\`flock $LOCK\`.

**Fidelity** (\`deltagen compare --depth $DEPTHS --preset $PRESET\`): for each depth the same-width model is
synthesized with that many layers (same seed, so the first layers are the same weights), built with A's and
B's flags, and both are teacher-forced over $FID_TOKENS pseudo-random ids in windows of $FID_CONTEXT
(fresh state per window). Per position: KL(A‖B) of the next-token distributions, same top-1, |Δlogit|;
perplexity of the next corpus token under each; greedy agreement = tokens of a 256-token greedy
continuation (prompt: the first 32 corpus ids) equal before the first difference. Random weights make the
greedy continuation nearly constant, so greedy agreement is weak evidence here; KL and |Δlogit| are the
informative columns.

**Decode bandwidth efficiency**: bytes of weights one decode step reads (every initializer except those
only indexed by row: the embedding table of a Gather, rotary cos/sin caches) × decode steps/s, divided by
the membw bandwidth above. KV-cache and recurrent-state traffic are not counted.

## Node counts

From \`deltagen inspect A --diff B\` (graph as built, before ONNX Runtime's optimizer).

| pair | nodes A | nodes B | B − A | op types that changed (A→B) |
|---|---:|---:|---:|---|
EOF
  cat "$NODES_MD"
  cat <<EOF

## Speed: prompt and generation tokens/s, B against A in one process

$(cat "$SPEED_MD")

## Decode bandwidth efficiency

Weights read per decode step × generation steps/s, against $BW GB/s measured read bandwidth ($THREADS threads).

| model (pair) | weights read per step | generation t/s | weight GB/s (of membw) |
|---|---:|---:|---:|
$(cat "$BW_ROWS")

## Fidelity against depth

$(cat "$FID_MD")
EOF
  [[ -n $webgpu_section ]] && printf '\n%s\n' "$webgpu_section"
  if [[ -s $WORK/missing.txt ]]; then
    printf '## Missing\n\nNot available on this commit:\n\n'
    cat "$WORK/missing.txt"
    echo
  fi
} >"$tmp"
mv "$tmp" "$OUT"
say "wrote $OUT"
