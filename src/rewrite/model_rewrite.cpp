#include "rewrite/model_rewrite.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "rewrite/deltagen_domain.h"
#include "rewrite/gated_delta_fusion.h"
#include "rewrite/attention_fusion.h"
#include "rewrite/rmsnorm_fusion.h"
#include "rewrite/swiglu_fusion.h"
#include "rewrite/weight_reshapes.h"

namespace deltagen::rewrite {
namespace {

using Initializers = std::unordered_map<std::string, const onnx::TensorProto*>;

std::optional<int64_t> int_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.i();
  return std::nullopt;
}

// Elements of a tensor, or -1 for a negative dimension or a count past int64
// (found by model_rewrite_fuzz: dims come from the file).
int64_t numel(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

// a * b, or -2 (matches no numel) when it overflows or a factor is negative.
int64_t product(int64_t a, int64_t b) {
  int64_t r = 0;
  return a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) ? -2 : r;
}

std::string input(const onnx::NodeProto& node, int i) { return i < node.input_size() ? node.input(i) : std::string(); }

// Why a node must stay on ORT's kernel, or nullopt when deltagen's can take it.
std::optional<std::string> unsupported_reason(const onnx::NodeProto& node, const Initializers& constants,
                                              const RewriteOptions& options) {
  const auto bits = int_attribute(node, "bits");
  const auto block_size = int_attribute(node, "block_size");
  const auto k = int_attribute(node, "K");
  const auto n = int_attribute(node, "N");
  if (!bits || !block_size || !k || !n) return "missing attributes";
  if (*bits != 4) return "bits=" + std::to_string(*bits);
  const int64_t bs = *block_size;
  if (bs < 16 || bs > 256 || (bs & (bs - 1)) != 0) return "block_size=" + std::to_string(bs);
  const int64_t level = int_attribute(node, "accuracy_level").value_or(0);
  if (level != 4 && !options.any_accuracy_level) return "accuracy_level=" + std::to_string(level);
  if (!input(node, 4).empty()) return "g_idx";

  if (*k < 1 || *n < 1 || *k > (int64_t(1) << 40) || *n > (int64_t(1) << 40)) return "K or N out of range";
  const int64_t k_blocks = (*k + bs - 1) / bs;
  auto constant = [&](int i) -> const onnx::TensorProto* {
    auto it = constants.find(input(node, i));
    return it == constants.end() ? nullptr : it->second;
  };
  const onnx::TensorProto* b = constant(1);
  const onnx::TensorProto* scales = constant(2);
  if (!b || !scales) return "weights not constant";
  if (b->data_type() != onnx::TensorProto_DataType_UINT8 || numel(*b) != product(*n, k_blocks * bs / 2)) return "B layout";
  // The scales share A's type: float scales mean float activations.
  if (scales->data_type() != onnx::TensorProto_DataType_FLOAT || numel(*scales) != product(*n, k_blocks)) return "non-float A";
  if (!input(node, 3).empty()) {
    const onnx::TensorProto* zp = constant(3);
    if (!zp) return "zero points not constant";
    if (zp->data_type() != onnx::TensorProto_DataType_UINT8 || numel(*zp) != product(*n, (k_blocks + 1) / 2))
      return "zero points not packed uint8";
  }
  return std::nullopt;
}

std::optional<std::string> string_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.s();
  return std::nullopt;
}

std::optional<float> float_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.f();
  return std::nullopt;
}

