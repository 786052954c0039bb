#include "rewrite/rmsnorm_fusion.h"

#include <optional>
#include <string>
#include <vector>

#include "rewrite/deltagen_domain.h"
#include "rewrite/graph_index.h"

namespace deltagen::rewrite {
namespace {

using namespace fusion;

struct NormChain {
  int matmul = 0;
  std::vector<int> nodes;  // the norm
  std::string x, skip, weight, sum;
  float epsilon = 0;
};

bool unused(const GraphIndex& g, const onnx::NodeProto& node, int output_index) {
  const std::string value = output(node, output_index);
  return value.empty() || g.uses(value) == 0;
}

std::optional<NormChain> match_norm_chain(const GraphIndex& g, const onnx::NodeProto& mm, int mm_index) {
  if (find_attribute(mm, kSwigluAttribute) || find_attribute(mm, kRmsNormAttribute)) return {};
  const int64_t k = int_or(mm, "K", 0);
  const std::string a = input(mm, 0);
  if (!g.private_value(a)) return {};
  NormChain m;
  m.matmul = mm_index;
  int norm_index = 0;
  const onnx::NodeProto* norm = g.producer(a, "SkipSimplifiedLayerNormalization", kMs, 0, &norm_index);
  if (norm) {
    // input, skip, gamma, (bias); output, mean, inv_std_var, input_skip_bias_sum
    if (norm->input_size() < 3 || !input(*norm, 3).empty() || !unused(g, *norm, 1) || !unused(g, *norm, 2))
      return {};
    m.skip = input(*norm, 1);
    if (!unused(g, *norm, 3)) m.sum = output(*norm, 3);
  } else {
    norm = g.producer(a, "SimplifiedLayerNormalization", "", 0, &norm_index);
    // X, scale; Y, inv_std_var. Float stash (1) only; the last axis only.
    if (!norm || norm->input_size() != 2 || !unused(g, *norm, 1) || int_or(*norm, "axis", -1) != -1 ||
        int_or(*norm, "stash_type", 1) != 1)
      return {};
  }
  const auto* eps = find_attribute(*norm, "epsilon");
  const auto* weight = g.initializer(input(*norm, norm->op_type() == "SimplifiedLayerNormalization" ? 1 : 2));
  if (!eps || !weight || weight->data_type() != onnx::TensorProto_DataType_FLOAT || weight->dims_size() != 1 ||
      weight->dims(0) != k || input(*norm, 0).empty() || !(eps->f() >= 0))
    return {};
  m.x = input(*norm, 0);
  m.weight = weight->name();
  m.epsilon = eps->f();
  m.nodes = {norm_index};
  return m;
}

}  // namespace

int64_t fuse_rmsnorm_into_matmul(onnx::GraphProto& graph) {
  const std::vector<NormChain> matches = find_matches<NormChain>(graph, "MatMulNBits", kDeltagenDomain, match_norm_chain, &NormChain::nodes);
  if (matches.empty()) return 0;
  std::vector<int> drop;
  for (const auto& m : matches) {
    onnx::NodeProto& mm = *graph.mutable_node(m.matmul);
    mm.set_input(0, m.x);
    while (mm.input_size() < 6) mm.add_input("");
    mm.add_input(m.skip);
    mm.add_input(m.weight);
    if (!m.sum.empty()) mm.add_output(m.sum);
    set_int_attribute(mm, kRmsNormAttribute, m.sum.empty() ? 1 : 2);
    set_float_attribute(mm, kRmsNormEpsilonAttribute, m.epsilon);
    drop.insert(drop.end(), m.nodes.begin(), m.nodes.end());
  }
  fusion::edit_nodes(graph, drop, {});
  return int64_t(matches.size());
}

}  // namespace deltagen::rewrite
