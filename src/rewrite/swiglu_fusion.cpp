#include "rewrite/swiglu_fusion.h"

#include <utility>
#include <vector>

#include "rewrite/deltagen_domain.h"
#include "rewrite/graph_index.h"

namespace deltagen::rewrite {
namespace {

using namespace fusion;

struct SwigluChain {
  int matmul = 0;
  std::string gate_up;
  std::vector<int> nodes;  // Split, Sigmoid, the two Muls
};

std::optional<SwigluChain> match_swiglu_chain(const GraphIndex& g, const onnx::NodeProto& mm, int mm_index) {
  const int64_t k = int_or(mm, "K", 0);
  const std::string a = input(mm, 0);
  int mul_up = 0;
  const auto* product = g.producer(a, "Mul", "", 0, &mul_up);
  if (!product || !g.private_value(a) || product->input_size() != 2) return {};
  for (int order = 0; order < 2; ++order) {
    const std::string act = input(*product, order), up = input(*product, 1 - order);
    int silu_mul = 0, split_index = 0, sigmoid_index = 0;
    const auto* silu = g.producer(act, "Mul", "", 0, &silu_mul);
    const auto* split = g.producer(up, "Split", "", 1, &split_index);
    if (!silu || !split || silu->input_size() != 2 || !g.private_value(act) || !g.private_value(up)) continue;
    const std::string gate = output(*split, 0);
    if (split->output_size() != 2 || g.uses(gate) != 2) continue;
    const auto sizes = g.constant_ints(input(*split, 1));
    const int64_t axis = int_or(*split, "axis", 0);
    if ((axis != -1 && axis != 2) || !sizes || *sizes != std::vector<int64_t>{k, k}) continue;
    // silu(gate) = gate * Sigmoid(gate), in either order
    for (int s = 0; s < 2; ++s) {
      const onnx::NodeProto* sig = g.producer(input(*silu, s), "Sigmoid", "", 0, &sigmoid_index);
      if (!sig || input(*silu, 1 - s) != gate || input(*sig, 0) != gate || !g.private_value(input(*silu, s)))
        continue;
      return SwigluChain{mm_index, input(*split, 0), {split_index, sigmoid_index, silu_mul, mul_up}};
    }
  }
  return {};
}

}  // namespace

int64_t fuse_swiglu_into_matmul(onnx::GraphProto& graph) {
  const std::vector<SwigluChain> matches = find_matches<SwigluChain>(graph, "MatMulNBits", kDeltagenDomain, match_swiglu_chain, &SwigluChain::nodes);
  if (matches.empty()) return 0;
  std::vector<int> drop;
  for (const auto& m : matches) {
    onnx::NodeProto& mm = *graph.mutable_node(m.matmul);
    mm.set_input(0, m.gate_up);
    set_int_attribute(mm, kSwigluAttribute, 1);
    drop.insert(drop.end(), m.nodes.begin(), m.nodes.end());
  }
  fusion::edit_nodes(graph, drop, {});
  return int64_t(matches.size());
}

}  // namespace deltagen::rewrite
