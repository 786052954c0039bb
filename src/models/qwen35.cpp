// Qwen3.5 text model -> ONNX graph: the layer loop, graph I/O, embeddings
// and lm_head. The layout is described in qwen35_graph.h; the mixers live in
// qwen35_attention.cpp and qwen35_linear_attention.cpp.
#include "models/qwen35.h"

#include <cmath>
#include <limits>
#include <tuple>

#include "models/qwen35_graph.h"
#include "models/qwen35_vision.h"
#include "vision/mrope_positions.h"
#include "deltagen/error.h"

namespace deltagen {

namespace qwen35 {

using graph::attr;
using graph::Dim;
using graph::kMsDomain;

namespace {

// The plan with the recipe's lm_head format (--bits-budget), which the
// embedding table follows.
PrecisionPlan plan_with_recipe(const Checkpoint& ckpt, const BuildOptions& opts, const QuantRecipe& recipe) {
  PrecisionPlan plan = plan_precision(opts);
  plan.lm_head = recipe.format_for({ckpt.lm_head_name()}, plan.lm_head);
  return plan;
}

}  // namespace

Graph::Graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length, graph::GraphBuilder& b,
             const QuantRecipe& recipe)
    : ckpt_(ckpt), cfg_(ckpt.config()), opts_(opts), plan_(plan_with_recipe(ckpt, opts, recipe)),
      recipe_(recipe), context_length_(context_length), b_(b) {}

void Graph::build() {
  declare_io();
  attention_mask_to_gqa_inputs();
  if (cfg_.num_full_layers() > 0 && mrope())
    mrope_caches(run_dtype("RotaryEmbedding"));
  else if (cfg_.num_full_layers() > 0)
    rotary_caches(rotary_inside_attention() ? run_dtype("GroupQueryAttention") : run_dtype("RotaryEmbedding"));

  std::string x = embed_tokens();
  std::string residual = x;
  std::vector<std::string> streams = {x};  // the residual stream entering each layer, then after the last
  const std::string norm0 = layer_path(0) + "/input_layernorm/LayerNorm";
  std::string normed = rms_norm(norm0, x, ckpt_layer(0) + "input_layernorm.weight", norm0, ValueMap::PlusOne);
  for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    std::string mixed = cfg_.is_full(i) ? full_attention(i, normed) : linear_attention(i, normed);
    auto [post_normed, sum] = skip_norm(layer_path(i) + "/post_attention_layernorm/SkipLayerNorm", mixed, residual,
                                        ckpt_layer(i) + "post_attention_layernorm.weight");
    residual = sum;
    std::string mlp_out = cfg_.is_moe() ? moe(i, post_normed) : mlp(i, post_normed);
    if (i + 1 < cfg_.num_hidden_layers) {
      auto [next_normed, next_sum] = skip_norm(layer_path(i + 1) + "/input_layernorm/SkipLayerNorm", mlp_out,
                                               residual, ckpt_layer(i + 1) + "input_layernorm.weight");
      normed = next_normed;
      residual = next_sum;
    } else {
      std::string stream_end;  // --layer-outputs: the stream after the last layer, every position
      if (slice_before_final_norm()) {
        // The final norm then sits right in front of the lm_head, where the
        // load-time rewrite folds it into the MatMulNBits.
        if (opts_.layer_outputs)
          stream_end = op("Add", layer_path(i) + "/stream_end/Add", {mlp_out, residual}, dtype_of(residual));
        mlp_out = keep_last_positions(mlp_out, "mlp_out");
        residual = keep_last_positions(residual, "residual");
      }
      std::tie(normed, residual) = final_norm(mlp_out, residual);
      if (!stream_end.empty()) residual = stream_end;
    }
    streams.push_back(residual);
  }
  if (!opts_.exclude_lm_head) lm_head(normed);
  // With a head (mtp.onnx): the hidden it reads, every position of the run.
  const bool head_input = builds_mtp_head(ckpt_, opts_) && !opts_.exclude_lm_head;
  if (head_input) node("Identity", "/model/hidden_states/Identity", {normed}, {}, "", {dtype_of(normed)}, {io::kHiddenStates});

