// The float64 reference forward pass of the Qwen3.5 text model: the oracle
// that every ONNX graph and the runtime are checked against.
//
// It is written for clarity, not speed: one token at a time where the math is
// a recurrence (the conv, the delta rule), plain loops everywhere, and the
// same cache layouts as Hugging Face so that states can be compared directly.
// The math follows transformers' modeling_qwen3_5.py; the golden set's
// README (shared/golden/README.md) lists every detail. The per-token pieces
// (norms, RoPE, the conv step, the delta rule, attention) are in
// qwen35_ops.h, shared with the kernel tests.
//
// Usage:
//   ReferenceModel model(*Checkpoint::open(dir));
//   ReferenceState state = model.new_state();
//   Matrix64 logits = model.forward(prompt_ids, state);    // prefill: [P][vocab]
//   Matrix64 next = model.forward({token}, state);         // decode:  [1][vocab]
//
// With images (a VL checkpoint; the vision tower is qwen35_vision_reference.h):
//   ids = expand_image_pads(prompt, image_token_id, tokens per image, ...);
//   Matrix64 features = VisionReference(ckpt).encode(pixel_values, grids);
//   MropePositions pos = mrope_positions(ids, image_token_id, grids, merge);
//   Matrix64 logits = model.forward_embeds(model.embed_with_images(ids, features), pos, state);
//   Matrix64 next = model.forward({token}, state);  // decode at position + rope_delta
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config.h"
#include "vision/mrope_positions.h"

namespace deltagen {

// A row-major [rows][cols] block of doubles: a Linear weight ([out][in]) or
// activations ([tokens][features]).
struct Matrix64 {
  int64_t rows = 0, cols = 0;
  std::vector<double> data;

  Matrix64() = default;
  Matrix64(int64_t r, int64_t c) : rows(r), cols(c), data(size_t(r * c), 0.0) {}
  double* row(int64_t r) { return data.data() + r * cols; }
  const double* row(int64_t r) const { return data.data() + r * cols; }
};

// Cache of one full-attention layer. Keys are stored after k_norm and RoPE,
// values raw; both [nkv][len][head_dim], one growing vector per kv head.
struct KvCache {
  int64_t len = 0;                     // tokens cached
  std::vector<std::vector<double>> k;  // [nkv] x [len * head_dim]
  std::vector<std::vector<double>> v;  // [nkv] x [len * head_dim]
};

// State of one Gated DeltaNet layer, in Hugging Face's layout.
struct DeltaNetState {
  // [conv_dim][K]: the last K = linear_conv_kernel_dim pre-conv inputs
  // (in_proj_qkv outputs), oldest first, zeros before the first token.
  std::vector<double> conv;
  // [nv][dk][dv]: the delta-rule memory S of each value head (o = S^T q).
  std::vector<double> recurrent;
};

// Everything the model carries from one forward call to the next.
struct ReferenceState {
  int64_t position = 0;               // tokens seen so far
  // Rotary position minus sequence index: 0 for text, HF's rope_deltas after
  // a prompt with images (forward_embeds adds each call's MropePositions::
  // rope_delta). forward() runs token `position + t` at rotary position
  // position + rope_delta + t in all three M-RoPE streams.
  int64_t rope_delta = 0;
  std::vector<KvCache> kv;            // [num_layers]; used by full-attention layers only
  std::vector<DeltaNetState> deltanet;  // [num_layers]; used by linear layers only
};

// The multi-token-prediction head's own state: its attention layers' caches
// and the slots it has run (the next slot's rotary position).
struct ReferenceMtpState {
  int64_t position = 0;
  std::vector<KvCache> kv;  // [mtp_num_hidden_layers]
};

// Called with the input x [T][in] of every Linear layer and the checkpoint
// names of the weights that read it ("layers.0.mlp.gate_proj.weight",
// "layers.0.mlp.up_proj.weight"): calibration statistics for quantization.
using LinearInputObserver = std::function<void(const std::vector<std::string>& weights, const Matrix64& x)>;

// The router's decision for every token of one MoE layer.
struct RouterTrace {
  Matrix64 logits;                // [T][num_experts]
  std::vector<int64_t> experts;   // [T * k]: per token, descending probability (ties: lower id)
  std::vector<double> weights;    // [T * k]: the renormalised weights in the same order
};

// Optional intermediate values of one forward call.
struct ReferenceTrace {
  // [num_layers + 1] x [T][hidden]: index 0 = embeddings, index i + 1 = the
  // residual stream after layer i (before the final norm).
  std::vector<Matrix64> hidden;
  LinearInputObserver linear_inputs;  // when set
  std::vector<RouterTrace> routing;   // MoE models: [num_layers], filled by the layers run
};

// How the reference holds and multiplies its weights. The defaults are the
// oracle: every weight loaded at construction, every product in float64.
struct ReferenceOptions {
  // Nothing big is loaded at construction: load_layer(i) / release_layer(i)
  // bring one decoder layer's weights in and out, and embed() reads the rows
  // it needs from the checkpoint (which must outlive the model). The logits
  // and the MTP head are not available. For calibrating models larger than
  // memory (models/calibration.h).
  bool streamed = false;
  // Linear layers multiply in fp32 (kernels/gemm_f32.h: the weights and
  // inputs rounded to fp32, sums in fp32); everything else stays float64.
  // Bf16 and fp16 weights are exact in fp32. For calibration statistics,
  // ~20x faster than the float64 products.
  bool fp32_linear = false;
};

class ReferenceModel {
 public:
  // Loads and converts every weight to fp64 once (unless options.streamed).
  // Throws Error on a tensor whose shape disagrees with the config.
  explicit ReferenceModel(const Checkpoint& ckpt, ReferenceOptions options = {});

