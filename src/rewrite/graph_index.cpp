#include "rewrite/graph_index.h"

#include <set>

namespace deltagen::rewrite::fusion {

namespace {

// Stable topological order: a fused node sits where its chain's last node was,
// but a node after the chain's first one may read one of its outputs (the
// Cast of a present state in a --state-dtype fp16 build). Nodes keep their
// order unless an input is not defined yet; a graph that is not acyclic, or
// has subgraphs (whose outer-scope reads are not node inputs), is left as it is.
void sort_nodes(onnx::GraphProto& graph) {
  for (const auto& node : graph.node())
    for (const auto& a : node.attribute())
      if (a.has_g() || a.graphs_size() > 0) return;
  std::set<std::string> defined = {""};
  for (const auto& in : graph.input()) defined.insert(in.name());
  for (const auto& t : graph.initializer()) defined.insert(t.name());
  const int n = graph.node_size();
  std::vector<int> order;
  std::vector<bool> placed(size_t(n), false);
  bool progress = true;
  while (int(order.size()) < n && progress) {
    progress = false;
    for (int i = 0; i < n; ++i) {
      if (placed[size_t(i)]) continue;
      const auto& node = graph.node(i);
      bool ready = true;
      for (const auto& in : node.input()) ready = ready && defined.count(in);
      if (!ready) continue;
      for (const auto& out : node.output()) defined.insert(out);
      placed[size_t(i)] = true;
      order.push_back(i);
      progress = true;
    }
  }
  if (int(order.size()) < n) return;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  for (int i : order) *sorted.Add() = std::move(*graph.mutable_node(i));
  graph.mutable_node()->Swap(&sorted);
}

}  // namespace

void edit_nodes(onnx::GraphProto& graph, const std::vector<int>& drop,
                const std::unordered_map<int, const onnx::NodeProto*>& replace) {
  const std::set<int> dropped(drop.begin(), drop.end());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int n = 0; n < graph.node_size(); ++n) {
    if (auto it = replace.find(n); it != replace.end())
      *nodes.Add() = *it->second;
    else if (!dropped.count(n))
      *nodes.Add() = std::move(*graph.mutable_node(n));
  }
  graph.mutable_node()->Swap(&nodes);

  std::set<std::string> used;
  for (const auto& node : graph.node())
    for (const auto& in : node.input()) used.insert(in);
  for (const auto& out : graph.output()) used.insert(out.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (auto& node : *graph.mutable_node())
    if (!(node.op_type() == "Constant" && node.domain().empty() && node.output_size() == 1 &&
          !used.count(node.output(0))))
      *kept.Add() = std::move(node);
  graph.mutable_node()->Swap(&kept);
  sort_nodes(graph);
}

}  // namespace deltagen::rewrite::fusion
