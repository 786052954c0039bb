#include "reference/qwen35_vision_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "deltagen/error.h"
#include "quant/parallel.h"
#include "reference/qwen35_ops.h"

namespace deltagen {
namespace {

// ---- loading --------------------------------------------------------------------

// `name` as fp64, checked to hold exactly `expected` values (the shapes were
// validated when the checkpoint was opened; this guards every buffer read).
std::vector<double> load_vision_vector(const Checkpoint& ck, const std::string& name, int64_t expected) {
  std::vector<double> v = ck.load_f64(name);
  if (int64_t(v.size()) != expected)
    fail(name, "has " + std::to_string(v.size()) + " values, the vision config implies " + std::to_string(expected));
  return v;
}

Matrix64 load_vision_matrix(const Checkpoint& ck, const std::string& name, int64_t rows, int64_t cols) {
  Matrix64 m;
  m.rows = rows;
  m.cols = cols;
  m.data = load_vision_vector(ck, name, rows * cols);  // a [D, C, T, P, P] conv weight is [D][C*T*P*P] row-major
  return m;
}

// ---- whole-matrix helpers (the per-row math is in qwen35_ops.h) ---------------------

// y = x w^T + b: x [N][in], w [out][in] -> [N][out]. Split over threads by
// output rows when large, as the text reference does; each value is the
// same dot product whatever the split.
template <class A>
Matrix64 affine(const Matrix64& x, const A& a) {
  Matrix64 y(x.rows, a.w.rows);
  const int threads = x.rows * a.w.rows * a.w.cols >= (int64_t(1) << 22) ? 0 : 1;
  quant::parallel_for(a.w.rows, threads, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < x.rows; ++t)
      for (int64_t o = begin; o < end; ++o) y.row(t)[o] = ref::dot(x.row(t), a.w.row(o), a.w.cols) + a.b[size_t(o)];
  });
  return y;
}

template <class N>
Matrix64 layer_norm_rows(const Matrix64& x, const N& norm, double eps) {
  Matrix64 y = x;
  for (int64_t r = 0; r < y.rows; ++r) ref::layer_norm(y.row(r), norm.w.data(), norm.b.data(), y.cols, eps);
  return y;
}

// The (row, col) patch coordinates of an h x w grid in the processor's
// merge-block-major row order: blocks of merge x merge patches in raster
// order, and raster order inside each block.
std::vector<std::array<int64_t, 2>> block_major_coords(int64_t h, int64_t w, int64_t m) {
  std::vector<std::array<int64_t, 2>> rc;
  for (int64_t bh = 0; bh < h / m; ++bh)
    for (int64_t bw = 0; bw < w / m; ++bw)
      for (int64_t ih = 0; ih < m; ++ih)
        for (int64_t iw = 0; iw < m; ++iw) rc.push_back({bh * m + ih, bw * m + iw});
  return rc;
}

// Bilinear sampling with align_corners=True of n points on a table axis of
// `side` entries: point i sits at i * (side - 1) / (n - 1); lo/hi are the
// neighbouring entries and f the weight of hi.
struct AxisSample {
  int64_t lo, hi;
  double f;
};
AxisSample axis_sample(int64_t i, int64_t n, int64_t side) {
  const double src = double(i) * double(side - 1) / double(std::max<int64_t>(n - 1, 1));
  const int64_t lo = int64_t(std::floor(src));
  return {lo, std::min(lo + 1, side - 1), src - double(lo)};
}

}  // namespace

