#include "ortext/graph_index.h"

#include <set>

namespace deltagen::ortext::fusion {

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
}

}  // namespace deltagen::ortext::fusion
