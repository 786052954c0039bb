#include "reference/qwen35_ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "vision/mrope_positions.h"

namespace deltagen::ref {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

void softmax(double* x, int64_t n) {
  double top = x[0], sum = 0;
  for (int64_t i = 1; i < n; ++i) top = std::max(top, x[i]);
  for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - top));
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

// Four independent partial sums: this loop is the hot spot of every Linear in
// the reference model, and one serial sum would stall on the add latency
// (about 3x slower).
double dot(const double* a, const double* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

namespace {
double inverse_rms(const double* x, int64_t n, double eps) { return 1.0 / std::sqrt(dot(x, x, n) / double(n) + eps); }
}  // namespace

void rms_norm(double* x, const double* w, int64_t n, double eps) {
  const double inv = inverse_rms(x, n, eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
}

void offset_rms_norm(double* x, const double* w, int64_t n, double eps) {
  const double inv = inverse_rms(x, n, eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * (1.0 + w[i]);
}

void layer_norm(double* x, const double* w, const double* b, int64_t n, double eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= double(n);
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(var / double(n) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - mean) * inv * w[i] + b[i];
}

void gated_rms_norm(double* x, const double* z, const double* w, int64_t n, double eps) {
  const double inv = inverse_rms(x, n, eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i] * silu(z[i]);
}

void l2_normalize(double* x, int64_t n, double eps) {
  const double inv = 1.0 / std::sqrt(dot(x, x, n) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

std::vector<double> rope_inv_freq(double theta, int64_t rotary_dim) {
  std::vector<double> inv_freq;
  for (int64_t i = 0; i < rotary_dim / 2; ++i) inv_freq.push_back(std::pow(theta, -double(2 * i) / double(rotary_dim)));
  return inv_freq;
}

void rotate_half(double* x, const double* cos, const double* sin, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const double a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];         // x * cos + rotate_half(x) * sin, first half: -b
    x[i + half] = b * cos[i] + a * sin[i];  // second half: +a
  }
}

void mrope(double* x, const std::vector<double>& inv_freq, const int64_t section[3], int64_t pt, int64_t ph,
           int64_t pw) {
  const int64_t half = int64_t(inv_freq.size());
  std::vector<double> cos(inv_freq.size()), sin(inv_freq.size());
  for (int64_t j = 0; j < half; ++j) {
    const int stream = mrope_stream(j, section[1], section[2]);
    const int64_t p = stream == 1 ? ph : stream == 2 ? pw : pt;
    const double angle = double(p) * inv_freq[size_t(j)];
    cos[size_t(j)] = std::cos(angle);
    sin[size_t(j)] = std::sin(angle);
  }
  rotate_half(x, cos.data(), sin.data(), half);
}

void rope(double* x, const std::vector<double>& inv_freq, int64_t position) {
  const int64_t one_stream[3] = {0, 0, 0};  // every frequency takes the T position
  mrope(x, inv_freq, one_stream, position, position, position);
}

double causal_conv_step(double* window, const double* w, int64_t K, double input) {
  std::copy(window + 1, window + K, window);
  window[K - 1] = input;
  return dot(w, window, K);
}

double delta_decay(double neg_exp_a, double a, double dt_bias) { return std::exp(neg_exp_a * softplus(a + dt_bias)); }

void delta_rule_step(double* S, const double* q, const double* k, const double* v, double beta, double decay,
                     int64_t dk, int64_t dv, double* out) {
  for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
  // S^T k: what the memory currently returns for this key.
  std::vector<double> recalled(size_t(dv), 0.0);
  for (int64_t i = 0; i < dk; ++i)
    for (int64_t j = 0; j < dv; ++j) recalled[size_t(j)] += S[i * dv + j] * k[i];
  for (int64_t j = 0; j < dv; ++j) {
    const double delta = beta * (v[j] - recalled[size_t(j)]);
    for (int64_t i = 0; i < dk; ++i) S[i * dv + j] += k[i] * delta;
  }
  std::fill(out, out + dv, 0.0);
  for (int64_t i = 0; i < dk; ++i)
    for (int64_t j = 0; j < dv; ++j) out[j] += S[i * dv + j] * q[i];
}

void attend(const double* q, const double* keys, const double* values, int64_t visible, int64_t hd, double scale,
            double* out) {
  std::vector<double> score(static_cast<size_t>(visible));
  double top = -INFINITY;
  for (int64_t j = 0; j < visible; ++j) {
    score[size_t(j)] = dot(q, keys + j * hd, hd) * scale;
    top = std::max(top, score[size_t(j)]);
  }
  double sum = 0;
  for (double& s : score) sum += (s = std::exp(s - top));  // shifted by the max: no overflow
  std::fill(out, out + hd, 0.0);
  for (int64_t j = 0; j < visible; ++j)
    for (int64_t d = 0; d < hd; ++d) out[d] += score[size_t(j)] / sum * values[j * hd + d];
}

void sigmoid_gate(double* x, const double* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= sigmoid(gate[i]);
}

}  // namespace deltagen::ref
