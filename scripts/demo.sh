#!/usr/bin/env bash
# The main job end to end: synthesize a Qwen3.5-shaped checkpoint (cached),
# build it to ONNX, generate from a prompt with ONNX Runtime.
#   scripts/demo.sh BUILD/deltagen DEMO_DIR
# Environment: DEMO_PRESET (default 0.8b), DEMO_LAYERS (default 4),
# DEMO_PRECISION (fp32), DEMO_TOKENS (32).
set -euo pipefail
cli="$1"
dir="$2"
preset="${DEMO_PRESET:-0.8b}"
layers="${DEMO_LAYERS:-4}"
precision="${DEMO_PRECISION:-fp32}"
tokens="${DEMO_TOKENS:-32}"
ckpt="$dir/checkpoint-$preset-l$layers-qwen3tok"
# The real Qwen3 tokenizer (fetched by setup.sh) goes into the synthetic checkpoint,
# so the demo takes text in and gives text out (random weights: the text is noise).
tokenizer="$(dirname "$0")/../third_party/tokenizer/qwen3"
model="$dir/model-$preset-l$layers-$precision"

mkdir -p "$dir"
if [ ! -f "$ckpt/config.json" ]; then
  echo "== synthesizing a $preset-shaped checkpoint with $layers layers (random weights, cached in $ckpt)"
  "$cli" synth --preset "$preset" --layers "$layers" --seed 1 --tokenizer "$tokenizer" --out "$ckpt"
fi
echo "== building $precision ONNX model -> $model"
"$cli" build --checkpoint "$ckpt" --out "$model" --precision "$precision" --context-length 4096
"$cli" inspect "$model" | head -n 12
echo "== generating $tokens tokens (greedy) from a text prompt"
"$cli" tokenize --tokenizer "$model" --text "Hello, my dog is cute. 你好! <think>x</think>"
"$cli" generate --model "$model" --prompt "Hello, my dog is cute. 你好! <think>x</think>" \
  --max-new-tokens "$tokens" --ignore-eos
