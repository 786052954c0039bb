#include "quant/gptq.h"

#include <cmath>
#include <string>

#include "deltagen/error.h"
#include "quant/parallel.h"

namespace deltagen::quant {
namespace {

// Pivots per panel of the factorization and columns per group of the
// inverse: what one pass over the big triangle carries, so that the triangle
// is read once per panel or group instead of once per pivot or column.
constexpr int64_t kPanel = 32;

// Rows [0, n) cut into two parts of equal triangle area (row i costs i).
int64_t triangle_half(int64_t n) { return int64_t(double(n) * std::sqrt(0.5)); }

// H = R R^T, R upper triangular, by elimination from the last index down, in
// panels of kPanel pivots; `a` holds H's lower triangle (row i: a[i][0..i])
// and is consumed. In float, as GPTQ's own implementation factors H (the
// damping keeps it well conditioned). False when H is not positive definite.
bool upper_cholesky(std::vector<float>& a, int64_t k, std::vector<float>& r) {
  r.assign(size_t(k * k), 0.0f);
  // The panel's columns of R: pt[b][i] = R[i][j0 + b] for i < j0 + b.
  std::vector<float> pt(static_cast<size_t>(kPanel * k));
  for (int64_t j1 = k; j1 > 0; j1 -= kPanel) {
    const int64_t j0 = std::max<int64_t>(0, j1 - kPanel);
    for (int64_t j = j1 - 1; j >= j0; --j) {
      // Row j of the lower triangle is column j above the diagonal; it still
      // lacks the parts of this panel's pivots after j.
      float* aj = a.data() + j * k;
      for (int64_t p = j + 1; p < j1; ++p) {
        const float* cp = pt.data() + (p - j0) * k;
        const float rjp = cp[j];
        for (int64_t i = 0; i <= j; ++i) aj[i] -= rjp * cp[i];
      }
      const float pivot = aj[j];
      if (!(pivot > 0.0f) || !std::isfinite(pivot)) return false;
      const float d = std::sqrt(pivot);
      float* cj = pt.data() + (j - j0) * k;
      for (int64_t i = 0; i < j; ++i) cj[i] = aj[i] / d;
      cj[j] = d;
      for (int64_t i = 0; i <= j; ++i) r[size_t(i * k + j)] = cj[i];
    }
    // Rows above the panel lose the panel's part: a[i][0..i] -= sum_b R[i][b] R[0..i][b].
    auto update = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float* ai = a.data() + i * k;
        for (int64_t p = j0; p < j1; ++p) {
          const float* cp = pt.data() + (p - j0) * k;
          const float rip = cp[i];
          for (int64_t l = 0; l <= i; ++l) ai[l] -= rip * cp[l];
        }
      }
    };
    if (j0 < 2 * kPanel) {
      update(0, j0);
    } else {
      const int64_t mid = triangle_half(j0);
      parallel_for(2, 2, 1, [&](int64_t part, int64_t) { part == 0 ? update(0, mid) : update(mid, j0); });
    }
  }
  return true;
}

// U = R^-1 for upper triangular R, in groups of kPanel columns (groups are
// independent: split between threads). Within a group, row by row from the
// last: U[i][c] = -(sum_{m > i} R[i][m] U[m][c]) / R[i][i] for c > i, the
// group's columns held as a [K][kPanel] tile so the sum runs across them.
std::vector<float> upper_inverse(const std::vector<float>& r, int64_t k) {
  std::vector<float> u(static_cast<size_t>(k * k), 0.0f);
  const int64_t groups = (k + kPanel - 1) / kPanel;
  auto solve = [&](int64_t g_begin, int64_t g_end) {
    std::vector<float> tile(static_cast<size_t>(k * kPanel));
    float acc[kPanel];
    for (int64_t g = g_begin; g < g_end; ++g) {
      const int64_t c0 = g * kPanel, c1 = std::min(k, c0 + kPanel);
      std::fill(tile.begin(), tile.end(), 0.0f);  // U[m][c] = 0 for m > c
      for (int64_t i = c1 - 1; i >= 0; --i) {
        const float* ri = r.data() + i * k;
        std::fill(acc, acc + kPanel, 0.0f);
        for (int64_t m = i + 1; m < c1; ++m) {
          const float rim = ri[m];
          const float* tm = tile.data() + m * kPanel;
          for (int64_t c = 0; c < kPanel; ++c) acc[c] += rim * tm[c];
        }
        float* ti = tile.data() + i * kPanel;
        for (int64_t c = c0; c < c1; ++c) {
          if (c < i) continue;
          ti[c - c0] = c == i ? 1.0f / ri[i] : -acc[c - c0] / ri[i];
        }
      }
      for (int64_t i = 0; i < c1; ++i)
        for (int64_t c = std::max(c0, i); c < c1; ++c) u[size_t(i * k + c)] = tile[size_t(i * kPanel + c - c0)];
    }
  };
  // Group g costs about (g + 1)^2: cut where the work is halved.
  const int64_t mid = std::min(groups, int64_t(double(groups) * std::cbrt(0.5)) + 1);
  if (groups < 4) solve(0, groups);
  else parallel_for(2, 2, 1, [&](int64_t part, int64_t) { part == 0 ? solve(0, mid) : solve(mid, groups); });
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
  std::vector<float> r;
  for (double scale = damp; scale <= damp * 100 + 1e-12; scale *= 10) {
    std::vector<float> a(static_cast<size_t>(k * k), 0.0f);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < i; ++j) a[size_t(i * k + j)] = float(stats.gram[size_t(i * k + j)] / tokens);
      a[size_t(i * k + i)] = float(diag[size_t(i)] + scale * mean_diag);
    }
    if (!upper_cholesky(a, k, r)) continue;
    a = {};
    f.importance.resize(size_t(k));
    for (int64_t i = 0; i < k; ++i) f.importance[size_t(i)] = diag[size_t(i)] + scale * mean_diag;
    f.u = upper_inverse(r, k);
    return f;
  }
  fail("gptq", "the calibration inputs' Gram matrix (" + std::to_string(k) + " channels) is not positive definite");
}

}  // namespace deltagen::quant
