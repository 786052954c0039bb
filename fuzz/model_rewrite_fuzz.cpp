// Fuzzes the load-time rewrite (rewrite/model_rewrite.h): the op moves and the
// fusions, which walk producers, readers and constants of whatever graph
// they are given. Every input that parses as an ONNX model is rewritten twice
// (default options; every accuracy level taken).
//
// Oracle: a graph in which every node input is defined (a graph input, an
// initializer or an earlier node's output) stays so after the rewrite, every
// graph output is still produced, and the summary's counts match the nodes that
// entered the deltagen domain.
#include <set>
#include <string>
#include <utility>

#include <onnx/onnx_pb.h>

#include "fuzz_util.h"
#include "rewrite/deltagen_domain.h"
#include "rewrite/model_rewrite.h"

using namespace deltagen;

namespace {

// Inputs read before they are defined, in node order; and the graph outputs nobody produces.
int undefined_values(const onnx::GraphProto& g) {
  std::set<std::string> defined;
  for (const auto& in : g.input()) defined.insert(in.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  int missing = 0;
  for (const auto& node : g.node()) {
    for (const auto& in : node.input())
      if (!in.empty() && !defined.count(in)) ++missing;
    for (const auto& out : node.output()) defined.insert(out);
  }
  for (const auto& out : g.output())
    if (!defined.count(out.name())) ++missing;
  return missing;
}

// {GatedDeltaNet nodes, other nodes} in the deltagen domain (an input may already have some).
std::pair<int64_t, int64_t> deltagen_nodes(const onnx::GraphProto& g) {
  std::pair<int64_t, int64_t> n{0, 0};
  for (const auto& node : g.node())
    if (node.domain() == rewrite::kDeltagenDomain) ++(node.op_type() == "GatedDeltaNet" ? n.first : n.second);
  return n;
}

void check(const onnx::ModelProto& original, const rewrite::RewriteOptions& options) {
  onnx::ModelProto model = original;
  const rewrite::RewriteSummary s = rewrite::use_deltagen_kernels(model, options);
  if (undefined_values(original.graph()) == 0 && undefined_values(model.graph()) != 0)
    fuzz::finding("the rewrite left a node input or graph output undefined");
  const auto before = deltagen_nodes(original.graph()), after = deltagen_nodes(model.graph());
  if (after.first - before.first != s.gated_delta_net ||
      after.second - before.second != s.rewritten + s.causal_conv + s.attention + s.moe)
    fuzz::finding("summary counts do not match the nodes that moved to deltagen");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, int(size))) return 0;
  check(model, {});
  check(model, {.any_accuracy_level = true});
  return 0;
}
