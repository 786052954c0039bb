#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "deltagen/error.h"
#include "kernels/gemm_f32.h"
#include "quant/parallel.h"

namespace deltagen::quant {
namespace {

// Pivots per block: the blocked steps are products of [n][kBlock] panels
// (kernels/gemm_f32.h), which is where all but O(n^2 kBlock) of the work goes.
constexpr int64_t kBlock = 128;

// d = the n x n lower-triangular block at `l` (row stride ld) inverted, into
// `inv` (row stride n, upper part zero). Unblocked: n is at most kBlock.
void invert_lower_block(const float* l, int64_t ld, int64_t n, float* inv) {
  std::fill(inv, inv + n * n, 0.0f);
  for (int64_t c = 0; c < n; ++c) {  // column c of the inverse, by forward substitution
    inv[c * n + c] = 1.0f / l[c * ld + c];
    for (int64_t r = c + 1; r < n; ++r) {
      float s = 0.0f;
      for (int64_t d = c; d < r; ++d) s += l[r * ld + d] * inv[d * n + c];
      inv[r * n + c] = -s / l[r * ld + r];
    }
  }
}

// A = L L^T in place (`a`: n x n, the lower triangle read and replaced by L),
// blocked right-looking: factor a diagonal block, solve the panel below it
// (panel := panel L_dd^-T, a product with the block's inverse), subtract the
// panel's outer product from the trailing lower triangle. In float, as GPTQ's
// own implementation factors H (the damping keeps it well conditioned).
// False when A is not positive definite.
bool lower_cholesky(std::vector<float>& a, int64_t n) {
  std::vector<float> inv(static_cast<size_t>(kBlock * kBlock)), panel;
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t j1 = std::min(n, j0 + kBlock), nb = j1 - j0, below = n - j1;
    float* d = a.data() + j0 * n + j0;
    for (int64_t j = 0; j < nb; ++j) {  // the diagonal block, left-looking within it
      for (int64_t i = j; i < nb; ++i) {
        float s = d[i * n + j];
        for (int64_t p = 0; p < j; ++p) s -= d[i * n + p] * d[j * n + p];
        if (i == j) {
          if (!(s > 0.0f) || !std::isfinite(s)) return false;
          d[j * n + j] = std::sqrt(s);
        } else {
          d[i * n + j] = s / d[j * n + j];
        }
      }
    }
    if (below == 0) break;
    invert_lower_block(d, n, nb, inv.data());
    float* p = a.data() + j1 * n + j0;  // the panel [below][nb]
    panel.resize(size_t(below * nb));
    for (int64_t i = 0; i < below; ++i) std::copy(p + i * n, p + i * n + nb, panel.begin() + i * nb);
    kernels::gemm_nt_f32(panel.data(), inv.data(), p, {.m = below, .n = nb, .k = nb, .lda = nb, .ldb = nb, .ldc = n},
                         false, 0);
    kernels::GemmShape trailing{.m = below, .n = below, .k = nb, .lda = n, .ldb = n, .ldc = n};
    trailing.lower = true;
    trailing.alpha = -1.0f;
    kernels::gemm_nt_f32(p, p, a.data() + j1 * n + j1, trailing, true, 0);
  }
  return true;
}

// U with U^T U = H^-1, from L = chol(J H J) (J reverses the order): H = R R^T
// with R = J L J upper triangular, so U = R^-1 = J L^-1 J. L^-1 by block
// columns, which are independent (two threads take every other one): in
// block column j, X_ij = -L_ii^-1 sum_{j <= m < i} L_im X_mj, kept
// transposed (xt[c][r] = X[r][j0 + c]) so that each sum is one product.
std::vector<float> reversed_lower_inverse(const std::vector<float>& l, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<float> diag_inv(static_cast<size_t>(blocks * kBlock * kBlock));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kBlock, nb = std::min(kBlock, n - i0);
    invert_lower_block(l.data() + i0 * n + i0, n, nb, diag_inv.data() + b * kBlock * kBlock);
  }
  std::vector<float> u(static_cast<size_t>(n * n), 0.0f);
  auto column = [&](int64_t jb, std::vector<float>& xt, std::vector<float>& st) {
    const int64_t j0 = jb * kBlock, nb = std::min(kBlock, n - j0);
    std::fill(xt.begin(), xt.end(), 0.0f);
    const float* xjj = diag_inv.data() + jb * kBlock * kBlock;
    for (int64_t r = 0; r < nb; ++r)
      for (int64_t c = 0; c <= r; ++c) xt[size_t(c * n + j0 + r)] = xjj[r * nb + c];
    for (int64_t ib = jb + 1; ib < blocks; ++ib) {
      const int64_t i0 = ib * kBlock, ni = std::min(kBlock, n - i0);
      // st[c][i] = sum_{j0 <= m < i0} X[m][j0 + c] L[i0 + i][m]
      kernels::gemm_nt_f32(xt.data() + j0, l.data() + i0 * n + j0, st.data(),
                           {.m = nb, .n = ni, .k = i0 - j0, .lda = n, .ldb = n, .ldc = kBlock}, false, 1);
      // X_ij^T = -(L_ii^-1 S)^T = -S^T L_ii^-T
      kernels::GemmShape solve{.m = nb, .n = ni, .k = ni, .lda = kBlock, .ldb = ni, .ldc = n};
      solve.alpha = -1.0f;
      kernels::gemm_nt_f32(st.data(), diag_inv.data() + ib * kBlock * kBlock, xt.data() + i0, solve, false, 1);
    }
    // U[a][b] = X[n-1-a][n-1-b]: this block column gives U's columns n-1-j0-c.
    for (int64_t c = 0; c < nb; ++c) {
      const int64_t ucol = n - 1 - (j0 + c);
      for (int64_t r = j0 + c; r < n; ++r) u[size_t((n - 1 - r) * n + ucol)] = xt[size_t(c * n + r)];
    }
  };
  parallel_for(2, 2, 1, [&](int64_t p_begin, int64_t p_end) {
    std::vector<float> xt(static_cast<size_t>(kBlock * n)), st(static_cast<size_t>(kBlock * kBlock));
    for (int64_t part = p_begin; part < p_end; ++part)
      for (int64_t jb = part; jb < blocks; jb += 2) column(jb, xt, st);
  });
  return u;
}

}  // namespace

