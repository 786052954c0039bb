// The Qwen3.5 text graph (Gated DeltaNet + gated full attention), laid out
// like onnxruntime-genai's Qwen35TextModel in text-only mode.
#pragma once
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint.h"
#include "graph/graph_builder.h"
#include "models/build_options.h"
#include "models/quant_recipe.h"

namespace deltagen {

// Graph I/O names (N = absolute layer index). KV only for full-attention
// layers; conv/recurrent state only for linear-attention layers.
namespace io {
inline const std::string kInputIds = "input_ids";
inline const std::string kInputsEmbeds = "inputs_embeds";  // instead of input_ids with --exclude-embeds
inline const std::string kAttentionMask = "attention_mask";
inline const std::string kPositionIds = "position_ids";
inline const std::string kLogits = "logits";
// How many of the run's last positions get logits: [1] int64, 0 = all (its
// default, so runtimes that do not feed it get every position). Prefill feeds
// 1: the lm_head over a 1000-token prompt was ~23 % of its time. Not in
// --prune-lm-head builds, whose logits are always the last position's.
inline const std::string kLogitsToKeep = "logits_to_keep";
inline const std::string kHiddenStates = "hidden_states";  // instead of logits with --exclude-lm-head;
                                                           // beside them when the build has a head (mtp.onnx)
// mtp.onnx: input_ids (the tokens one ahead), hidden_states (the decoder's,
// or the head's own when chaining drafts), attention_mask, position_ids, its
// one layer's past_key_values.0.*; out: logits, hidden_states_out (after
// mtp.norm), present.0.*.
inline const std::string kMtpHiddenOut = "hidden_states_out";
// --layer-outputs: the residual stream entering layer k (k = 0: the embeddings;
// k = N: after the last layer, before the final norm), numbered as HF's
// output_hidden_states (whose last entry is after the final norm instead).
inline std::string layer_hidden_states(int64_t k) { return "hidden_states." + std::to_string(k); }
inline std::string past_key(int64_t n) { return "past_key_values." + std::to_string(n) + ".key"; }
inline std::string past_value(int64_t n) { return "past_key_values." + std::to_string(n) + ".value"; }
inline std::string past_conv_state(int64_t n) { return "past_key_values." + std::to_string(n) + ".conv_state"; }
inline std::string past_recurrent_state(int64_t n) {
  return "past_key_values." + std::to_string(n) + ".recurrent_state";
}
inline std::string present_key(int64_t n) { return "present." + std::to_string(n) + ".key"; }
inline std::string present_value(int64_t n) { return "present." + std::to_string(n) + ".value"; }
inline std::string present_conv_state(int64_t n) { return "present." + std::to_string(n) + ".conv_state"; }
inline std::string present_recurrent_state(int64_t n) { return "present." + std::to_string(n) + ".recurrent_state"; }
}  // namespace io

// Adds the whole model to `b`: graph I/O, nodes and (lazy) weights read from
// `ckpt`, which must outlive the write. context_length (resolved, > 0) = rotary
// cache rows; opts supplies the remaining switches.
// `recipe`: how quantized weights are fitted (default: round to nearest, the plan's formats).
void build_qwen35_graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length,
                        graph::GraphBuilder& b, const QuantRecipe& recipe = {});

// The multi-token-prediction head as its own model (mtp.onnx): the embedding
// and lm_head in the decoder build's form, the head's fc and norms, and its
// gated full-attention layer with its own KV cache (I/O above). Dense
// checkpoints with a head (Checkpoint::has_mtp).
void build_qwen35_mtp_graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length,
                            graph::GraphBuilder& b, const QuantRecipe& recipe = {});

// Whether a build of `ckpt` with `opts` carries the head (mtp.onnx).
bool builds_mtp_head(const Checkpoint& ckpt, const BuildOptions& opts);

}  // namespace deltagen