  // Outputs are declared last, when their dtypes are known: logits (or
  // hidden_states) first, then the present states in layer order.
  if (opts_.exclude_lm_head) {
    b_.output(io::kHiddenStates, dtype_of(io::kHiddenStates), {kBatch, kSeq, cfg_.hidden_size});
  } else {
    // With logits_to_keep: sequence_length positions, or the last n.
    const Dim positions = opts_.prune_lm_head ? Dim(int64_t(1)) : kLogitsLength;
    b_.output(io::kLogits, dtype_of(io::kLogits), {kBatch, positions, cfg_.vocab_size});
  }
  if (head_input) b_.output(io::kHiddenStates, dtype_of(io::kHiddenStates), {kBatch, kSeq, cfg_.hidden_size});
  for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    if (cfg_.is_full(i)) {
      const std::vector<Dim> present = {kBatch, cfg_.num_key_value_heads, kTotal, cfg_.head_dim};
      b_.output(io::present_key(i), dtype_of(io::present_key(i)), present);
      b_.output(io::present_value(i), dtype_of(io::present_value(i)), present);
    } else {
      b_.output(io::present_conv_state(i), plan_.state, conv_state_shape());
      b_.output(io::present_recurrent_state(i), plan_.state,
                {kBatch, cfg_.linear_num_value_heads, cfg_.linear_key_head_dim, cfg_.linear_value_head_dim});
    }
  }
  if (opts_.layer_outputs) layer_outputs(streams);
}

// embedding.onnx: the decoder build's embedding lookup (float or block-
// quantized table), then the image features scattered in: the k-th
// <|image_pad|> of the flattened ids takes feature row k. A text-only call
// passes [0, H] features.
void Graph::build_embedding() {
  const std::string p = "/model/embed_tokens/image_features";
  const int64_t H = cfg_.hidden_size;
  graph_input(io::kInputIds, graph::kInt64, {kBatch, kSeq});
  graph_input("image_features", graph::kFloat, {std::string("num_image_tokens"), H});
  std::string embeds = embed_tokens();  // [B, S, H]
  const DataType dt = dtype_of(embeds);

  std::string ids = reshape(p + "/ids/Reshape", io::kInputIds, {-1});  // [B*S]
  std::string is_pad = op("Equal", p + "/Equal", {ids, b_.constant_i64({cfg_.image_token_id})}, graph::kBool);
  std::string counts = op("CumSum", p + "/CumSum",
                          {op("Cast", p + "/Cast", {is_pad}, graph::kInt64, {attr("to", int64_t(graph::kInt64))}),
                           b_.constant_i64_scalar(0)},
                          graph::kInt64);
  // Row 0 of `padded` is zeros for the text tokens; pad k reads row k + 1,
  // out of range (an error, not a silent zero) when k >= the feature rows.
  std::string index = op("Where", p + "/index/Where", {is_pad, counts, b_.constant_i64_scalar(0)}, graph::kInt64);
  std::string zero = weight(computed_weight("model.embed_tokens.image_features.zero_row", {1, H},
                                            std::vector<float>(size_t(H), 0.0f), graph::kFloat));
  std::string padded = op("Concat", p + "/Concat", {zero, "image_features"}, graph::kFloat, {attr("axis", int64_t(0))});
  // ORT's CPU Where has no bfloat16 kernel: a bf16 build merges in fp32.
  const DataType merge_dt = dt == graph::kBFloat16 ? graph::kFloat : dt;
  std::string features = cast(op("Gather", p + "/Gather", {padded, index}, graph::kFloat, {attr("axis", int64_t(0))}),
                              merge_dt, p + "/Gather/Cast");  // [B*S, H]
  std::string flat = cast(reshape(p + "/embeds/Reshape", embeds, {-1, H}), merge_dt, p + "/embeds/Cast");
  std::string mask = op("Unsqueeze", p + "/mask/Unsqueeze", {is_pad, b_.constant_i64({1})}, graph::kBool);
  std::string merged = cast(op("Where", p + "/Where", {mask, features, flat}, merge_dt), dt, p + "/Where/Cast");
  std::string out_shape = op("Shape", p + "/out/Shape", {embeds}, graph::kInt64);
  node("Reshape", p + "/out/Reshape", {merged, out_shape}, {}, "", {dt}, {io::kInputsEmbeds});
  b_.output(io::kInputsEmbeds, dt, {kBatch, kSeq, H});
}