VisionReference::VisionReference(const Checkpoint& ck) {
  if (!ck.has_vision() || !ck.config().vision)
    fail(ck.dir().string(), "the checkpoint has no vision tower (vision_config and visual.* tensors)");
  v_ = *ck.config().vision;
  const int64_t D = v_.hidden_size, I = v_.intermediate_size, M = D * v_.merge_unit();
  if (D <= 0 || v_.num_heads <= 0 || D % v_.num_heads != 0 || v_.head_dim() % 4 != 0 || v_.depth < 0 ||
      v_.spatial_merge_size < 1 || v_.position_side() < 1 ||
      v_.position_side() * v_.position_side() != v_.num_position_embeddings)
    fail(ck.dir().string(), "vision config not supported by the reference (head_dim a multiple of 4, square "
                            "position table)");

  auto affine_of = [&](const std::string& p, int64_t out, int64_t in) {
    return Affine{load_vision_matrix(ck, p + ".weight", out, in), load_vision_vector(ck, p + ".bias", out)};
  };
  auto norm_of = [&](const std::string& p) {
    return Norm{load_vision_vector(ck, p + ".weight", D), load_vision_vector(ck, p + ".bias", D)};
  };
  patch_embed_ = affine_of("visual.patch_embed.proj", D, v_.patch_dim());
  pos_table_ = load_vision_matrix(ck, "visual.pos_embed.weight", v_.num_position_embeddings, D);
  for (int64_t i = 0; i < v_.depth; ++i) {
    const std::string b = "visual.blocks." + std::to_string(i) + ".";
    blocks_.push_back(Block{norm_of(b + "norm1"), norm_of(b + "norm2"), affine_of(b + "attn.qkv", 3 * D, D),
                            affine_of(b + "attn.proj", D, D), affine_of(b + "mlp.linear_fc1", I, D),
                            affine_of(b + "mlp.linear_fc2", D, I)});
  }
  merger_norm_ = norm_of("visual.merger.norm");
  merger_fc1_ = affine_of("visual.merger.linear_fc1", M, M);
  merger_fc2_ = affine_of("visual.merger.linear_fc2", v_.out_hidden_size, M);
  // 1 / theta^(2i / (hd/2)), i < hd/4: each of the two axes takes a quarter
  // of the head, rotated in pairs (i, i + hd/2) like the text model.
  inv_freq_ = ref::rope_inv_freq(v_.rope_theta, v_.head_dim() / 2);
}