  const ModelConfig& config() const { return cfg_; }

  // An empty state: position 0, empty KV caches, zero conv/recurrent states.
  ReferenceState new_state() const;

  // Runs `ids` through the model continuing from `state` (which is updated)
  // and returns the logits [ids.size()][vocab]. Prefill = one call on many
  // tokens from an empty state; decode = one call per token. Any split of a
  // sequence into calls gives the same logits. Throws Error on an id outside
  // the vocabulary.
  Matrix64 forward(const std::vector<int64_t>& ids, ReferenceState& state,
                   ReferenceTrace* trace = nullptr) const;

  // forward() on given input embeddings [T][hidden] at given 3-D rotary
  // positions (pos.size() == T): full-attention layers apply interleaved
  // M-RoPE (mrope_section of the config); the rest is forward() exactly.
  // state.rope_delta += pos.rope_delta, so pos must be mrope_positions(...,
  // start = state.position + state.rope_delta) of the tokens fed (what a
  // later forward() continues from). With positions all equal to
  // state.position + t, this is forward() bit for bit.
  Matrix64 forward_embeds(const Matrix64& embeds, const MropePositions& pos, ReferenceState& state,
                          ReferenceTrace* trace = nullptr) const;

  // ---- the multi-token-prediction head (a checkpoint with mtp.*; docs/speculative.md) ----
  // The checkpoint has a head (dense models; a MoE model's head is not in the reference yet).
  bool has_mtp() const { return mtp_.has_value(); }
  // An empty head state; Error when the checkpoint has no head.
  ReferenceMtpState new_mtp_state() const;
  // Runs the head over T slots, continuing from `state` (updated): slot j
  // reads hidden[j], the main model's hidden at position p AFTER its final
  // norm (what its lm_head reads; or, chaining drafts, the head's own
  // previous *hm row), and next_ids[j], the token at p + 1, at rotary
  // position state.position + j (= p: the hidden's position). Returns the
  // logits of the token at p + 2 [T][vocab], through the model's lm_head;
  // *hm gets the head's hidden after mtp.norm [T][hidden].
  Matrix64 mtp_forward(const std::vector<int64_t>& next_ids, const Matrix64& hidden, ReferenceMtpState& state,
                       Matrix64* hm = nullptr) const;