// Identity nodes give the sums graph-output names without renaming them, so
// every node that reads a sum (and every load-time fusion, which keeps a value
// a graph output reads) sees the same graph as without the option.
void Graph::layer_outputs(const std::vector<std::string>& streams) {
  for (size_t k = 0; k < streams.size(); ++k) {
    const std::string name = io::layer_hidden_states(int64_t(k));
    const DataType dt = dtype_of(streams[k]);
    node("Identity", "/model/" + name + "/Identity", {streams[k]}, {}, "", {dt}, {name});
    b_.output(name, dt, {kBatch, kSeq, cfg_.hidden_size});
  }
}

// ---- graph I/O ------------------------------------------------------------------

void Graph::declare_io() {
  if (opts_.exclude_embeds)
    graph_input(io::kInputsEmbeds, plan_.activations, {kBatch, kSeq, cfg_.hidden_size});
  else
    graph_input(io::kInputIds, graph::kInt64, {kBatch, kSeq});
  graph_input(io::kAttentionMask, graph::kInt64, {kBatch, kTotal});
  if (mrope()) graph_input(io::kPositionIds, graph::kInt64, {int64_t(3), kBatch, kSeq});
  else graph_input(io::kPositionIds, graph::kInt64, {kBatch, kSeq});
  if (keeps_logits()) b_.input_with_default(io::kLogitsToKeep, {0});
  const DataType kv = run_dtype("GroupQueryAttention");
  for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    if (cfg_.is_full(i)) {
      const std::vector<Dim> past = {kBatch, cfg_.num_key_value_heads, kPast, cfg_.head_dim};
      graph_input(io::past_key(i), kv, past);
      graph_input(io::past_value(i), kv, past);
    } else {
      graph_input(io::past_conv_state(i), plan_.state, conv_state_shape());
      graph_input(io::past_recurrent_state(i), plan_.state,
                  {kBatch, cfg_.linear_num_value_heads, cfg_.linear_key_head_dim, cfg_.linear_value_head_dim});
    }
  }
}

// [B, conv_dim, K-1]; channels_last keeps it as [B, K-1, conv_dim], the kernel's layout for it.
std::vector<Dim> Graph::conv_state_shape() const {
  const int64_t width = cfg_.linear_conv_kernel_dim - 1;
  if (opts_.conv_channels_last) return {kBatch, width, cfg_.conv_dim()};
  return {kBatch, cfg_.conv_dim(), width};
}

// GroupQueryAttention wants seqlens_k = (tokens so far) - 1 per batch row
// and the total length as int32; both come from attention_mask [B, total].
void Graph::attention_mask_to_gqa_inputs() {
  const std::string p = "/model/attn_mask_reformat/attn_mask_subgraph";
  std::string sum = b_.op("ReduceSum", p + "/ReduceSum", {io::kAttentionMask, b_.constant_i64({1})},
                          {attr("keepdims", 0)});  // [B]
  std::string minus_one = b_.op("Sub", p + "/Sub", {sum, b_.constant_i64_scalar(1)});
  seqlens_k_ = b_.op("Cast", p + "/Sub/Cast", {minus_one}, {attr("to", int64_t(graph::kInt32))});
  std::string shape = b_.op("Shape", p + "/Shape", {io::kAttentionMask});  // [2]
  std::string total = b_.op("Gather", p + "/Gather", {shape, b_.constant_i64_scalar(1)}, {attr("axis", 0)});
  total_seq_len_ = b_.op("Cast", p + "/Gather/Cast", {total}, {attr("to", int64_t(graph::kInt32))});
}

// cos/sin [context_length, rotary_dim / 2] for rotate-half RoPE:
// inv_freq[i] = theta^(-2i / rotary_dim). Text tokens have equal T/H/W
// positions, so Qwen3.5's interleaved mRoPE reduces to this plain RoPE.
void Graph::rotary_caches(DataType dtype) {
  const int64_t half = cfg_.rotary_dim() / 2;
  std::vector<float> cos_v(size_t(context_length_ * half)), sin_v(cos_v.size());
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(cfg_.rope_theta, -2.0 * double(i) / double(cfg_.rotary_dim()));
    for (int64_t pos = 0; pos < context_length_; ++pos) {
      const double angle = double(pos) * inv_freq;
      cos_v[size_t(pos * half + i)] = float(std::cos(angle));
      sin_v[size_t(pos * half + i)] = float(std::sin(angle));
    }
  }
  cos_cache_ = weight(computed_weight("model.rotary_emb.cos_cache", {context_length_, half}, std::move(cos_v), dtype));
  sin_cache_ = weight(computed_weight("model.rotary_emb.sin_cache", {context_length_, half}, std::move(sin_v), dtype));
}