GptqFactor gptq_factor(const InputStats& stats, double damp) {
  const int64_t k = stats.k;
  const double tokens = double(std::max<int64_t>(stats.tokens, 1));
  // H = G / tokens, read from G's lower triangle as it is needed (no copy of
  // H: for the widest inputs, K^2 doubles are most of the build's memory). A
  // channel that never saw a nonzero input gets H_jj = 1 (its weights do not
  // matter on the calibration text).
  std::vector<double> diag(static_cast<size_t>(k));
  double mean_diag = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double d = stats.gram[size_t(i * k + i)] / tokens;
    diag[size_t(i)] = d == 0.0 ? 1.0 : d;
    mean_diag += diag[size_t(i)];
  }
  mean_diag /= double(k);

  GptqFactor f;
  f.k = k;
  for (double scale = damp; scale <= damp * 100 + 1e-12; scale *= 10) {
    // J H J (indices reversed), lower triangle: a[i][j] = H[k-1-i][k-1-j],
    // which G holds in its lower triangle as G[k-1-j][k-1-i] (j < i). In
    // tiles, so that both sides stay in cache (one of them is read across rows).
    std::vector<float> a(static_cast<size_t>(k * k), 0.0f);
    constexpr int64_t kTile = 64;
    for (int64_t s0 = 0; s0 < k; s0 += kTile)
      for (int64_t t0 = 0; t0 <= s0; t0 += kTile)
        for (int64_t gs = s0; gs < std::min(k, s0 + kTile); ++gs)
          for (int64_t gt = t0; gt < std::min(gs, t0 + kTile); ++gt)
            a[size_t((k - 1 - gt) * k + (k - 1 - gs))] = float(stats.gram[size_t(gs * k + gt)] / tokens);
    for (int64_t i = 0; i < k; ++i) a[size_t(i * k + i)] = float(diag[size_t(k - 1 - i)] + scale * mean_diag);
    if (!lower_cholesky(a, k)) continue;
    f.importance.resize(size_t(k));
    for (int64_t i = 0; i < k; ++i) f.importance[size_t(i)] = diag[size_t(i)] + scale * mean_diag;
    a = reversed_lower_inverse(a, k);
    f.u = std::move(a);
    // The lazy batches' feedback blocks, transposed once for every row (the
    // buffer sized once: K^2 / 2 floats, not regrown batch by batch).
    int64_t later_size = 0;
    for (int64_t c0 = 0; c0 < k; c0 += GptqFactor::kLazyColumns) {
      const int64_t c1 = std::min(k, c0 + GptqFactor::kLazyColumns);
      later_size += (k - c1) * (c1 - c0);
    }
    f.later.reserve(size_t(later_size));
    for (int64_t c0 = 0; c0 < k; c0 += GptqFactor::kLazyColumns) {
      const int64_t c1 = std::min(k, c0 + GptqFactor::kLazyColumns), width = c1 - c0;
      f.later_at.push_back(int64_t(f.later.size()));
      const size_t at = f.later.size();
      f.later.resize(at + size_t((k - c1) * width));
      for (int64_t cb = c1; cb < k; cb += 64)  // 64 destination rows at a time, each filled along j
        for (int64_t j = c0; j < c1; ++j)
          for (int64_t c = cb; c < std::min(k, cb + 64); ++c)
            f.later[at + size_t((c - c1) * width + (j - c0))] = f.u[size_t(j * k + c)];
    }
    return f;
  }
  fail("gptq", "the calibration inputs' Gram matrix (" + std::to_string(k) + " channels) is not positive definite");
}

}  // namespace deltagen::quant
