// What a benchmark needs to know about the graph it ran: node counts and the
// bytes of weights one decode step reads.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "deltagen/options.h"

namespace onnx {
class ModelProto;
}

namespace deltagen::measure {

// Weights and their bytes, scales and zero points counted in the bytes.
struct WeightCount {
  double weights = 0;
  double bytes = 0;
  double bits_per_weight() const { return weights > 0 ? 8 * bytes / weights : 0; }
};

struct GraphFacts {
  std::filesystem::path model_file;
  int64_t node_count = 0;
  std::map<std::string, int64_t> op_counts;  // "MatMul", "com.microsoft.LinearAttention"
  int64_t weight_bytes = 0;                  // every initializer
  // Initializers a decode step reads only a few rows of: the data input of a
  // Gather (the embedding table) and the cos/sin caches of RotaryEmbedding or
  // GroupQueryAttention, when nothing else uses them. A tied embedding that the lm_head also
  // multiplies is read in full, so it is not counted here.
  int64_t row_indexed_bytes = 0;
  // Routed experts (the weights and scales of MoE / QMoE nodes): a token reads
  // only the k experts its router picks, k / E of them; `active_expert_bytes`
  // is that share (one token, batch 1).
  int64_t expert_bytes = 0;
  int64_t active_expert_bytes = 0;
  // What one decode step streams from memory for weights: weight_bytes -
  // row_indexed_bytes, with only the active experts. (KV cache and
  // recurrent-state traffic come on top.)
  int64_t decode_read_bytes() const { return weight_bytes - row_indexed_bytes - expert_bytes + active_expert_bytes; }
  // The model's weights (every initializer but the rotary position tables,
  // which are computed, not learned): a block-quantized tensor's codes count
  // as weights (bytes * 8 / bits of them), its scales and zero points only
  // as bytes. `stored`: the file. `read_per_token`: what one decoded token
  // reads: every projection and the lm_head whole, one row of the embedding
  // table (its scales too), k / E of the routed experts.
  WeightCount stored;
  WeightCount read_per_token;
};

// `dir` is a built model folder (genai_config.json names the .onnx file) or
// an .onnx file. Reads only the graph, never the external weight data.
GraphFacts graph_facts(const std::filesystem::path& dir_or_file);
GraphFacts graph_facts(const onnx::ModelProto& model, const std::filesystem::path& file);

nlohmann::json to_json(const GraphFacts& f);
// {"file": {weights, bytes, bits_per_weight}, "read_per_token": {...}}: what
// cards and quantization.json report.
nlohmann::json weight_counts_json(const GraphFacts& f);

// How reports name a model: its folder's own name ("dir/" counts as "dir").
std::string model_label(const std::filesystem::path& dir);
// "" for the default kernels, else " (ort kernels)" / " (deltagen-ops kernels)".
std::string kernel_set_label(KernelSet kernels);

}  // namespace deltagen::measure
