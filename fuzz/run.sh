#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets (build-fuzz: clang 14, libFuzzer,
# ASan + UBSan), writes their seed corpora, then runs each target in turn for
# FUZZ_SECONDS, niced, one process at a time. Prints one line per target with
# its executions and result, appends it to $build/fuzz-results.txt, and exits
# nonzero if any target found something; the input that triggers it is left
# in $build/fuzz-artifacts/ (reproduce: $build/<target> <file>).
#
#   FUZZ_SECONDS=60        run time per target
#   FUZZ_TARGETS="npy_fuzz config_fuzz"   a subset (default: every fuzz/*_fuzz.cpp)
#   FUZZ_BUILD=build-fuzz  the build folder
#   JOBS=2                 compile jobs
# The corpus each run grows is kept in $build/fuzz-corpus/<target> and
# reused by the next run.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="$(realpath -m "${FUZZ_BUILD:-build-fuzz}")"
seconds="${FUZZ_SECONDS:-60}"
jobs="${JOBS:-2}"

say() { echo "[fuzz] $*" >&2; }

bash scripts/setup_fuzz.sh
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++-14 -DDELTAGEN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target fuzzers -j "$jobs"

# Seeds are regenerated every run (cheap, and they follow the writers).
seeds="$build/fuzz-seeds"
rm -rf "$seeds"
"$build/fuzz_make_seeds" "$seeds" third_party/tokenizer/qwen3
mkdir -p "$seeds/tokenizer_encode"
cp tests/data/tokenizer/*.txt "$seeds/tokenizer_encode/" 2>/dev/null || true

# target -> seed folder, dictionary, extra flags
seed_dir() { echo "$seeds/${1%_fuzz}"; }
dict_of() {
  case "$1" in
    safetensors_fuzz | config_fuzz | genai_config_fuzz | tokenizer_load_fuzz | json_grammar_fuzz) echo fuzz/dict/json.dict ;;
    npy_fuzz) echo fuzz/dict/npy.dict ;;
    snapshot_fuzz) echo fuzz/dict/snapshot.dict ;;
    onnx_summary_fuzz | model_rewrite_fuzz) echo fuzz/dict/onnx.dict ;;
    tokenizer_encode_fuzz) echo fuzz/dict/tokenizer_text.dict ;;
    chat_output_parser_fuzz) echo fuzz/dict/chat_output.dict ;;
    serve_request_fuzz) echo fuzz/dict/serve_request.dict ;;
    jinja_fuzz) echo fuzz/dict/jinja.dict ;;
  esac
}

targets="${FUZZ_TARGETS:-$(cd fuzz && ls *_fuzz.cpp | sed 's/\.cpp$//')}"
# tokenizer_encode_fuzz encodes with a real tokenizer (the fuzzers run in their log folders: absolute path).
if [ -z "${DELTAGEN_FUZZ_TOKENIZER:-}" ] && [ -f third_party/tokenizer/qwen3/tokenizer.json ]; then
  export DELTAGEN_FUZZ_TOKENIZER="$root/third_party/tokenizer/qwen3"
fi
if [ -z "${DELTAGEN_FUZZ_TOKENIZER:-}" ]; then
  say "tokenizer_encode_fuzz skipped: no tokenizer (run scripts/fetch_tokenizer_assets.sh or set DELTAGEN_FUZZ_TOKENIZER)"
  targets="$(echo "$targets" | tr ' ' '\n' | grep -v '^tokenizer_encode_fuzz$' || true)"
fi

failed=0
for t in $targets; do
  corpus="$build/fuzz-corpus/$t"
  logs="$build/fuzz-logs/$t"
  artifacts="$build/fuzz-artifacts"
  mkdir -p "$corpus" "$logs" "$artifacts"
  rm -f "$logs"/fuzz-*.log
  flags=(-max_total_time="$seconds" -workers=1 -jobs=1
         -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024
         -artifact_prefix="$artifacts/$t-" -print_final_stats=1)
  seed="$(seed_dir "$t")"
  dict="$(dict_of "$t")"
  [ -n "$dict" ] && flags+=(-dict="$root/$dict")
  [ -d "$seed" ] || seed=""
  say "$t: ${seconds}s"
  # -jobs=1 runs the fuzzer in a child process that logs to ./fuzz-0.log.
  (cd "$logs" && nice -n 19 "$build/$t" "${flags[@]}" "$corpus" $seed >/dev/null 2>&1) || true
  log="$logs/fuzz-0.log"
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)"
  if [ ! -s "$log" ] || [ -z "$runs" ]; then
    result="DID NOT RUN (see $log)"
    failed=1
  elif grep -qaE '^==[0-9]+==ERROR|deadly signal|runtime error:|deltagen fuzz finding|ERROR: libFuzzer' "$log"; then
    result="FINDING (see $log and $artifacts/$t-*)"
    failed=1
  else
    result="ok"
  fi
  line="$(date -u +%FT%TZ) $t seconds=$seconds executions=${runs:-?} corpus=$(ls "$corpus" | wc -l) $result"
  echo "$line" | tee -a "$build/fuzz-results.txt"
done
exit $failed
