// Questions the builder tests ask about a built graph: nodes by op type and
// name prefix, who produces and who consumes a tensor.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "graph/model_summary.h"

namespace deltagen::test {

// The nodes of domain-qualified type `op` whose names start with `prefix`.
inline std::vector<const onnx::NodeProto*> nodes_of(const onnx::ModelProto& m, const std::string& op,
                                                    const std::string& prefix = "") {
  std::vector<const onnx::NodeProto*> out;
  for (const auto& n : m.graph().node())
    if (graph::qualified_op(n) == op && n.name().rfind(prefix, 0) == 0) out.push_back(&n);
  return out;
}

inline std::map<std::string, const onnx::NodeProto*> producers(const onnx::ModelProto& m) {
  std::map<std::string, const onnx::NodeProto*> by_output;
  for (const auto& n : m.graph().node())
    for (const auto& o : n.output()) by_output[o] = &n;
  return by_output;
}

inline std::multimap<std::string, const onnx::NodeProto*> consumers(const onnx::ModelProto& m) {
  std::multimap<std::string, const onnx::NodeProto*> by_input;
  for (const auto& n : m.graph().node())
    for (const auto& i : n.input())
      if (!i.empty()) by_input.emplace(i, &n);
  return by_input;
}

inline int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback = -1) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

}  // namespace deltagen::test
