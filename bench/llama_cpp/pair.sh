#!/bin/bash
# deltagen and llama.cpp on the same checkpoint, alternated in one run:
# pp1000 + tg100, 3 runs each per round, on the same threads.
#
#   bench/llama_cpp/pair.sh DELTAGEN MODEL_DIR MODEL.gguf [ROUNDS] [THREADS]
#
# DELTAGEN: the deltagen binary; MODEL_DIR: its int4 build of the checkpoint;
# MODEL.gguf: write_gguf.mjs's Q4_0 file of the same checkpoint.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 DELTAGEN MODEL_DIR MODEL.gguf [ROUNDS] [THREADS]" >&2
  exit 2
fi
deltagen=$1 model=$2 gguf=$3 rounds=${4:-2} threads=${5:-2}
here=$(cd "$(dirname "$0")" && pwd)
for round in $(seq 1 "$rounds"); do
  echo "== round $round: deltagen"
  "$deltagen" bench --model "$model" --prompt 1000 --gen 100 --runs 3 --threads "$threads" | tail -1
  echo "== round $round: llama.cpp"
  node "$here/bench.mjs" "$gguf" --pp 1000 --tg 100 --runs 3 --threads "$threads" | grep -E "^\| (pp|tg)"
done
