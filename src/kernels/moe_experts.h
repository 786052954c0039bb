// The routed experts of a Qwen3.5-MoE layer (com.microsoft.QMoE as the
// builder writes it, src/models/qwen35_moe.cpp) on deltagen's MatMulNBits
// kernels:
//   route    per token the k largest router logits (ties: the lower expert
//            id), weights = softmax over those k logits
//   expert e a = fc1_e x = [gate | up], h = silu(gate) * up, y_e = fc2_e h
//   out      sum over the chosen experts of weight * y_e, added in ascending
//            expert id (Hugging Face's order)
// The tokens routed to one expert run as one matrix (m = their count), so a
// prompt's experts get the prefill path of matmul_nbits and a decode step the
// GEMV over only its k experts' bytes.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/matmul_nbits.h"
#include "kernels/packed_weights.h"
#include "kernels/parallel.h"

namespace deltagen::kernels {

// A layer's experts as stored in the QMoE node (int4, symmetric codes around
// 8, MatMulNBits' row layout: blocks along K, the lower index in the low
// nibble), pointers into the initializers:
//   fc1 [E, 2I, H/2] with gate and up rows interleaved (gate 0, up 0, gate 1, ...),
//   fc1_scales [E, 2I, H/block], fc2 [E, H, I/2], fc2_scales [E, H, I/block].
struct MoeWeightsView {
  int64_t experts = 0;  // E
  int64_t hidden = 0;   // H
  int64_t inter = 0;    // I
  int block_size = 32;
  const uint8_t* fc1 = nullptr;
  const float* fc1_scales = nullptr;
  const uint8_t* fc2 = nullptr;
  const float* fc2_scales = nullptr;
};

// Throws Error unless the kernels take the shape: E >= 1, H and I positive
// multiples of the block size, a power of two in [16, 256].
void check_moe_shape(const MoeWeightsView& view);

class MoeExperts {
 public:
  int64_t experts() const { return int64_t(fc1_.size()); }
  int64_t hidden() const { return hidden_; }
  int64_t inter() const { return inter_; }
  // Expert e's fc1, its rows [gate 0..I-1 | up 0..I-1] (what swiglu() takes), and fc2.
  const PackedWeights& fc1(int64_t e) const { return fc1_[size_t(e)]; }
  const PackedWeights& fc2(int64_t e) const { return fc2_[size_t(e)]; }

  // Packed bytes of all experts, and of the experts in `chosen` (distinct
  // ids, as route_top_k gives them): what one decode step streams for them.
  int64_t bytes() const;
  int64_t bytes_of(std::span<const int64_t> chosen) const;

 private:
  friend MoeExperts pack_moe_experts(const MoeWeightsView& view, const PackOptions& options);
  int64_t hidden_ = 0, inter_ = 0;
  std::vector<PackedWeights> fc1_, fc2_;
};

// Packs every expert once (load time). Throws Error for an unsupported shape.
MoeExperts pack_moe_experts(const MoeWeightsView& view, const PackOptions& options = {});

// The routing of `tokens` rows of `experts` logits: ids [tokens, k], each
// row's chosen experts from the largest logit down (ties: lower id first; a
// NaN logit ranks below every number), and their weights [tokens, k],
// softmax over the k chosen logits. Throws Error unless 1 <= k <= experts.
void route_top_k(const float* logits, int64_t tokens, int64_t experts, int64_t k, int64_t* ids, float* weights);

// y [tokens, H] = the routed experts' output for x [tokens, H] and router
// logits [tokens, E]. The result does not depend on the thread count.
void moe_forward(const MoeExperts& experts, const float* x, const float* logits, int64_t tokens, int64_t k, float* y,
                 const Parallel& parallel, const MatMulConfig& config = {});

}  // namespace deltagen::kernels
