// The linear algebra of GPTQ (quant_methods.h): from a projection's input
// Gram matrix G = sum x x^T, the upper triangular U with U^T U = H^-1, where
// H = G / tokens + damp * mean(diag) * I. Quantizing column j of a row leaves
// the rounding error e_j; subtracting e_j / U[j][j] * U[j][j+1..] from the
// columns after j is the least-squares correction of the output error
// (w - q)^T H (w - q) given the columns already fixed.
//
// U is computed without forming H^-1: H = R R^T with R upper triangular (a
// Cholesky factorization taken from the last index down), then U = R^-1,
// since (R R^T)^-1 = R^-T R^-1. Both steps are written as row updates
// (axpy) over contiguous memory, which the compiler vectorizes.
#pragma once
#include <cstdint>
#include <vector>

#include "quant/quant_methods.h"

namespace deltagen::quant {

struct GptqFactor {
  int64_t k = 0;
  std::vector<float> u;            // [K][K] row-major, upper triangle used
  std::vector<double> importance;  // diag(H): the channel weights of the per-block scale search
  const float* row(int64_t j) const { return u.data() + j * k + j; }  // U[j][j..K)
};

// Throws Error when H stays singular after raising the damping 100-fold.
GptqFactor gptq_factor(const InputStats& stats, double damp);

}  // namespace deltagen::quant
