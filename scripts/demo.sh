#!/usr/bin/env bash
# The main job end to end: synthesize a Qwen3.5-shaped checkpoint (cached),
# build it to ONNX, generate from a prompt with ONNX Runtime, chat through
# the checkpoint's template, and answer one request with deltagen serve.
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
