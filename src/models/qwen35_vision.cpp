// vision.onnx: Qwen3.5's vision tower for one image, top to bottom.
//
//   pixel_values [N, C*T*P*P] -> patch_embed (the Conv3d as a MatMul) + bias
//     + pos_embed (the learned side x side table, bilinearly resampled to the
//       image's patch grid, align_corners)
//   per block: x += proj(MHA(rope(q), rope(k), v)) of LayerNorm1(x)
//              x += fc2(gelu_tanh(fc1(LayerNorm2(x))))
//   merger:    LayerNorm, every 4 consecutive rows (one 2x2 block) as one row,
//              fc1, exact GELU, fc2 -> image_features [N/4, out_hidden]
//
// Rows arrive in HF's merge-block-major order: patch p sits at
// row = (p / m^2) / (gw/m) * m + (p % m^2) / m, col = (p / m^2) % (gw/m) * m + p % m.
// Both the position table and the 2-D rotary are indexed by that (row, col),
// computed in the graph from image_grid_thw, so one model serves any size.
#include "models/qwen35_vision.h"

#include <cmath>
#include <optional>

#include "deltagen/error.h"
#include "models/weights.h"

namespace deltagen {
namespace {

using graph::attr;
using graph::kFloat;
using graph::kInt64;
using graph::kMsDomain;

class VisionGraph {
 public:
  VisionGraph(const Checkpoint& ckpt, const BuildOptions& opts, graph::GraphBuilder& b)
      : ckpt_(ckpt), v_(*ckpt.config().vision), opts_(opts), b_(b) {
    if (is_quantized(opts.vision_precision)) {
      quant::BlockFormat f;
      f.bits = opts.vision_precision == Precision::Int4 ? 4 : 8;
      f.block_size = opts.block_size;
      f.symmetric = true;
      format_ = f;
    }
  }

  void build() {
    const int64_t D = v_.hidden_size;
    b_.input(vision_io::kPixelValues, kFloat, {std::string("num_patches"), v_.patch_dim()});
    b_.input(vision_io::kImageGridThw, kInt64, {int64_t(1), int64_t(3)});
    patch_coordinates();

    std::string x = linear("/visual/patch_embed/proj", vision_io::kPixelValues, "visual.patch_embed.proj",
                           patch_embed_weight());
    x = b_.op("Add", "/visual/pos_embed/Add", {x, position_embedding()});               // [N, D]
    x = b_.op("Unsqueeze", "/visual/Unsqueeze", {x, b_.constant_i64({0})});             // [1, N, D]
    rotary_tables();
    for (int64_t i = 0; i < v_.depth; ++i) x = block(i, x);

    const std::string m = "/visual/merger";
    std::string normed = layer_norm(m + "/norm", x, "visual.merger.norm");
    std::string grouped = b_.op("Reshape", m + "/Reshape", {normed, b_.constant_i64({-1, D * v_.merge_unit()})});
    std::string h = linear(m + "/linear_fc1", grouped, "visual.merger.linear_fc1");
    h = b_.op("Gelu", m + "/act_fn/Gelu", {h});  // exact erf GELU (nn.GELU())
    std::string out = linear(m + "/linear_fc2", h, "visual.merger.linear_fc2");
    b_.node("Identity", m + "/Identity", {out}, {}, "", 1, {vision_io::kImageFeatures});
    b_.output(vision_io::kImageFeatures, kFloat, {std::string("num_image_tokens"), v_.out_hidden_size});
  }

 private:
  std::string i64(int64_t v) { return b_.constant_i64_scalar(v); }
  std::string f32(float v) { return b_.constant_f32_scalar(v); }