// Interleaved M-RoPE (HF's Qwen3_5TextRotaryEmbedding with mrope_section
// [sT, sH, sW]): frequency j turns by the H position when j % 3 == 1 and
// j < 3 sH, by the W position when j % 3 == 2 and j < 3 sW, else by T. The
// angles of one call are position_ids^T [B, S, 3] times a [3, rotary_dim/2]
// matrix holding inv_freq[j] in the row of j's stream and 0 elsewhere (in
// fp32, as HF, and exact: the zero terms add nothing). Their cos/sin are this
// call's cache, [B*S, rotary_dim/2], and token (b, s) reads row b*S + s.
void Graph::mrope_caches(DataType dtype) {
  const std::string p = "/model/rotary_emb";
  const int64_t half = cfg_.rotary_dim() / 2;
  const auto& sec = cfg_.mrope_section;
  std::vector<float> select(size_t(3 * half), 0.0f);
  for (int64_t j = 0; j < half; ++j) {
    const int axis = mrope_stream(j, sec[1], sec[2]);
    select[size_t(axis * half + j)] = float(std::pow(cfg_.rope_theta, -2.0 * double(j) / double(cfg_.rotary_dim())));
  }
  std::string freq = weight(computed_weight("model.rotary_emb.mrope_inv_freq", {3, half}, std::move(select),
                                            graph::kFloat));
  std::string pos = op("Cast", p + "/position_ids/Cast", {io::kPositionIds}, graph::kFloat,
                       {attr("to", int64_t(graph::kFloat))});                                     // [3, B, S]
  std::string pos_t = op("Transpose", p + "/Transpose", {pos}, graph::kFloat, {attr("perm", std::vector<int64_t>{1, 2, 0})});
  std::string angles = op("MatMul", p + "/MatMul", {pos_t, freq}, graph::kFloat);  // [B, S, half]
  std::string rows = reshape(p + "/Reshape", angles, {-1, half});                    // [B*S, half]
  cos_cache_ = cast(op("Cos", p + "/Cos", {rows}, graph::kFloat), dtype, p + "/Cos/Cast");
  sin_cache_ = cast(op("Sin", p + "/Sin", {rows}, graph::kFloat), dtype, p + "/Sin/Cast");
  // The row index of every token: arange(B*S) as [B, S].
  std::string shape = op("Shape", p + "/ids/Shape", {io::kPositionIds}, graph::kInt64);  // [3]
  std::string bs = op("Slice", p + "/ids/Slice", {shape, b_.constant_i64({1}), b_.constant_i64({3})}, graph::kInt64);
  std::string count = op("ReduceProd", p + "/ids/ReduceProd", {bs}, graph::kInt64, {attr("keepdims", int64_t(0))});
  std::string range = op("Range", p + "/ids/Range", {b_.constant_i64_scalar(0), count, b_.constant_i64_scalar(1)},
                         graph::kInt64);
  rope_positions_ = op("Reshape", p + "/ids/Reshape", {range, bs}, graph::kInt64);  // [B, S]
}

// ---- embeddings and head ----------------------------------------------------------

bool Graph::tied() const { return ckpt_.lm_head_name() == "embed_tokens.weight"; }

// In a quantized build the embedding table is stored like the lm_head:
// block-quantized, read with GatherBlockQuantized. Tied, it is the lm_head's
// own quantized table (stored once); untied, its own. Needs whole blocks per
// row (hidden % block_size == 0); --embedding-gather float keeps a float table.
// --embedding's format (plan_.embedding) replaces that rule: a quantized
// table then needs whole blocks per row, or the build fails.
bool Graph::quantized_embedding() const {
  if (plan_.embedding) return plan_.embedding->quantized && !opts_.exclude_embeds;
  return plan_.lm_head.quantized && opts_.quantized_embedding_gather && !opts_.exclude_embeds &&
         cfg_.hidden_size % plan_.lm_head.block.block_size == 0;
}

