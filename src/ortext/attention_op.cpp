#include "ortext/attention_op.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gated_qkv.h"
#include "ortext/deltagen_ops.h"
#include "ortext/kernel_attributes.h"
#include "ortext/ort_parallel.h"
#include "ortext/shape_inference.h"
#include "deltagen/error.h"

namespace deltagen::ortext {
namespace {

enum Input : size_t { kQuery = 0, kKey, kValue, kPastKey, kPastValue, kSeqlens, kTotal, kCos, kSin, kQNorm, kKNorm };
constexpr const char* kOp = "deltagen.GroupQueryAttention";

std::vector<int64_t> shape_of(const Ort::ConstValue& v) { return v.GetTensorTypeAndShapeInfo().GetShape(); }

}  // namespace

AttentionKernel::AttentionKernel(const OrtKernelInfo* raw_info) {
  Ort::ConstKernelInfo info(raw_info);
  heads_ = info.GetAttribute<int64_t>("num_heads");
  kv_heads_ = info.GetAttribute<int64_t>("kv_num_heads");
  scale_ = attribute_or<float>(info, "scale", 0.0f);
  rotary_ = attribute_or<int64_t>(info, "do_rotary", 0) != 0;
  if (heads_ < 1 || kv_heads_ < 1 || heads_ % kv_heads_ != 0)
    fail(kOp, "num_heads must be a positive multiple of kv_num_heads");
  gated_head_dim_ = attribute_or<int64_t>(info, kGatedQkvAttribute, 0);
  q_norm_epsilon_ = attribute_or<float>(info, kQNormEpsilonAttribute, 0.0f);
  k_norm_epsilon_ = attribute_or<float>(info, kKNormEpsilonAttribute, 0.0f);
  if (gated_head_dim_ < 0 || !(q_norm_epsilon_ >= 0) || !(k_norm_epsilon_ >= 0))
    fail(kOp, "bad deltagen_gated_qkv attributes");
}

OrtStatusPtr AttentionKernel::ComputeV2(OrtKernelContext* context) noexcept {
  try {
    Ort::KernelContext ctx(context);
    Ort::ConstValue q = ctx.GetInput(kQuery);
    Ort::ConstValue past_k = ctx.GetInput(kPastKey), past_v = ctx.GetInput(kPastValue);
    std::vector<int64_t> qd = shape_of(q);
    const std::vector<int64_t> pd = shape_of(past_k);
    if (qd.size() != 3 || pd.size() != 4 || pd[1] != kv_heads_) fail(kOp, "unexpected query or past_key rank");
    kernels::AttentionShape s;
    s.batch = qd[0];
    s.seq = qd[1];
    s.heads = heads_;
    s.kv_heads = kv_heads_;
    s.head_dim = pd[3];
    // The gated form: q, gate, k, v split out of the packed projection, q and
    // k normalized (decode reuses one buffer per thread, a prompt's is freed).
    const kernels::GatedQkvShape gs{s.batch * s.seq, heads_, kv_heads_, s.head_dim};
    thread_local std::vector<float> decode_scratch;
    std::vector<float> prompt_scratch;
    const float *k_data = nullptr, *v_data = nullptr, *q_data = nullptr, *gate = nullptr;
    std::vector<int64_t> kd;
    if (gated_head_dim_) {
      if (gated_head_dim_ != s.head_dim || qd[2] != gs.width())
        fail(kOp, "the packed projection must be [batch, seq, " + std::to_string(gs.width()) + "]");
      Ort::ConstValue qw = ctx.GetInput(kQNorm), kw = ctx.GetInput(kKNorm);
      if (!qw || !kw || qw.GetTensorTypeAndShapeInfo().GetElementCount() != size_t(s.head_dim) ||
          kw.GetTensorTypeAndShapeInfo().GetElementCount() != size_t(s.head_dim))
        fail(kOp, "the q and k norm weights must have head_dim values");
      std::vector<float>& scratch = gs.rows <= 4 ? decode_scratch : prompt_scratch;
      const int64_t q_size = gs.rows * heads_ * s.head_dim, kv_size = gs.rows * kv_heads_ * s.head_dim;
      scratch.resize(size_t(2 * q_size + 2 * kv_size));
      float* split = scratch.data();
      kernels::split_gated_qkv(gs, q.GetTensorData<float>(), qw.GetTensorData<float>(), q_norm_epsilon_,
                               kw.GetTensorData<float>(), k_norm_epsilon_, split, split + q_size, split + 2 * q_size,
                               split + 2 * q_size + kv_size, OrtParallel(ctx));
      q_data = split;
      gate = split + q_size;
      k_data = split + 2 * q_size;
      v_data = k_data + kv_size;
      qd[2] = heads_ * s.head_dim;
      kd = {s.batch, s.seq, kv_heads_ * s.head_dim};
    } else {
      Ort::ConstValue k = ctx.GetInput(kKey), v = ctx.GetInput(kValue);
      if (!k || !v) fail(kOp, "key and value are missing");
      kd = shape_of(k);
      if (shape_of(v) != kd) fail(kOp, "key and value shapes do not agree");
      q_data = q.GetTensorData<float>();
      k_data = k.GetTensorData<float>();
      v_data = v.GetTensorData<float>();
    }
    Ort::ConstValue total = ctx.GetInput(kTotal);
    if (total.GetTensorTypeAndShapeInfo().GetElementCount() != 1) fail(kOp, "total_sequence_length must be a scalar");
    // As ORT: present holds max(total, past) positions, so a buffer shared
    // with past keeps its capacity, and a growing cache grows to the total.
    s.capacity = std::max<int64_t>(pd[2], total.GetTensorData<int32_t>()[0]);
    if (qd[2] != heads_ * s.head_dim || kd != std::vector<int64_t>{s.batch, s.seq, kv_heads_ * s.head_dim} ||
        shape_of(past_v) != pd || pd[0] != s.batch)
      fail(kOp, "query, key, value and past shapes do not agree");
    Ort::ConstValue seqlens = ctx.GetInput(kSeqlens);
    if (int64_t(seqlens.GetTensorTypeAndShapeInfo().GetElementCount()) != s.batch)
      fail(kOp, "seqlens_k must have one value per row");

    kernels::AttentionTensors t;
    if (rotary_) {
      Ort::ConstValue cos = ctx.GetInput(kCos), sin = ctx.GetInput(kSin);
      if (!cos || !sin) fail(kOp, "do_rotary needs cos_cache and sin_cache");
      const std::vector<int64_t> cd = shape_of(cos);
      if (cd.size() != 2 || shape_of(sin) != cd || 2 * cd[1] > s.head_dim) fail(kOp, "bad cos/sin cache shape");
      s.rotary_dim = 2 * cd[1];
      s.rotary_positions = cd[0];
      t.cos = cos.GetTensorData<float>();
      t.sin = sin.GetTensorData<float>();
    }
    t.q = q_data;
    t.k = k_data;
    t.v = v_data;
    t.seqlens_k = seqlens.GetTensorData<int32_t>();
    t.out = ctx.GetOutput(0, qd).GetTensorMutableData<float>();
    const std::vector<int64_t> present_dims = {pd[0], pd[1], s.capacity, pd[3]};
    t.k_cache = ctx.GetOutput(1, present_dims).GetTensorMutableData<float>();
    t.v_cache = ctx.GetOutput(2, present_dims).GetTensorMutableData<float>();
    // Not the same buffer: the past positions move into present first.
    auto copy_past = [&](const float* past, float* present) {
      if (past == present || pd[2] == 0) return;  // an empty past may have no data pointer
      const size_t rows = size_t(pd[2] * pd[3]) * sizeof(float);
      for (int64_t bg = 0; bg < pd[0] * pd[1]; ++bg)
        std::memcpy(present + bg * s.capacity * pd[3], past + bg * pd[2] * pd[3], rows);
    };
    copy_past(past_k.GetTensorData<float>(), t.k_cache);
    copy_past(past_v.GetTensorData<float>(), t.v_cache);
    const float scale = scale_ != 0 ? scale_ : float(1.0 / std::sqrt(double(s.head_dim)));
    kernels::attention(s, scale, t, OrtParallel(ctx));
    if (gate) kernels::apply_sigmoid_gate(t.out, gate, gs.rows, heads_ * s.head_dim, OrtParallel(ctx));
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_RUNTIME_EXCEPTION).release();
  }
}

OrtStatusPtr AttentionOp::CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const noexcept {
  try {
    *kernel = new AttentionKernel(info);
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
}

OrtStatusPtr AttentionOp::infer_output_shape(const OrtCustomOp*, OrtShapeInferContext* context) {
  try {
    const OrtOpAttr* gated = optional_attribute(context, kGatedQkvAttribute);
    if (!gated) return pass_through_shapes(context, {{kQuery, 0}, {kPastKey, 1}, {kPastValue, 2}});
    // output 0: [B, S, num_heads * head_dim] from the packed projection's [B, S, ...]
    const OrtOpAttr* heads = optional_attribute(context, "num_heads");
    if (!heads) return Ort::Status("GroupQueryAttention needs num_heads", ORT_INVALID_ARGUMENT).release();
    set_float_shape_with_last_dim(context, kQuery, 0, int_attribute(heads) * int_attribute(gated));
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
  return pass_through_shapes(context, {{kPastKey, 1}, {kPastValue, 2}});
}

}  // namespace deltagen::ortext
