// The Qwen3.5 text graph builder, shared by the qwen35_*.cpp files (private
// to src/models). Layout, per onnxruntime-genai's Qwen35TextModel
// (text-only mode), with the math of HF modeling_qwen3_5.py:
//   input_ids -> Gather(embed_tokens)
//   per layer: RMSNorm (SimplifiedLayerNormalization for layer 0, then
//     com.microsoft.SkipSimplifiedLayerNormalization which also adds the
//     residual) -> mixer -> Skip RMSNorm -> SwiGLU MLP (MoE models: router,
//     com.microsoft MoE/QMoE experts and the gated shared expert, qwen35_moe.cpp)
//   mixer = gated full attention (GroupQueryAttention) or Gated DeltaNet
//     (CausalConvWithState + LinearAttention)
//   final Skip RMSNorm -> lm_head -> logits
// Offset RMSNorms (x * rsqrt(mean x^2 + eps) * (1 + w)) get 1 + w folded into
// their weight at build time; the gated norm inside linear attention uses w.
//
// Dtypes: every tensor's dtype is tracked, each op runs in the dtype
// cpu_compute_dtype() gives it for the activation dtype, and a Cast is
// inserted only where a value crosses into a different dtype (see cast()).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "graph/graph_builder.h"
#include "models/build_options.h"
#include "models/precision_plan.h"
#include "models/quant_recipe.h"
#include "models/weights.h"

namespace deltagen::qwen35 {

using graph::DataType;

// The symbolic dimensions of the graphs' I/O.
inline const graph::Dim kBatch = std::string("batch_size");
inline const graph::Dim kSeq = std::string("sequence_length");
inline const graph::Dim kPast = std::string("past_sequence_length");
inline const graph::Dim kTotal = std::string("total_sequence_length");
inline const graph::Dim kLogitsLength = std::string("logits_length");  // logits_to_keep, or sequence_length

// "/model/layers.3/attn/q_proj/MatMul" -> "model.layers.3.attn.q_proj.MatMul.weight":
// initializers are named after the node that uses them, as upstream does.
std::string weight_name_for(const std::string& node);

// One projection of a (possibly fused) group: where it lives and its checkpoint weight.
struct Projection {
  std::string path;    // "/model/layers.0/linear_attn/in_proj_qkv"
  std::string tensor;  // "layers.0.linear_attn.in_proj_qkv.weight"
};

// The first `rows` output rows of a weight, its initializers renamed with `suffix`.
struct KeptRows {
  int64_t rows = 0;  // 0: all of them
  std::string suffix;
};

class Graph {
 public:
  Graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length, graph::GraphBuilder& b,
        const QuantRecipe& recipe);
  void build();
  // embedding.onnx (VL builds): input_ids + image_features -> inputs_embeds.
  void build_embedding();
  // mtp.onnx: the multi-token-prediction head (qwen35.h has its I/O).
  void build_mtp();

 private:
  // ---- typed graph primitives (qwen35_ops.cpp) -----------------------------------
  DataType dtype_of(const std::string& value) const;
  std::vector<std::string> node(const std::string& op_type, const std::string& name,
                                const std::vector<std::string>& inputs, const std::vector<onnx::AttributeProto>& attrs,
                                const std::string& domain, const std::vector<DataType>& output_dtypes,
                                const std::vector<std::string>& outputs = {});
  std::string op(const std::string& op_type, const std::string& name, const std::vector<std::string>& inputs,
                 DataType output_dtype, const std::vector<onnx::AttributeProto>& attrs = {},
                 const std::string& domain = "");
  // `op_type` in the dtype the CPU EP runs it in, every float input cast to it.
  std::string compute(const std::string& op_type, const std::string& name, const std::vector<std::string>& inputs,
                      const std::vector<onnx::AttributeProto>& attrs = {}, const std::string& domain = "");
  // x as `to`: x itself, or the output of a Cast node named `name` (one per
  // value and dtype: a second request reuses the first Cast).
  std::string cast(const std::string& x, DataType to, const std::string& name);
  std::string weight(graph::Initializer init);  // its name (a copy: the builder's vector grows)
  void graph_input(const std::string& name, DataType dtype, const std::vector<graph::Dim>& shape);
  std::string reshape(const std::string& name, const std::string& x, const std::vector<int64_t>& shape);
  DataType run_dtype(const std::string& op_type) const;

  // ---- building blocks (qwen35_blocks.cpp) ---------------------------------------
  // One output per projection; fused into one MatMul + Split when enabled.
  std::vector<std::string> projections(const std::string& fused_path, const std::string& x,
                                       const std::vector<Projection>& parts, const WeightFormat& format);
  // x times the (stacked) linear weights; `output` names the result ("" = default).
  std::string matmul(const std::string& path, const std::string& x, const std::vector<std::string>& tensors,
                     const WeightFormat& format, const std::string& output = "");
  // matmul() in `format` as given (no per-tensor override of the recipe's).
  std::string matmul_in_format(const std::string& path, const std::string& x, const std::vector<std::string>& tensors,
                               const WeightFormat& format, const std::string& output = "", const KeptRows& kept = {});
  std::string matmul_nbits(const std::string& path, const std::string& x, const QuantizedWeight& w,
                           int bits, int64_t block_size, const std::string& output = "");
  // RMSNorm over the last axis; `output` names the result ("" = default).
  // The weight is ckpt_weight mapped by `map`, named after `weight_node`.
  std::string rms_norm(const std::string& name, const std::string& x, const std::string& ckpt_weight,
                       const std::string& weight_node, ValueMap map, const std::string& output = "");
  // (normalized(x + skip), x + skip); with_sum = false leaves the sum out.
  std::pair<std::string, std::string> skip_norm(const std::string& name, const std::string& x,
                                                const std::string& skip, const std::string& ckpt_weight,
                                                bool with_sum = true, const std::string& output = "");
  DataType norm_dtype(const std::string& op_type) const;  // fp32 with --norm-upcast
  std::string norm_input(const std::string& norm, int index, const std::string& x, DataType dtype);
  std::string norm_output(const std::string& norm, int index, const std::string& y, const std::string& output);
  graph::Initializer norm_weight(const std::string& ckpt_weight, const std::string& node, ValueMap map,
                                 DataType dtype);
  std::string silu(const std::string& path, const std::string& x);

