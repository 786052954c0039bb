// The multi-token-prediction head as its own model, mtp.onnx
// (docs/speculative.md; the math is ReferenceModel::mtp_forward):
//
//   input_ids (token p+1) -> embed_tokens -> RMSNorm(pre_fc_norm_embedding) --+
//   hidden_states (h_p, after the decoder's final norm) -> RMSNorm(pre_fc_norm_hidden) --+-> Concat -> fc
//   -> gated full-attention layer "/mtp/layers.0" (its own KV cache: past_key_values.0.*)
//   -> RMSNorm(mtp.norm) = hidden_states_out -> lm_head (last slot only) -> logits (token p+2)
//
// Only the last slot's logits are computed ([B, 1, V]): a draft reads no
// other row, and the lm_head over every slot of a prompt would cost a third of
// the 0.8B model's prefill again. hidden_states_out keeps every slot.
//
// The embedding table and lm_head are the decoder build's own forms (float,
// or block-quantized with the lm_head's format), stored again in this file.
#include <algorithm>

#include "deltagen/error.h"
#include "models/qwen35.h"
#include "models/qwen35_graph.h"

namespace deltagen {

namespace qwen35 {

using graph::attr;
using graph::Dim;

void Graph::build_mtp() {
  const int64_t H = cfg_.hidden_size, layer = cfg_.num_hidden_layers;  // the head's layer comes after the model's

  graph_input(io::kInputIds, graph::kInt64, {kBatch, kSeq});
  graph_input(io::kHiddenStates, plan_.activations, {kBatch, kSeq, H});
  graph_input(io::kAttentionMask, graph::kInt64, {kBatch, kTotal});
  graph_input(io::kPositionIds, graph::kInt64, {kBatch, kSeq});
  const DataType kv = run_dtype("GroupQueryAttention");
  const std::vector<Dim> past_shape = {kBatch, cfg_.num_key_value_heads, kPast, cfg_.head_dim};
  graph_input(io::past_key(0), kv, past_shape);
  graph_input(io::past_value(0), kv, past_shape);
  attention_mask_to_gqa_inputs();
  rotary_caches(rotary_inside_attention() ? run_dtype("GroupQueryAttention") : run_dtype("RotaryEmbedding"));

  // x = fc([norm(embedding) | norm(hidden)]): the embedding first.
  const std::string embedded = embed_tokens();
  const std::string e = rms_norm("/mtp/pre_fc_norm_embedding/LayerNorm", embedded, "mtp.pre_fc_norm_embedding.weight",
                                 "/mtp/pre_fc_norm_embedding/LayerNorm", ValueMap::PlusOne);
  const std::string h = rms_norm("/mtp/pre_fc_norm_hidden/LayerNorm", io::kHiddenStates, "mtp.pre_fc_norm_hidden.weight",
                                 "/mtp/pre_fc_norm_hidden/LayerNorm", ValueMap::PlusOne);
  const DataType dt = dtype_of(h);
  const std::string both =
      op("Concat", "/mtp/fc/Concat", {cast(e, dt, "/mtp/fc/Concat/input_0/Cast"), h}, dt, {attr("axis", int64_t(-1))});
  const std::string x = matmul("/mtp/fc", both, {"mtp.fc.weight"}, plan_.layers);

  // The head's decoder layer, pre-norm residual as the model's.
  const std::string norm_in = layer_path(layer) + "/input_layernorm/LayerNorm";
  const std::string normed = rms_norm(norm_in, x, ckpt_layer(layer) + "input_layernorm.weight", norm_in, ValueMap::PlusOne);
  const std::string mixed = full_attention(layer, normed);
  auto [post_normed, sum] = skip_norm(layer_path(layer) + "/post_attention_layernorm/SkipLayerNorm", mixed, x,
                                      ckpt_layer(layer) + "post_attention_layernorm.weight");
  const std::string mlp_out = cfg_.is_moe() ? moe(layer, post_normed) : mlp(layer, post_normed);
  auto [hidden_out, unused] = skip_norm("/mtp/norm/SkipLayerNorm", mlp_out, sum, "mtp.norm.weight", false,
                                        io::kMtpHiddenOut);
  (void)unused;
  // A draft vocabulary: the head's guesses come from the first ids only
  // (the frequent ones in a BPE vocabulary), which reads a fraction of the
  // 248k-row lm_head per guess; verification keeps the output exact.
  const int64_t vocab = opts_.mtp_draft_vocab > 0 ? std::min(opts_.mtp_draft_vocab, cfg_.vocab_size) : cfg_.vocab_size;
  lm_head(hidden_out, vocab);

  b_.output(io::kLogits, dtype_of(io::kLogits), {kBatch, Dim(int64_t(1)), vocab});
  b_.output(io::kMtpHiddenOut, dtype_of(io::kMtpHiddenOut), {kBatch, kSeq, H});
  const std::vector<Dim> present = {kBatch, cfg_.num_key_value_heads, kTotal, cfg_.head_dim};
  b_.output(io::present_key(0), dtype_of(io::present_key(0)), present);
  b_.output(io::present_value(0), dtype_of(io::present_value(0)), present);
}

}  // namespace qwen35

bool builds_mtp_head(const Checkpoint& ckpt, const BuildOptions& opts) {
  return opts.mtp && ckpt.has_mtp() && ckpt.config().mtp_num_hidden_layers == 1;
}

void build_qwen35_mtp_graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length,
                            graph::GraphBuilder& b, const QuantRecipe& recipe) {
  if (!builds_mtp_head(ckpt, opts)) fail(ckpt.dir().string(), "has no multi-token-prediction head to build");
  BuildOptions head = opts;  // the head reads token ids and writes logits whatever the decoder does
  head.exclude_embeds = false;
  head.exclude_lm_head = false;
  head.vision = false;
  head.layer_outputs = false;
  head.prune_lm_head = true;  // drafting reads the last slot's logits only
  qwen35::Graph(ckpt, head, context_length, b, recipe).build_mtp();
}

}  // namespace deltagen