  // row_ and col_ [N] of every patch (int64), and their float copies.
  void patch_coordinates() {
    const std::string p = "/visual/patch_coords";
    const int64_t m = v_.spatial_merge_size;
    std::string grid = b_.op("Reshape", p + "/grid/Reshape", {vision_io::kImageGridThw, b_.constant_i64({3})});
    grid_h_ = b_.op("Gather", p + "/grid_h/Gather", {grid, i64(1)}, {attr("axis", 0)});
    grid_w_ = b_.op("Gather", p + "/grid_w/Gather", {grid, i64(2)}, {attr("axis", 0)});
    std::string shape = b_.op("Shape", p + "/Shape", {vision_io::kPixelValues});
    std::string n = b_.op("Gather", p + "/num_patches/Gather", {shape, i64(0)}, {attr("axis", 0)});
    index_ = b_.op("Range", p + "/Range", {i64(0), n, i64(1)});  // [N]
    std::string block = b_.op("Div", p + "/block/Div", {index_, i64(m * m)});
    std::string within = b_.op("Mod", p + "/within/Mod", {index_, i64(m * m)});
    std::string blocks_per_row = b_.op("Div", p + "/blocks_per_row/Div", {grid_w_, i64(m)});
    std::string bh = b_.op("Div", p + "/block_row/Div", {block, blocks_per_row});
    std::string bw = b_.op("Mod", p + "/block_col/Mod", {block, blocks_per_row});
    std::string ih = b_.op("Div", p + "/inner_row/Div", {within, i64(m)});
    std::string iw = b_.op("Mod", p + "/inner_col/Mod", {within, i64(m)});
    row_ = b_.op("Add", p + "/row/Add", {b_.op("Mul", p + "/row/Mul", {bh, i64(m)}), ih});
    col_ = b_.op("Add", p + "/col/Add", {b_.op("Mul", p + "/col/Mul", {bw, i64(m)}), iw});
    row_f_ = b_.op("Cast", p + "/row/Cast", {row_}, {attr("to", int64_t(kFloat))});
    col_f_ = b_.op("Cast", p + "/col/Cast", {col_}, {attr("to", int64_t(kFloat))});
  }

  // Bilinear resampling (align_corners) of the learned side x side table at
  // each patch: on each axis src = i * (side - 1) / max(n - 1, 1).
  struct Axis {
    std::string lo, hi, frac;  // float [N]
  };
  Axis resample_axis(const std::string& p, const std::string& coord_f, const std::string& n) {
    const float last = float(v_.position_side() - 1);
    std::string n_f = b_.op("Cast", p + "/n/Cast", {n}, {attr("to", int64_t(kFloat))});
    std::string denom = b_.op("Max", p + "/denom/Max", {b_.op("Sub", p + "/denom/Sub", {n_f, f32(1)}), f32(1)});
    std::string step = b_.op("Div", p + "/step/Div", {f32(last), denom});
    std::string src = b_.op("Mul", p + "/src/Mul", {coord_f, step});
    Axis a;
    a.lo = b_.op("Floor", p + "/lo/Floor", {src});
    a.hi = b_.op("Min", p + "/hi/Min", {b_.op("Add", p + "/hi/Add", {a.lo, f32(1)}), f32(last)});
    a.frac = b_.op("Sub", p + "/frac/Sub", {src, a.lo});
    return a;
  }

  std::string position_embedding() {
    const std::string p = "/visual/pos_embed";
    const float side = float(v_.position_side());
    Axis r = resample_axis(p + "/rows", row_f_, grid_h_);
    Axis c = resample_axis(p + "/cols", col_f_, grid_w_);
    std::string table = b_.initializer(float_weight(ckpt_, "visual.pos_embed.weight", "visual.pos_embed.weight", kFloat));
    auto one_minus = [&](const std::string& name, const std::string& f) {
      return b_.op("Sub", name, {f32(1), f});
    };
    std::string r0 = one_minus(p + "/rows/1-frac", r.frac), c0 = one_minus(p + "/cols/1-frac", c.frac);
    // (row term, col term, weight of the row term, weight of the col term) of the four corners
    struct Corner {
      const char* name;
      std::string row, col, wr, wc;
    };
    const Corner corners[] = {{"lo_lo", r.lo, c.lo, r0, c0},
                              {"lo_hi", r.lo, c.hi, r0, c.frac},
                              {"hi_lo", r.hi, c.lo, r.frac, c0},
                              {"hi_hi", r.hi, c.hi, r.frac, c.frac}};
    std::string sum;
    for (const Corner& k : corners) {
      const std::string q = p + "/" + k.name;
      std::string flat = b_.op("Add", q + "/index/Add", {b_.op("Mul", q + "/index/Mul", {k.row, f32(side)}), k.col});
      std::string index = b_.op("Cast", q + "/index/Cast", {flat}, {attr("to", int64_t(kInt64))});
      std::string rows = b_.op("Gather", q + "/Gather", {table, index}, {attr("axis", 0)});  // [N, D]
      std::string w = b_.op("Mul", q + "/weight/Mul", {k.wr, k.wc});                     // [N]
      std::string w2 = b_.op("Unsqueeze", q + "/weight/Unsqueeze", {w, b_.constant_i64({1})});
      std::string term = b_.op("Mul", q + "/Mul", {rows, w2});
      sum = sum.empty() ? term : b_.op("Add", q + "/Add", {sum, term});
    }
    return sum;
  }