// Why a com.microsoft.QMoE node must stay on ORT's kernel, or nullopt when
// deltagen.QMoE (ortext/moe_op.h) takes it: the builder's int4 form, with
// constant experts of the sizes the kernel expects. Defaults are the schema's.
std::optional<std::string> qmoe_unsupported_reason(const onnx::NodeProto& node, const Initializers& constants) {
  const int64_t bits = int_attribute(node, "expert_weight_bits").value_or(4);
  if (bits != 4) return "QMoE expert_weight_bits=" + std::to_string(bits);
  const auto block_size = int_attribute(node, "block_size");
  if (!block_size) return "QMoE without block_size";
  const int64_t bs = *block_size;
  if (bs < 16 || bs > 256 || (bs & (bs - 1)) != 0) return "QMoE block_size=" + std::to_string(bs);
  if (string_attribute(node, "activation_type").value_or("relu") != "swiglu") return "QMoE activation_type";
  if (int_attribute(node, "swiglu_fusion").value_or(0) != 1) return "QMoE swiglu_fusion";
  if (float_attribute(node, "activation_alpha").value_or(1.0f) != 1.0f ||
      float_attribute(node, "activation_beta").value_or(0.0f) != 0.0f)
    return "QMoE activation_alpha/beta";
  if (const auto limit = float_attribute(node, "swiglu_limit"); limit && !(std::isinf(*limit) && *limit > 0))
    return "QMoE swiglu_limit";
  if (int_attribute(node, "use_sparse_mixer").value_or(0) != 0) return "QMoE use_sparse_mixer";
  if (string_attribute(node, "quant_type").value_or("int") != "int") return "QMoE quant_type";
  if (node.input_size() > 21 || node.output_size() != 1) return "QMoE inputs or outputs";
  if (!input(node, 4).empty() || !input(node, 7).empty()) return "QMoE biases";
  for (int i = 8; i <= 10; ++i)
    if (!input(node, i).empty()) return "QMoE fc3";
  for (int i = 11; i <= 13; ++i)
    if (!input(node, i).empty()) return "QMoE zero points";
  if (!input(node, 14).empty()) return "QMoE router_weights";
  for (int i = 15; i < node.input_size(); ++i)
    if (!input(node, i).empty()) return "QMoE fp4/fp8 scales";

  auto constant = [&](int i) -> const onnx::TensorProto* {
    auto it = constants.find(input(node, i));
    return it == constants.end() ? nullptr : it->second;
  };
  const onnx::TensorProto *fc1 = constant(2), *fc1_scales = constant(3), *fc2 = constant(5), *fc2_scales = constant(6);
  if (!fc1 || !fc1_scales || !fc2 || !fc2_scales) return "QMoE weights not constant";
  // The scales share x's type (ORT's kernels are float/float and fp16/fp16):
  // float scales mean float activations.
  if (fc1_scales->data_type() != onnx::TensorProto_DataType_FLOAT ||
      fc2_scales->data_type() != onnx::TensorProto_DataType_FLOAT)
    return "QMoE non-float scales";
  if (fc1->data_type() != onnx::TensorProto_DataType_UINT8 || fc2->data_type() != onnx::TensorProto_DataType_UINT8 ||
      fc1->dims_size() != 3 || numel(*fc1) < 1)
    return "QMoE weights layout";
  // fc1 [E, 2I, H/2], fc2 [E, H, I/2], scales [E, N, K/block]; H and I multiples of the block.
  const int64_t E = fc1->dims(0), two_i = fc1->dims(1), H = product(fc1->dims(2), 2), I = two_i / 2;
  if (two_i % 2 != 0 || H % bs != 0 || I % bs != 0) return "QMoE weights layout";
  auto dims_are = [](const onnx::TensorProto& t, std::initializer_list<int64_t> want) {
    return std::equal(t.dims().begin(), t.dims().end(), want.begin(), want.end());
  };
  if (!dims_are(*fc2, {E, H, I / 2}) || !dims_are(*fc1_scales, {E, two_i, H / bs}) ||
      !dims_are(*fc2_scales, {E, H, I / bs}))
    return "QMoE weights layout";
  const int64_t k = int_attribute(node, "k").value_or(1);
  if (k < 1 || k > E) return "QMoE k=" + std::to_string(k);
  return std::nullopt;
}

// deltagen's causal conv takes the form the builder emits, in float.
bool causal_conv_supported(const onnx::NodeProto& node, const Initializers& constants) {
  if (int_attribute(node, "ndim").value_or(1) != 1) return false;
  if (int_attribute(node, "channels_last").value_or(0) != 0) return false;
  if (int_attribute(node, "dilation").value_or(1) != 1) return false;
  for (const auto& a : node.attribute())
    if (a.name() == "state_window") return false;
  const std::string act = string_attribute(node, "activation").value_or("none");
  if (act != "silu" && act != "swish" && act != "none") return false;
  auto w = constants.find(input(node, 1));
  if (w == constants.end()) return false;
  const onnx::TensorProto& t = *w->second;
  return t.data_type() == onnx::TensorProto_DataType_FLOAT && t.dims_size() == 3 && t.dims(1) == 1;
}

// deltagen's attention takes the builder's form: float cache shared between
// past and present, no sliding window, softcap, sink, bias or position ids.
bool attention_supported(const onnx::NodeProto& node, const std::map<std::string, int32_t>& input_types) {
  if (node.input_size() > 9 || node.output_size() != 3 || node.input_size() < 7) return false;
  for (const auto& a : node.attribute()) {
    const std::string& n = a.name();
    if (n == "num_heads" || n == "kv_num_heads" || n == "scale" || n == "do_rotary") continue;
    if ((n == "local_window_size" && a.i() == -1) || (n == "rotary_interleaved" && a.i() == 0) ||
        (n == "softcap" && a.f() == 0.0f) || (n == "smooth_softmax" && a.i() == 0))
      continue;
    return false;
  }
  if (int_attribute(node, "do_rotary").value_or(0) != 0 && (input(node, 7).empty() || input(node, 8).empty()))
    return false;
  auto it = input_types.find(input(node, 3));  // past_key: a float graph input
  return it != input_types.end() && it->second == onnx::TensorProto_DataType_FLOAT;
}