  // The pieces of forward(), for studies that rerun part of the model
  // (quantization sensitivity): the embeddings of `ids` [T][hidden]; layers
  // [first, num_layers) over the residual stream h (updated in place, only
  // those layers' states change); the final norm; the logits weight
  // [vocab][hidden] (lm_head, or the embedding when tied).
  Matrix64 embed(const std::vector<int64_t>& ids) const;
  // embed(ids) with the k-th image token (config().image_token_id) replaced
  // by row k of image_features [n][hidden] (HF's masked_scatter). Throws
  // Error when the ids hold other than n image tokens or the width differs.
  Matrix64 embed_with_images(const std::vector<int64_t>& ids, const Matrix64& image_features) const;
  void run_layers(int64_t first, Matrix64& h, ReferenceState& state, ReferenceTrace* trace = nullptr) const;
  // Layers [first, end) only; state.position advances only when the run
  // reaches the last layer (a caller running a window layer by layer keeps
  // one state per window and moves it on at the end).
  void run_layers(int64_t first, int64_t end, Matrix64& h, ReferenceState& state, ReferenceTrace* trace) const;
  // A streamed model's layer weights (ReferenceOptions::streamed); running a
  // layer that is not loaded is an Error. No-ops on a resident model.
  void load_layer(int64_t layer);
  void release_layer(int64_t layer);
  Matrix64 final_norm(const Matrix64& h) const;
  const Matrix64& logits_weight() const { return lm_head_.rows ? lm_head_ : embed_; }
  const std::string& lm_head_name() const { return lm_head_name_; }  // "embed_tokens.weight" when tied

  // The fp64 copy of a 2-D Linear weight by its checkpoint name
  // ("layers.3.mlp.down_proj.weight", "lm_head.weight", "embed_tokens.weight"),
  // to be replaced by a quantized-then-dequantized one; Error for another name.
  Matrix64& linear_weight(const std::string& tensor);
  // The checkpoint names of every Linear weight (the embedding when tied).
  std::vector<std::string> linear_weight_names() const;

  // Layer `layer`'s states, for tests (throws Error if the layer has the other kind).
  const std::vector<double>& conv_state(const ReferenceState& s, int64_t layer) const;       // [conv_dim][K]
  const std::vector<double>& recurrent_state(const ReferenceState& s, int64_t layer) const;  // [nv][dk][dv]
  const KvCache& kv_cache(const ReferenceState& s, int64_t layer) const;

 private:
  struct FullAttnWeights {
    Matrix64 q_proj;  // [nh * 2 * hd][hidden], per head [query | gate]
    Matrix64 k_proj, v_proj;  // [nkv * hd][hidden]
    Matrix64 o_proj;  // [hidden][nh * hd]
    std::vector<double> q_norm, k_norm;  // [hd], offsets (applied as 1 + w)
  };
  struct DeltaNetWeights {
    Matrix64 in_proj_qkv;  // [conv_dim][hidden]
    Matrix64 in_proj_z;    // [nv * dv][hidden]
    Matrix64 in_proj_b;    // [nv][hidden]
    Matrix64 in_proj_a;    // [nv][hidden]
    Matrix64 conv;         // [conv_dim][K] (the [conv_dim, 1, K] conv1d weight)
    std::vector<double> A_log, dt_bias;  // [nv]
    std::vector<double> norm;            // [dv], plain weight (not 1 + w)
    Matrix64 out_proj;     // [hidden][nv * dv]
  };
  struct ExpertWeights {
    Matrix64 gate_proj, up_proj;  // [I][hidden]
    Matrix64 down_proj;           // [hidden][I]
  };
  struct MoeWeights {
    Matrix64 router;                     // [E][hidden] (mlp.gate.weight)
    std::vector<ExpertWeights> experts;  // [E], I = moe_intermediate_size
    ExpertWeights shared;                // I = shared_expert_intermediate_size
    Matrix64 shared_gate;                // [1][hidden] (mlp.shared_expert_gate.weight)
  };
  struct LayerWeights {
    std::string prefix;  // "layers.3."
    bool full = false;
    std::vector<double> input_norm, post_norm;  // [hidden], offsets
    FullAttnWeights attn;                       // when full
    DeltaNetWeights lin;                        // when linear
    ExpertWeights mlp;                          // dense models: I = intermediate_size
    MoeWeights moe;                             // MoE models
  };