// One table for the embedding and the lm_head: tied, both in the graph, and
// not split by --embedding.
bool Graph::shares_tied_table() const { return tied() && !opts_.exclude_lm_head && !recipe_.tied_table_split; }

std::string Graph::embed_tokens() {
  if (opts_.exclude_embeds) return io::kInputsEmbeds;
  const std::string tensor = "embed_tokens.weight";
  const std::string p = "/model/embed_tokens";

  if (quantized_embedding()) {
    const bool shared = shares_tied_table();
    // A shared table is the lm_head's, in its format (--bits-budget may have
    // promoted it past the --embedding format it started equal to).
    const quant::BlockFormat& f = plan_.embedding && !shared ? plan_.embedding->block : plan_.lm_head.block;
    if (cfg_.hidden_size % f.block_size != 0)
      fail("--embedding", "a quantized table needs hidden_size (" + std::to_string(cfg_.hidden_size) +
                              ") to be a multiple of --block-size " + std::to_string(f.block_size));
    // A table of its own that --embedding asked for is fitted for the lookup
    // alone; the lm_head's calibration says nothing about it.
    const quant::FitOptions fit = plan_.embedding && !shared
                                      ? recipe_.fit_for_gathered_table(run_dtype("MatMulNBits"))
                                      : recipe_.fit_for({tensor}, run_dtype("MatMulNBits"));
    QuantizedWeight table = quantized_weight(ckpt_, {tensor},
                                             shared ? weight_name_for("/lm_head/MatMul") : "model.embed_tokens.weight",
                                             f, run_dtype("MatMulNBits"), opts_.threads, fit);
    weight(table.packed);
    weight(table.scales);
    if (!f.symmetric) weight(table.zero_points);
    if (shared) shared_head_ = table;
    // MatMulNBits stores [V, blocks, block_bytes]; the gather reads rows [V, K * bits / 8].
    std::string rows = reshape(p + "/Reshape", table.packed.name, {cfg_.vocab_size, -1});
    std::vector<std::string> inputs = {rows, io::kInputIds, table.scales.name};
    if (!f.symmetric) inputs.push_back(table.zero_points.name);
    return op("GatherBlockQuantized", p + "/GatherBlockQuantized", inputs, dtype_of(table.scales.name),
              {attr("gather_axis", 0), attr("quantize_axis", 1), attr("block_size", f.block_size),
               attr("bits", int64_t(f.bits))},
              kMsDomain);  // [B, S, H]
  }
  if (plan_.embedding) {
    // --embedding fp16/fp32: the table in that dtype, its rows cast to the
    // activation dtype. Shared with a float lm_head of the same dtype.
    const DataType dt = plan_.embedding->float_dtype;
    embed_table_ = weight(float_weight(ckpt_, tensor, "model.embed_tokens.weight", dt));
    const std::string rows = op("Gather", p + "/Gather", {embed_table_, io::kInputIds}, dt);  // [B, S, H]
    return cast(rows, plan_.activations, p + "/Gather/Cast");
  }
  // A float table: the lm_head's own when tied to a float lm_head, else in
  // the layers' float dtype (the activation dtype for quantized builds).
  const DataType dt = tied() && !plan_.lm_head.quantized ? plan_.lm_head.float_dtype
                      : plan_.layers.quantized           ? plan_.activations
                                                         : plan_.layers.float_dtype;
  embed_table_ = weight(float_weight(ckpt_, tensor, "model.embed_tokens.weight", dt));
  return op("Gather", p + "/Gather", {embed_table_, io::kInputIds}, dt);  // [B, S, H]
}

// (normed, the sum before the norm); the sum only with --layer-outputs, which outputs it.
std::pair<std::string, std::string> Graph::final_norm(const std::string& x, const std::string& residual) {
  // Named as upstream: after the last layer, "/model/layers.N".
  const std::string name =
      "/model/layers." + std::to_string(cfg_.num_hidden_layers) + "/final_norm_layernorm/SkipLayerNorm";
  return skip_norm(name, x, residual, "norm.weight", opts_.layer_outputs,
                   opts_.exclude_lm_head ? io::kHiddenStates : "");
}

bool Graph::slice_before_final_norm() const { return keeps_logits() && !builds_mtp_head(ckpt_, opts_); }