  // Layer i's node path and checkpoint prefix: "/model/layers.3", "layers.3.";
  // i = num_hidden_layers is the head's layer ("/mtp/layers.0",
  // "mtp.layers.0."), whose KV cache is its model's cache 0.
  std::string layer_path(int64_t i) const;
  std::string ckpt_layer(int64_t i) const;
  int64_t cache_index(int64_t i) const { return i < cfg_.num_hidden_layers ? i : i - cfg_.num_hidden_layers; }

  // ---- model I/O, embeddings, head (qwen35.cpp) -------------------------------------
  void declare_io();
  std::vector<graph::Dim> conv_state_shape() const;
  void attention_mask_to_gqa_inputs();
  void rotary_caches(DataType dtype);
  bool mrope() const { return opts_.vision; }  // 3-D position_ids, per-call cos/sin
  // logits_to_keep (io::kLogitsToKeep): the decoder with a full-length lm_head.
  bool keeps_logits() const { return !opts_.prune_lm_head && !opts_.exclude_lm_head; }
  // ... sliced before the final norm, unless the MTP head reads the norm's
  // output at every position.
  bool slice_before_final_norm() const;
  std::string keep_last_positions(const std::string& x, const std::string& what);
  std::string keep_start_;  // -logits_to_keep, made on first use
  void mrope_caches(DataType dtype);
  std::string embed_tokens();
  std::pair<std::string, std::string> final_norm(const std::string& x, const std::string& residual);
  void layer_outputs(const std::vector<std::string>& streams);  // --layer-outputs
  // vocab > 0: only the first `vocab` rows of the head (the MTP head's draft
  // vocabulary, BuildOptions::mtp_draft_vocab); 0: all of them.
  void lm_head(const std::string& x, int64_t vocab = 0);
  void draft_lm_head(const std::string& x, int64_t vocab);
  bool tied() const;
  bool quantized_embedding() const;
  bool shares_tied_table() const;

  // ---- gated full attention (qwen35_attention.cpp) ----------------------------------
  bool rotary_inside_attention() const;
  std::string head_norm(const std::string& path, const std::string& x4, const std::string& ckpt_weight,
                        int64_t heads);
  std::string rotary(const std::string& path, const std::string& x, int64_t heads);
  std::string full_attention(int64_t i, const std::string& x);
  std::string mlp(int64_t i, const std::string& x);

  // ---- mixture of experts (qwen35_moe.cpp) ------------------------------------------
  std::string moe(int64_t i, const std::string& x);
  std::string routed_experts(int64_t i, const std::string& path, const std::string& x, const std::string& logits2);

  // ---- Gated DeltaNet (qwen35_linear_attention.cpp) ---------------------------------
  std::string linear_attention(int64_t i, const std::string& x);
  std::string causal_conv(int64_t i, const std::string& p, const std::string& mixed);
  std::string l2_norm_heads(const std::string& path, const std::string& x);
  std::string l2_norm_decomposed(const std::string& path, const std::string& x4);
  std::pair<std::string, std::string> decay_and_beta(int64_t i, const std::string& p, const std::string& a,
                                                     const std::string& b);
  std::string gated_norm(int64_t i, const std::string& p, const std::string& o, const std::string& z);
  // A state input as fp32 for the float-only kernels, and the graph output a
  // kernel's fp32 present state goes to (through a Cast when the state dtype differs).
  std::string state_in(const std::string& p, const std::string& input);
  std::string state_out_name(const std::string& node, const std::string& output);
  void state_out(const std::string& node, const std::string& fp32_value, const std::string& output);

  const Checkpoint& ckpt_;
  const ModelConfig& cfg_;
  const BuildOptions& opts_;
  const PrecisionPlan plan_;
  const QuantRecipe& recipe_;
  const int64_t context_length_;
  graph::GraphBuilder& b_;

  std::map<std::string, DataType> dtypes_;
  std::map<std::pair<std::string, int>, std::string> casts_;  // (value, dtype) -> Cast output
  std::string seqlens_k_, total_seq_len_, cos_cache_, sin_cache_;
  std::string rope_positions_ = "position_ids";  // the rows of cos_cache_ each token uses (mrope_caches)
  std::string embed_table_;                   // float embedding table (tied lm_head reuses it)
  std::optional<QuantizedWeight> shared_head_;  // quantized lm_head that the embedding gathers from
};

}  // namespace deltagen::qwen35