// Marks deltagen nodes whose weight inputs are initializers that no other
// node reads in full, so their kernels may release the originals after
// packing (kReleaseWeightsAttribute). A Gather of the table (a tied
// embedding: the lm_head's own quantized rows, through a Reshape) does not
// count: it reads a few rows per token, which fault back in from the file.
int64_t mark_released_weights(onnx::GraphProto& graph, const Initializers& constants) {
  std::unordered_map<std::string, std::vector<std::pair<const onnx::NodeProto*, int>>> uses;
  for (const auto& node : graph.node())
    for (int i = 0; i < node.input_size(); ++i) uses[node.input(i)].push_back({&node, i});
  std::set<std::string> outputs;
  for (const auto& out : graph.output()) outputs.insert(out.name());
  // Whether every use of `value` only gathers rows of it (depth-limited: Reshapes in between).
  std::function<bool(const std::string&, int)> rows_only = [&](const std::string& value, int depth) {
    if (outputs.count(value) || depth > 2) return false;
    for (const auto& [node, index] : uses[value]) {
      const std::string& op = node->op_type();
      if ((op == "Gather" || op == "GatherBlockQuantized") && index != 1) continue;
      if (op == "Reshape" && index == 0 && node->output_size() == 1 && rows_only(node->output(0), depth + 1)) continue;
      return false;
    }
    return true;
  };
  auto readers = [&](const std::string& value) {
    int64_t n = outputs.count(value) ? 1 : 0;
    for (const auto& [node, index] : uses[value]) {
      const std::string& op = node->op_type();
      const bool row_read = ((op == "Gather" || op == "GatherBlockQuantized") && index != 1) ||
                            (op == "Reshape" && index == 0 && node->output_size() == 1 && rows_only(node->output(0), 1));
      n += row_read ? 0 : 1;
    }
    return n;
  };
  int64_t marked = 0;
  for (auto& node : *graph.mutable_node()) {
    if (node.domain() != kDeltagenDomain) continue;
    std::vector<int> weights;  // the inputs the kernel packs
    if (node.op_type() == "MatMulNBits") weights = {1, 2, 3};
    else if (node.op_type() == "QMoE") weights = {2, 3, 5, 6};
    else continue;
    bool exclusive = true;
    for (int i : weights) {
      const std::string name = input(node, i);
      if (name.empty()) continue;
      exclusive &= constants.count(name) && readers(name) == 1;
    }
    if (!exclusive) continue;
    auto* a = node.add_attribute();
    a->set_name(kReleaseWeightsAttribute);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
    ++marked;
  }
  return marked;
}

}  // namespace

RewriteSummary use_deltagen_kernels(onnx::ModelProto& model, const RewriteOptions& options) {
  RewriteSummary summary;
  onnx::GraphProto& graph = *model.mutable_graph();
  if (options.fusions) summary.gated_delta_net = fuse_gated_delta_net(graph);
  // An initializer that is also a graph input can be overridden at run time:
  // not a constant, so its weights could not be packed once.
  std::set<std::string> graph_inputs;
  for (const auto& in : graph.input()) graph_inputs.insert(in.name());
  Initializers constants;
  for (const auto& t : graph.initializer())
    if (!graph_inputs.count(t.name())) constants[t.name()] = &t;

  std::map<std::string, int32_t> input_types;
  for (const auto& in : graph.input())
    if (in.type().has_tensor_type()) input_types[in.name()] = in.type().tensor_type().elem_type();

  for (auto& node : *graph.mutable_node()) {
    if (options.attention && node.op_type() == "GroupQueryAttention" && node.domain() == "com.microsoft" &&
        attention_supported(node, input_types)) {
      node.set_domain(kDeltagenDomain);
      ++summary.attention;
      continue;
    }
    if (options.causal_conv && node.op_type() == "CausalConvWithState" && node.domain() == "com.microsoft" &&
        causal_conv_supported(node, constants)) {
      node.set_domain(kDeltagenDomain);
      ++summary.causal_conv;
      continue;
    }
    if (options.moe && node.op_type() == "QMoE" && node.domain() == "com.microsoft") {
      if (auto reason = qmoe_unsupported_reason(node, constants)) {
        ++summary.kept[*reason];
      } else {
        node.set_domain(kDeltagenDomain);
        ++summary.moe;
      }
      continue;
    }
    if (node.op_type() != "MatMulNBits" || node.domain() != "com.microsoft") continue;
    ++summary.matmul_nbits;
    if (auto reason = unsupported_reason(node, constants, options)) {
      ++summary.kept[*reason];
      continue;
    }
    node.set_domain(kDeltagenDomain);
    ++summary.rewritten;
  }
  if (options.fusions && summary.rewritten > 0) {
    summary.swiglu = fuse_swiglu_into_matmul(graph);
    summary.rmsnorm = fuse_rmsnorm_into_matmul(graph);
  }
  if (options.fusions && summary.attention > 0) summary.gated_attention = fuse_gated_attention(graph);
  if (options.release_weights) {
    summary.aliased_reshapes = alias_reshaped_weights(graph);  // rebuilds the initializer list
    constants.clear();
    for (const auto& t : graph.initializer())
      if (!graph_inputs.count(t.name())) constants[t.name()] = &t;
    summary.released = mark_released_weights(graph, constants);
  }
  if (summary.deltagen_nodes() > 0) {
    bool imported = false;
    for (const auto& op : model.opset_import()) imported |= op.domain() == kDeltagenDomain;
    if (!imported) {
      auto* op = model.add_opset_import();
      op->set_domain(kDeltagenDomain);
      op->set_version(kDeltagenOpsetVersion);
    }
  }
  return summary;
}

}  // namespace deltagen::rewrite