  // cos/sin [N, head_dim / 2] of the 2-D rotary: the first half of the
  // angles are row * inv_freq, the second col * inv_freq (hd/4 frequencies).
  void rotary_tables() {
    const std::string p = "/visual/rotary_emb";
    const int64_t quarter = v_.head_dim() / 4;
    std::vector<float> inv(static_cast<size_t>(quarter));
    for (int64_t i = 0; i < quarter; ++i)
      inv[size_t(i)] = float(1.0 / std::pow(v_.rope_theta, double(2 * i) / double(v_.head_dim() / 2)));
    std::string inv_freq = b_.initializer(computed_weight("visual.rotary_emb.inv_freq", {1, quarter}, inv, kFloat));
    auto angles = [&](const std::string& name, const std::string& coord_f) {
      std::string c = b_.op("Unsqueeze", name + "/Unsqueeze", {coord_f, b_.constant_i64({1})});  // [N, 1]
      return b_.op("Mul", name + "/Mul", {c, inv_freq});                                        // [N, hd/4]
    };
    std::string theta = b_.op("Concat", p + "/Concat",
                              {angles(p + "/rows", row_f_), angles(p + "/cols", col_f_)}, {attr("axis", int64_t(1))});
    cos_ = b_.op("Cos", p + "/Cos", {theta});
    sin_ = b_.op("Sin", p + "/Sin", {theta});
    rope_positions_ = b_.op("Unsqueeze", p + "/positions/Unsqueeze", {index_, b_.constant_i64({0})});  // [1, N]
  }

  std::string block(int64_t i, const std::string& x) {
    const std::string p = "/visual/blocks." + std::to_string(i);
    const std::string c = "visual.blocks." + std::to_string(i) + ".";
    const int64_t D = v_.hidden_size;

    std::string h = layer_norm(p + "/norm1", x, c + "norm1");
    std::string qkv = linear(p + "/attn/qkv", h, c + "attn.qkv");  // [1, N, 3D]: q, then k, then v
    auto parts = b_.node("Split", p + "/attn/qkv/Split", {qkv, b_.constant_i64({D, D, D})}, {attr("axis", int64_t(-1))},
                         "", 3);
    std::string q = rope(p + "/attn/q_rotary", parts[0]);
    std::string k = rope(p + "/attn/k_rotary", parts[1]);
    std::string a = b_.op("MultiHeadAttention", p + "/attn/MultiHeadAttention", {q, k, parts[2]},
                          {attr("num_heads", v_.num_heads),
                           attr("scale", float(1.0 / std::sqrt(double(v_.head_dim()))))},
                          kMsDomain);  // bidirectional: no mask
    std::string x1 = b_.op("Add", p + "/attn/residual/Add", {x, linear(p + "/attn/proj", a, c + "attn.proj")});

    std::string h2 = layer_norm(p + "/norm2", x1, c + "norm2");
    std::string up = linear(p + "/mlp/linear_fc1", h2, c + "mlp.linear_fc1");
    std::string act = b_.op("Gelu", p + "/mlp/act_fn/Gelu", {up}, {attr("approximate", "tanh")});
    return b_.op("Add", p + "/mlp/residual/Add", {x1, linear(p + "/mlp/linear_fc2", act, c + "mlp.linear_fc2")});
  }

