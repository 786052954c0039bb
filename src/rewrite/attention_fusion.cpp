#include "rewrite/attention_fusion.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "rewrite/deltagen_domain.h"
#include "rewrite/graph_index.h"

namespace deltagen::rewrite {
namespace {

using namespace fusion;

struct AttentionChain {
  int attention = 0;
  std::vector<int> nodes;  // the eleven folded nodes
  std::string qkv, q_weight, k_weight, gated_out;
  int64_t head_dim = 0;
  float q_epsilon = 0, k_epsilon = 0;
};

// Reshape(x, constant shape) with one reader; returns x.
std::optional<std::string> reshape_of(const GraphIndex& g, const std::string& value, const std::vector<int64_t>& shape,
                                      std::vector<int>& nodes) {
  int index = 0;
  const auto* r = g.producer(value, "Reshape", "", 0, &index);
  if (!r || !g.private_value(value) || g.constant_ints(input(*r, 1)) != std::optional(shape)) return std::nullopt;
  nodes.push_back(index);
  return input(*r, 0);
}

// SimplifiedLayerNormalization over the last axis of `value`'s producer, float
// weight of hd values; returns its input.
std::optional<std::string> head_norm(const GraphIndex& g, const std::string& value, int64_t hd, std::vector<int>& nodes,
                                     std::string& weight, float& epsilon) {
  int index = 0;
  const auto* n = g.producer(value, "SimplifiedLayerNormalization", "", 0, &index);
  if (!n || !g.private_value(value) || n->input_size() != 2 || int_or(*n, "axis", -1) != -1 ||
      int_or(*n, "stash_type", 1) != 1 || (n->output_size() > 1 && !output(*n, 1).empty() && g.uses(output(*n, 1))))
    return std::nullopt;
  const auto* eps = find_attribute(*n, "epsilon");
  const auto* w = g.initializer(input(*n, 1));
  if (!eps || !(eps->f() >= 0) || !w || w->data_type() != onnx::TensorProto_DataType_FLOAT || w->dims_size() != 1 ||
      w->dims(0) != hd)
    return std::nullopt;
  nodes.push_back(index);
  weight = w->name();
  epsilon = eps->f();
  return input(*n, 0);
}

bool split_of(const onnx::NodeProto& split, const GraphIndex& g, const std::vector<int64_t>& sizes,
              std::initializer_list<int64_t> axes) {
  const int64_t axis = int_or(split, "axis", 0);
  return split.input_size() == 2 && split.output_size() == int(sizes.size()) &&
         std::find(axes.begin(), axes.end(), axis) != axes.end() && g.constant_ints(input(split, 1)) == std::optional(sizes);
}

std::optional<AttentionChain> match_attention_chain(const GraphIndex& g, const onnx::NodeProto& gqa, int gqa_index) {
  if (find_attribute(gqa, kGatedQkvAttribute) || int_or(gqa, "do_rotary", 0) == 0 || gqa.input_size() < 9 ||
      gqa.input_size() > 9 || gqa.output_size() != 3)
    return {};
  const int64_t nh = int_or(gqa, "num_heads", 0), nkv = int_or(gqa, "kv_num_heads", 0);
  if (nh < 1 || nkv < 1 || nh > 4096 || nkv > 4096) return {};
  AttentionChain m;
  m.attention = gqa_index;

  // key <- Reshape [0, 0, nkv*hd] <- k_norm <- Reshape [0, 0, nkv, hd] <- qkv Split output 1.
  // hd from the first Reshape's shape.
  int k_reshape = 0;
  const auto* kr = g.producer(input(gqa, 1), "Reshape", "", 0, &k_reshape);
  const auto k_shape = kr ? g.constant_ints(input(*kr, 1)) : std::nullopt;
  if (!kr || !k_shape || k_shape->size() != 3 || (*k_shape)[2] % nkv != 0 || (*k_shape)[2] < nkv) return {};
  const int64_t hd = (*k_shape)[2] / nkv;
  m.head_dim = hd;
  std::string k_weight;
  auto k4 = reshape_of(g, input(gqa, 1), {0, 0, nkv * hd}, m.nodes);
  auto k_in = k4 ? head_norm(g, *k4, hd, m.nodes, k_weight, m.k_epsilon) : std::nullopt;
  auto k = k_in ? reshape_of(g, *k_in, {0, 0, nkv, hd}, m.nodes) : std::nullopt;
  if (!k) return {};
  m.k_weight = k_weight;

  // query <- Reshape [0, 0, nh*hd] <- q_norm <- q_gate Split output 0.
  auto q4 = reshape_of(g, input(gqa, 0), {0, 0, nh * hd}, m.nodes);
  auto q_in = q4 ? head_norm(g, *q4, hd, m.nodes, m.q_weight, m.q_epsilon) : std::nullopt;
  if (!q_in) return {};
  int qg_split = 0;
  const auto* qgs = g.producer(*q_in, "Split", "", 0, &qg_split);
  if (!qgs || !split_of(*qgs, g, {hd, hd}, {-1, 3}) || !g.private_value(output(*qgs, 1))) return {};
  m.nodes.push_back(qg_split);
  auto q_gate = reshape_of(g, input(*qgs, 0), {0, 0, nh, 2 * hd}, m.nodes);
  if (!q_gate) return {};

  // The projection's Split: q_gate, k, v (v read by the attention only).
  int qkv_split = 0;
  const auto* ps = g.producer(*q_gate, "Split", "", 0, &qkv_split);
  if (!ps || !split_of(*ps, g, {nh * 2 * hd, nkv * hd, nkv * hd}, {-1, 2}) || output(*ps, 1) != *k ||
      output(*ps, 2) != input(gqa, 2) || !g.private_value(*k) || !g.private_value(input(gqa, 2)))
    return {};
  m.nodes.push_back(qkv_split);
  m.qkv = input(*ps, 0);

  // out * Sigmoid(Reshape(gate4, [0, 0, nh*hd])), in either order.
  int mul_index = 0;
  const auto* mul = g.reader(output(gqa, 0), "Mul", "", &mul_index);
  if (!mul || mul->input_size() != 2) return {};
  const std::string gate_value = input(*mul, 0) == output(gqa, 0) ? input(*mul, 1) : input(*mul, 0);
  int sigmoid_index = 0;
  const auto* sig = g.producer(gate_value, "Sigmoid", "", 0, &sigmoid_index);
  if (!sig || !g.private_value(gate_value)) return {};
  auto gate4 = reshape_of(g, input(*sig, 0), {0, 0, nh * hd}, m.nodes);
  if (!gate4 || *gate4 != output(*qgs, 1)) return {};
  m.nodes.insert(m.nodes.end(), {sigmoid_index, mul_index});
  m.gated_out = output(*mul, 0);
  return m;
}

}  // namespace

int64_t fuse_gated_attention(onnx::GraphProto& graph) {
  const std::vector<AttentionChain> matches =
      find_matches<AttentionChain>(graph, "GroupQueryAttention", kDeltagenDomain, match_attention_chain, &AttentionChain::nodes);
  if (matches.empty()) return 0;
  std::vector<int> drop;
  for (const auto& m : matches) {
    onnx::NodeProto& gqa = *graph.mutable_node(m.attention);
    gqa.set_input(0, m.qkv);
    gqa.set_input(1, "");
    gqa.set_input(2, "");
    gqa.add_input(m.q_weight);
    gqa.add_input(m.k_weight);
    gqa.set_output(0, m.gated_out);
    set_int_attribute(gqa, kGatedQkvAttribute, m.head_dim);
    set_float_attribute(gqa, kQNormEpsilonAttribute, m.q_epsilon);
    set_float_attribute(gqa, kKNormEpsilonAttribute, m.k_epsilon);
    drop.insert(drop.end(), m.nodes.begin(), m.nodes.end());
  }
  fusion::edit_nodes(graph, drop, {});
  return int64_t(matches.size());
}

}  // namespace deltagen::rewrite