// The last logits_to_keep positions of x [B, S, H]: Slice from -n (n = 0:
// from 0, every position).
std::string Graph::keep_last_positions(const std::string& x, const std::string& what) {
  if (keep_start_.empty()) keep_start_ = op("Neg", "/lm_head/logits_to_keep/Neg", {io::kLogitsToKeep}, graph::kInt64);
  return op("Slice", "/lm_head/logits_to_keep/" + what + "/Slice",
            {x, keep_start_, b_.constant_i64({std::numeric_limits<int64_t>::max()}), b_.constant_i64({1})},
            dtype_of(x));  // [B, n or S, H]
}

void Graph::lm_head(const std::string& normed, int64_t vocab) {
  std::string x = normed;
  if (keeps_logits() && !slice_before_final_norm()) x = keep_last_positions(x, "normed");
  if (opts_.prune_lm_head) {
    // Only the last position's logits: prefill multiplies one row by the
    // largest matrix instead of all of them.
    x = op("Slice", "/lm_head/prune/Slice",
           {x, b_.constant_i64({-1}), b_.constant_i64({std::numeric_limits<int64_t>::max()}), b_.constant_i64({1})},
           dtype_of(x));  // [B, 1, H]
  }
  const std::string tensor = ckpt_.lm_head_name();
  if (vocab > 0 && vocab < cfg_.vocab_size) return draft_lm_head(x, vocab);
  if (shared_head_) {
    const quant::BlockFormat& f = plan_.lm_head.block;
    matmul_nbits("/lm_head", x, *shared_head_, f.bits, f.block_size, io::kLogits);
  } else if (shares_tied_table() && !embed_table_.empty() && !plan_.lm_head.quantized) {
    // Tied float head: multiply by the embedding table [V, H] itself (transB),
    // so the largest tensor is stored once.
    const DataType wdt = dtype_of(embed_table_);
    const DataType dt = wdt == plan_.activations ? run_dtype("FusedMatMul") : graph::kFloat;
    const std::string node_name = "/lm_head/FusedMatMul";
    node("FusedMatMul", node_name,
         {cast(x, dt, node_name + "/input_0/Cast"), cast(embed_table_, dt, node_name + "/weight/Cast")},
         {attr("transA", 0), attr("transB", 1), attr("alpha", 1.0f)}, kMsDomain, {dt}, {io::kLogits});
  } else {
    matmul("/lm_head", x, {tensor}, plan_.lm_head, io::kLogits);
  }
}

// The first `vocab` rows of the head, stored apart from the full table (which
// the embedding still needs whole): the same quantized rows, or the same
// float columns, as the full head's, so the kept logits are the full head's.
// A tied int4 head is quantized again rather than sliced from the table it
// shares with the embedding: a weight's bytes are produced once, for one
// initializer; the same tensor, format and fit give the same rows.
void Graph::draft_lm_head(const std::string& x, int64_t vocab) {
  const std::string tensor = ckpt_.lm_head_name();
  const WeightFormat format = shared_head_ ? plan_.lm_head : recipe_.format_for({tensor}, plan_.lm_head);
  matmul_in_format("/lm_head", x, {tensor}, format, io::kLogits, {vocab, "_draft"});
}

}  // namespace qwen35

void build_qwen35_graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length,
                        graph::GraphBuilder& b, const QuantRecipe& recipe) {
  const ModelConfig& cfg = ckpt.config();
  if (cfg.rotary_dim() % 2 != 0 || cfg.rotary_dim() <= 0)
    fail("config.json", "rotary_dim " + std::to_string(cfg.rotary_dim()) + " must be even and positive");
  if (context_length <= 0) fail("build", "context length must be positive");
  qwen35::Graph(ckpt, opts, context_length, b, recipe).build();
}

void build_qwen35_embedding_graph(const Checkpoint& ckpt, const BuildOptions& opts, graph::GraphBuilder& b,
                                  const QuantRecipe& recipe) {
  if (ckpt.config().image_token_id < 0) fail(ckpt.dir().string(), "config.json has no image_token_id");
  // The table in the decoder build's form, but its own copy (no lm_head here to share it with).
  BuildOptions embedding = opts;
  embedding.exclude_embeds = false;
  embedding.exclude_lm_head = true;
  embedding.vision = false;
  qwen35::Graph(ckpt, embedding, 1, b, recipe).build_embedding();
}

}  // namespace deltagen