Matrix64 VisionReference::encode(const Matrix64& pixel_values, const std::vector<ImageGrid>& grids,
                                 VisionTrace* trace) const {
  const int64_t D = v_.hidden_size, nh = v_.num_heads, hd = v_.head_dim(), m = v_.spatial_merge_size;
  const int64_t side = v_.position_side(), nf = int64_t(inv_freq_.size());
  const double eps = v_.layer_norm_eps;

  // ---- 0. shapes --------------------------------------------------------------------------
  if (pixel_values.cols != v_.patch_dim() || int64_t(pixel_values.data.size()) != pixel_values.rows * pixel_values.cols)
    fail("vision reference", "pixel rows are " + std::to_string(pixel_values.cols) + " values, the vision config "
                             "needs " + std::to_string(v_.patch_dim()) + " (channels x temporal x patch x patch)");
  int64_t N = 0;
  for (const ImageGrid& g : grids) {
    image_token_count(g, m);  // validates the grid
    // Step by step, so that no product of hostile sizes overflows.
    const int64_t rows = pixel_values.rows;
    if (g.t > rows || g.h > rows || g.w > rows || g.h * g.w > rows || g.t * (g.h * g.w) > rows - N)
      fail("vision reference", "the image grids need more than the " + std::to_string(pixel_values.rows) +
                               " pixel rows given");
    N += g.t * g.h * g.w;
  }
  if (N != pixel_values.rows)
    fail("vision reference", "the image grids cover " + std::to_string(N) + " patches, the pixel values have " +
                             std::to_string(pixel_values.rows) + " rows");

  // ---- 1. patch embedding: the Conv3d with kernel = stride is one matmul ---------------------
  Matrix64 x = affine(pixel_values, patch_embed_);  // [N][D]
  if (trace) trace->patch_embed = x;

  // ---- 2. learned position embedding, 3. rotary coordinates, attention segments ------------
  // Per image: the side x side table resampled to h x w (bilinear,
  // align_corners=True), taken in block-major order and repeated for every
  // frame. HF computes the four bilinear weights in fp32; here they are
  // fp64 (a difference of ~4e-7 on the golden image, README section 4).
  Matrix64 pe(N, D);
  std::vector<std::array<int64_t, 2>> coords;  // [N] (row, col)
  std::vector<int64_t> segment_start;          // one segment per frame: bidirectional attention inside it
  int64_t r0 = 0;
  for (const ImageGrid& g : grids) {
    const std::vector<std::array<int64_t, 2>> rc = block_major_coords(g.h, g.w, m);
    for (int64_t ti = 0; ti < g.t; ++ti) {
      segment_start.push_back(r0);
      for (const auto& [row, col] : rc) {
        const AxisSample sh = axis_sample(row, g.h, side), sw = axis_sample(col, g.w, side);
        const int64_t idx[4] = {sh.lo * side + sw.lo, sh.lo * side + sw.hi, sh.hi * side + sw.lo, sh.hi * side + sw.hi};
        const double wt[4] = {(1 - sh.f) * (1 - sw.f), (1 - sh.f) * sw.f, sh.f * (1 - sw.f), sh.f * sw.f};
        double* out = pe.row(r0);
        for (int k = 0; k < 4; ++k)
          for (int64_t d = 0; d < D; ++d) out[d] += wt[k] * pos_table_.row(idx[k])[d];
        coords.push_back({row, col});
        ++r0;
      }
    }
  }
  segment_start.push_back(N);
  for (size_t e = 0; e < x.data.size(); ++e) x.data[e] += pe.data[e];
  if (trace) {
    trace->pos_embed = pe;
    trace->rot_positions = coords;
    trace->blocks.clear();
  }

  // The 2-D rotary of each patch: angles [row * inv_freq, col * inv_freq]
  // (hd/2 of them), applied with rotate_half over the whole head.
  Matrix64 cos(N, 2 * nf), sin(N, 2 * nf);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t i = 0; i < nf; ++i)
      for (int axis = 0; axis < 2; ++axis) {
        const double angle = double(coords[size_t(r)][size_t(axis)]) * inv_freq_[size_t(i)];
        cos.row(r)[axis * nf + i] = std::cos(angle);
        sin.row(r)[axis * nf + i] = std::sin(angle);
      }

  // ---- 4. blocks: x += proj(attn(LN1(x))); x += fc2(gelu_tanh(fc1(LN2(x)))) -----------------
  const double scale = 1.0 / std::sqrt(double(hd));
  for (const Block& b : blocks_) {
    Matrix64 qkv = affine(layer_norm_rows(x, b.norm1, eps), b.qkv);  // [N][3D]: q | k | v, heads inside each
    // Rotate q and k; gather each head's keys and values as [N][hd].
    std::vector<std::vector<double>> keys(size_t(nh), std::vector<double>(size_t(N * hd)));
    std::vector<std::vector<double>> values = keys;
    for (int64_t r = 0; r < N; ++r)
      for (int64_t h = 0; h < nh; ++h) {
        double* q = qkv.row(r) + h * hd;
        double* k = qkv.row(r) + D + h * hd;
        const double* v = qkv.row(r) + 2 * D + h * hd;
        ref::rotate_half(q, cos.row(r), sin.row(r), hd / 2);
        ref::rotate_half(k, cos.row(r), sin.row(r), hd / 2);
        std::copy(k, k + hd, keys[size_t(h)].data() + r * hd);
        std::copy(v, v + hd, values[size_t(h)].data() + r * hd);
      }
    // Bidirectional softmax attention of every patch over its own segment.
    Matrix64 attn(N, D);
    for (size_t s = 0; s + 1 < segment_start.size(); ++s) {
      const int64_t begin = segment_start[s], len = segment_start[s + 1] - begin;
      for (int64_t r = begin; r < begin + len; ++r)
        for (int64_t h = 0; h < nh; ++h)
          ref::attend(qkv.row(r) + h * hd, keys[size_t(h)].data() + begin * hd, values[size_t(h)].data() + begin * hd,
                      len, hd, scale, attn.row(r) + h * hd);
    }
    Matrix64 o = affine(attn, b.proj);
    for (size_t e = 0; e < x.data.size(); ++e) x.data[e] += o.data[e];

    Matrix64 f = affine(layer_norm_rows(x, b.norm2, eps), b.fc1);  // [N][I]
    for (double& e : f.data) e = ref::gelu_tanh(e);
    Matrix64 y = affine(f, b.fc2);
    for (size_t e = 0; e < x.data.size(); ++e) x.data[e] += y.data[e];
    if (trace) trace->blocks.push_back(x);
  }

  // ---- 5. merger: LN per patch, 4 consecutive rows (one 2x2 block) -> 1, fc1, erf GELU, fc2 ----
  Matrix64 normed = layer_norm_rows(x, merger_norm_, eps);
  Matrix64 merged;  // [N / merge^2][merge^2 * D]: the same values, rows concatenated
  merged.rows = N / v_.merge_unit();
  merged.cols = D * v_.merge_unit();
  merged.data = std::move(normed.data);
  Matrix64 hidden = affine(merged, merger_fc1_);
  for (double& e : hidden.data) e = ref::gelu_erf(e);
  return affine(hidden, merger_fc2_);  // [N / merge^2][out_hidden]
}

}  // namespace deltagen
