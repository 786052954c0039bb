#!/usr/bin/env bash
# The main job end to end: take a Qwen3.5 checkpoint, build it to ONNX
# (int4 fitted by GPTQ on calibration text, with a fidelity card), generate
# from a prompt with ONNX Runtime, chat through the checkpoint's template, and
# answer one request with deltagen serve.
#   scripts/demo.sh BUILD/deltagen DEMO_DIR
# The checkpoint: ../shared/models/qwen35-tiny-en, a small Qwen3.5-architecture
# model trained on English quotations (it writes fortune-file-like English),
# with the Qwen3 tokenizer setup.sh fetched; where that folder is missing, a
# synthetic 0.8B-shaped checkpoint with random weights (its text is noise).
# Environment: DEMO_CHECKPOINT (a checkpoint folder), DEMO_PRESET (0.8b) and
# DEMO_LAYERS (4) for the synthetic one, DEMO_PRECISION (int4), DEMO_TOKENS (48).
set -euo pipefail
cli="$1"
dir="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
trained="${DEMO_CHECKPOINT:-$here/../shared/models/qwen35-tiny-en}"
preset="${DEMO_PRESET:-0.8b}"
layers="${DEMO_LAYERS:-4}"
precision="${DEMO_PRECISION:-int4}"
tokens="${DEMO_TOKENS:-48}"
tokenizer="$here/third_party/tokenizer/qwen3"
mkdir -p "$dir"

build_flags=(--precision "$precision" --context-length 4096)
if [ -f "$trained/model.safetensors" ]; then
  # The trained model's folder has no tokenizer: link it, the Qwen3 tokenizer and the text.
  ckpt="$dir/checkpoint-$(basename "$trained")"
  mkdir -p "$ckpt"
  for f in "$trained"/*.json "$trained"/*.safetensors; do ln -sf "$(realpath "$f")" "$ckpt/"; done
  for f in tokenizer.json tokenizer_config.json; do ln -sf "$(realpath "$tokenizer/$f")" "$ckpt/$f"; done
  model="$dir/model-$(basename "$trained")-$precision"
  prompt="The secret of life is"
  if [ -f "$trained/sample.txt" ] && [ "$precision" = int4 ]; then
    head -c 100000 "$trained/sample.txt" >"$dir/calibration.txt"
    tail -c 20000 "$trained/sample.txt" >"$dir/card.txt"
    build_flags+=(--quant-method gptq --calibration "$dir/calibration.txt" --card "$dir/card.txt" --card-tokens 1024)
  fi
  echo "== the trained model $(basename "$trained") (English quotations; small: expect fortune-file-like text)"
else
  ckpt="$dir/checkpoint-$preset-l$layers-qwen3tok"
  model="$dir/model-$preset-l$layers-$precision"
  prompt="Hello, my dog is cute. 你好! <think>x</think>"
  if [ ! -f "$ckpt/config.json" ]; then
    echo "== synthesizing a $preset-shaped checkpoint with $layers layers (random weights: the text is noise)"
    "$cli" synth --preset "$preset" --layers "$layers" --seed 1 --tokenizer "$tokenizer" --out "$ckpt"
  fi
fi
echo "== building $precision ONNX model -> $model (${build_flags[*]})"
"$cli" build --checkpoint "$ckpt" --out "$model" "${build_flags[@]}"
"$cli" inspect "$model" | tail -n 14
echo "== generating $tokens tokens from a text prompt (sampled, seed 7)"
"$cli" tokenize --tokenizer "$model" --text "$prompt"
"$cli" generate --model "$model" --prompt "$prompt" --max-new-tokens "$tokens" --ignore-eos \
  --temperature 0.8 --top-p 0.95 --seed 7

echo "== the same model as a chat: the checkpoint's own template (Qwen3's, from its tokenizer_config.json)"
"$cli" generate --model "$model" --chat --no-think --prompt "Hello!" --print-prompt
"$cli" generate --model "$model" --chat --no-think --prompt "Hello!" --max-new-tokens 16

echo "== and behind the OpenAI-compatible server (deltagen serve): one streamed chat request"
"$cli" serve --model "$model" --port 0 --parallel 2 >"$dir/serve.out" 2>"$dir/serve.log" &
server=$!
trap 'kill -TERM "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$dir/serve.out" 2>/dev/null && break; sleep 0.2; done
url="$(sed -n 's/^listening on //p' "$dir/serve.out")"
[ -n "$url" ] || { echo "the server did not start:" >&2; cat "$dir/serve.log" >&2; exit 1; }
curl -sS -N "$url/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8, "stream": true,
  "chat_template_kwargs": {"enable_thinking": false}}'
kill -TERM "$server"
wait "$server"
trap - EXIT
echo "== the server stopped cleanly; its chat page is at / (open $url/ while it runs)"