  struct MtpWeights {
    Matrix64 fc;  // [hidden][2 * hidden] over [embedding | hidden]
    std::vector<double> norm_embedding, norm_hidden, norm;  // [hidden], offsets
    std::vector<LayerWeights> layers;  // full attention, prefix "mtp.layers.N."
  };

  LayerWeights load_layer(const Checkpoint& ck, const std::string& prefix, bool full, int64_t moe_layer) const;
  // A Linear layer without bias: x [T][in], w [out][in] -> [T][out], in
  // float64 or (options_.fp32_linear) fp32.
  Matrix64 linear(const Matrix64& x, const Matrix64& w) const;
  void run_layer(const LayerWeights& w, Matrix64& h, const MropePositions& pos, KvCache* kv, DeltaNetState* deltanet,
                 const LinearInputObserver* observe, RouterTrace* routing) const;
  static ExpertWeights load_swiglu(const Checkpoint& ck, const std::string& prefix, int64_t I, int64_t H);
  // p: the layer's tensor prefix; layer: its index for Checkpoint::expert_matrix.
  MoeWeights load_moe(const Checkpoint& ck, const std::string& p, int64_t layer) const;
  Matrix64 full_attention(const LayerWeights& w, const Matrix64& x, const MropePositions& pos, KvCache& cache,
                          const LinearInputObserver* observe) const;
  void run_layers_at(int64_t first, int64_t end, Matrix64& h, ReferenceState& state, const MropePositions& pos,
                     ReferenceTrace* trace) const;
  Matrix64 logits_of(const Matrix64& h, ReferenceTrace* trace) const;
  Matrix64 gated_delta_net(const LayerWeights& w, const Matrix64& x, DeltaNetState& st,
                           const LinearInputObserver* observe) const;
  Matrix64 mlp(const LayerWeights& w, const Matrix64& x, const LinearInputObserver* observe) const;
  Matrix64 moe(const LayerWeights& w, const Matrix64& x, const LinearInputObserver* observe,
               RouterTrace* routing) const;

  ModelConfig cfg_;
  ReferenceOptions options_;
  const Checkpoint* streamed_from_ = nullptr;  // options_.streamed
  std::vector<bool> loaded_;  // [num_layers]: layer weights present
  // fp32_linear: each weight's fp32 copy, made on first use (dropped with its layer).
  mutable std::map<const double*, std::vector<float>> fp32_weights_;
  Matrix64 embed_;    // [vocab][hidden]; empty when streamed
  std::vector<LayerWeights> layers_;
  std::vector<double> final_norm_;  // [hidden], offsets
  Matrix64 lm_head_;  // [vocab][hidden]; empty when tied to embed_
  std::string lm_head_name_;  // its checkpoint name ("embed_tokens.weight" when tied)
  std::optional<MtpWeights> mtp_;  // when the checkpoint has a head
  std::vector<double> inv_freq_;  // [rotary_dim / 2]
  int64_t mrope_section_[3] = {0, 0, 0};  // [sT, sH, sW] (all 0: text, every frequency on T)
};

// Prefill `prompt`, then greedy-decode `new_tokens` tokens one at a time
// (EOS is not special). `logits` holds the prompt rows, then one row per
// decode step: [P + max(new_tokens - 1, 0)][vocab]; row P - 1 + j produced
// generated[j].
struct GreedyResult {
  std::vector<int64_t> generated;
  Matrix64 logits;
};
GreedyResult reference_greedy(const ReferenceModel& model, const std::vector<int64_t>& prompt,
                              int64_t new_tokens);

// The same for a prompt with images: `ids` already expanded (one image token
// per feature row), image_features from VisionReference::encode for `grids`.
// The prefill is one forward_embeds call at mrope_positions(ids); the decode
// steps are forward() calls, which continue at position + rope_delta.
GreedyResult reference_greedy_with_images(const ReferenceModel& model, const std::vector<int64_t>& ids,
                                          const Matrix64& image_features, const std::vector<ImageGrid>& grids,
                                          int64_t new_tokens);

}  // namespace deltagen