  std::string rope(const std::string& path, const std::string& x) {
    return b_.op("RotaryEmbedding", path + "/RotaryEmbedding", {x, rope_positions_, cos_, sin_},
                 {attr("interleaved", int64_t(0)), attr("num_heads", v_.num_heads)}, kMsDomain);
  }

  std::string layer_norm(const std::string& path, const std::string& x, const std::string& tensor) {
    return b_.op("LayerNormalization", path + "/LayerNorm",
                 {x, bias(tensor + ".weight"), bias(tensor + ".bias")},
                 {attr("axis", int64_t(-1)), attr("epsilon", float(v_.layer_norm_eps))});
  }

  // x @ W^T + b for the checkpoint Linear `tensor` (.weight [out, in], .bias
  // [out]): a MatMul on fp32 weights, or MatMulNBits on block-quantized ones.
  // `weight`: an fp32 [in, out] initializer instead of tensor.weight (the Conv3d's).
  std::string linear(const std::string& path, const std::string& x, const std::string& tensor,
                     const std::string& weight = "") {
    std::string y;
    if (format_ && weight.empty()) {
      QuantizedWeight w = quantized_weight(ckpt_, {tensor + ".weight"}, tensor + ".weight", *format_, kFloat,
                                           opts_.threads);
      b_.initializer(w.packed);
      b_.initializer(w.scales);
      y = b_.op("MatMulNBits", path + (format_->bits == 4 ? "/MatMul_Q4" : "/MatMul_Q8"), {x, w.packed.name, w.scales.name},
                {attr("K", w.k), attr("N", w.n), attr("bits", int64_t(format_->bits)),
                 attr("block_size", format_->block_size), attr("accuracy_level", int64_t(4))},
                kMsDomain);
    } else {
      y = b_.op("MatMul", path + "/MatMul", {x, weight.empty() ? weight_t(tensor + ".weight") : weight});
    }
    return b_.op("Add", path + "/Add", {y, bias(tensor + ".bias")});
  }

  std::string weight_t(const std::string& tensor) {  // [in, out]
    return b_.initializer(matmul_weight(ckpt_, {tensor}, tensor, kFloat, 1));
  }
  std::string bias(const std::string& tensor) {
    return b_.initializer(float_weight(ckpt_, tensor, tensor, kFloat));
  }

  // The Conv3d kernel [D, C, T, P, P] flattened to [D, C*T*P*P] (the patch
  // row's element order) and transposed to [C*T*P*P, D].
  std::string patch_embed_weight() {
    const int64_t D = v_.hidden_size, K = v_.patch_dim();
    const Checkpoint* ck = &ckpt_;
    graph::Initializer init;
    init.name = "visual.patch_embed.proj.weight";
    init.dtype = kFloat;
    init.dims = {K, D};
    init.produce = [ck, D, K]() -> graph::WeightBuffer {
      std::vector<float> w = ck->load_f32("visual.patch_embed.proj.weight");  // [D][K]
      std::vector<float> t(size_t(K * D));
      for (int64_t d = 0; d < D; ++d)
        for (int64_t k = 0; k < K; ++k) t[size_t(k * D + d)] = w[size_t(d * K + k)];
      return t;
    };
    return b_.initializer(std::move(init));
  }

  const Checkpoint& ckpt_;
  const VisionConfig& v_;
  const BuildOptions& opts_;
  graph::GraphBuilder& b_;
  std::optional<quant::BlockFormat> format_;  // quantized Linear weights (--vision-precision int8/int4)
  std::string grid_h_, grid_w_, index_, row_, col_, row_f_, col_f_;
  std::string cos_, sin_, rope_positions_;
};

}  // namespace

void build_qwen35_vision_graph(const Checkpoint& ckpt, const BuildOptions& opts, graph::GraphBuilder& b) {
  if (!ckpt.has_vision()) fail(ckpt.dir().string(), "the checkpoint has no vision tower (vision_config + visual.*)");
  VisionGraph(ckpt, opts, b).build();
}

}  // namespace deltagen
