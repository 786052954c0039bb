// The linear algebra of GPTQ (quant_methods.h): from a projection's input
// Gram matrix G = sum x x^T, the upper triangular U with U^T U = H^-1, where
// H = G / tokens + damp * mean(diag) * I. Quantizing column j of a row leaves
// the rounding error e_j; subtracting e_j / U[j][j] * U[j][j+1..] from the
// columns after j is the least-squares correction of the output error
// (w - q)^T H (w - q) given the columns already fixed.
//
// U is computed without forming H^-1: H = R R^T with R upper triangular (a
// Cholesky factorization taken from the last index down, i.e. the usual
// lower one of H with its indices reversed), then U = R^-1, since
// (R R^T)^-1 = R^-T R^-1. Both steps are blocked so that almost all of their
// n^3 / 3 multiply-adds are fp32 matrix products (kernels/gemm_f32.h): ~10 s
// instead of ~100 s for the 4B MLP's 9216 inputs on 2 cores.
#pragma once
#include <cstdint>
#include <vector>

#include "quant/quant_methods.h"

namespace deltagen::quant {

struct GptqFactor {
  // GPTQ's lazy batches: the error feedback of a batch of kLazyColumns
  // columns to the columns after it is applied once per batch, as one
  // product [rows][batch] x [batch][rest] (kernels/gemm_f32.h), instead of
  // column by column; within a batch it goes column by column.
  static constexpr int64_t kLazyColumns = 128;

  int64_t k = 0;
  std::vector<float> u;            // [K][K] row-major, upper triangle used
  std::vector<double> importance;  // diag(H): the channel weights of the per-block scale search
  // Per batch [c0, c1): U[c0..c1)[c1..K) transposed, [K - c1][c1 - c0], at offset later_at[c0 / kLazyColumns].
  std::vector<float> later;
  std::vector<int64_t> later_at;

  const float* row(int64_t j) const { return u.data() + j * k + j; }  // U[j][j..K)
  const float* later_of(int64_t c0) const { return later.data() + later_at[size_t(c0 / kLazyColumns)]; }
};

// Throws Error when H stays singular after raising the damping 100-fold.
GptqFactor gptq_factor(const InputStats& stats, double damp);

}  // namespace deltagen::quant
