#include "quant/gptq.h"

#include <cmath>
#include <string>

#include "deltagen/error.h"

namespace deltagen::quant {
namespace {

// H = R R^T, R upper triangular, by elimination from the last index down;
// `a` holds H's lower triangle and is consumed. False when H is not positive definite.
bool upper_cholesky(std::vector<double>& a, int64_t k, std::vector<double>& r) {
  r.assign(size_t(k * k), 0.0);
  std::vector<double> col(static_cast<size_t>(k));
  for (int64_t j = k - 1; j >= 0; --j) {
    const double pivot = a[size_t(j * k + j)];
    if (!(pivot > 0.0) || !std::isfinite(pivot)) return false;
    const double d = std::sqrt(pivot);
    r[size_t(j * k + j)] = d;
    // Column j of R above the diagonal: H[i][j] / d for i < j (H[i][j] = a[j][i]).
    const double* aj = a.data() + j * k;
    for (int64_t i = 0; i < j; ++i) col[size_t(i)] = aj[i] / d;
    for (int64_t i = 0; i < j; ++i) r[size_t(i * k + j)] = col[size_t(i)];
    // The rest of H loses this column's part: a[i][0..i] -= col[i] * col[0..i].
    for (int64_t i = 0; i < j; ++i) {
      double* ai = a.data() + i * k;
      const double ci = col[size_t(i)];
      for (int64_t l = 0; l <= i; ++l) ai[l] -= ci * col[size_t(l)];
    }
  }
  return true;
}

// U = R^-1 for upper triangular R, row by row from the last:
// U[i][c] = -(sum_{m > i} R[i][m] U[m][c]) / R[i][i] for c > i.
std::vector<float> upper_inverse(const std::vector<double>& r, int64_t k) {
  std::vector<double> u(static_cast<size_t>(k * k), 0.0), acc(static_cast<size_t>(k));
  for (int64_t i = k - 1; i >= 0; --i) {
    std::fill(acc.begin() + i, acc.end(), 0.0);
    const double* ri = r.data() + i * k;
    for (int64_t m = i + 1; m < k; ++m) {
      const double rim = ri[m];
      if (rim == 0.0) continue;
      const double* um = u.data() + m * k;
      for (int64_t c = m; c < k; ++c) acc[size_t(c)] += rim * um[c];
    }
    double* ui = u.data() + i * k;
    ui[i] = 1.0 / ri[i];
    for (int64_t c = i + 1; c < k; ++c) ui[c] = -acc[size_t(c)] / ri[i];
  }
  return std::vector<float>(u.begin(), u.end());
}

}  // namespace

GptqFactor gptq_factor(const InputStats& stats, double damp) {
  const int64_t k = stats.k;
  const double tokens = double(std::max<int64_t>(stats.tokens, 1));
  // H's lower triangle; a channel that never saw a nonzero input gets H_jj = 1
  // (its weights do not matter on the calibration text).
  std::vector<double> h(size_t(k * k), 0.0);
  double mean_diag = 0;
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j <= i; ++j) h[size_t(i * k + j)] = stats.gram[size_t(i * k + j)] / tokens;
    if (h[size_t(i * k + i)] == 0.0) h[size_t(i * k + i)] = 1.0;
    mean_diag += h[size_t(i * k + i)];
  }
  mean_diag /= double(k);

  GptqFactor f;
  f.k = k;
  std::vector<double> r;
  for (double scale = damp; scale <= damp * 100 + 1e-12; scale *= 10) {
    std::vector<double> a = h;
    for (int64_t i = 0; i < k; ++i) a[size_t(i * k + i)] += scale * mean_diag;
    if (!upper_cholesky(a, k, r)) continue;
    f.importance.resize(size_t(k));
    for (int64_t i = 0; i < k; ++i) f.importance[size_t(i)] = h[size_t(i * k + i)] + scale * mean_diag;
    f.u = upper_inverse(r, k);
    return f;
  }
  fail("gptq", "the calibration inputs' Gram matrix (" + std::to_string(k) + " channels) is not positive definite");
}

}  // namespace deltagen::quant
