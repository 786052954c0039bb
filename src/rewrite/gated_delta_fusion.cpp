#include "rewrite/gated_delta_fusion.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/gated_delta_net.h"
#include "rewrite/deltagen_domain.h"
#include "rewrite/graph_index.h"

namespace deltagen::rewrite {
namespace {

using namespace fusion;

struct DeltaChain {
  std::vector<int> nodes;  // every node of the chain
  int last = 0;            // the GatedRMSNorm, where the fused node goes
  onnx::NodeProto fused;
};

// Reshape -> LpNormalization(p 2, last axis) -> Reshape back, on one Split output;
// returns the Split output it normalizes and checks the grouping is [.., heads, dim].
std::optional<std::string> l2_norm_chain(const GraphIndex& g, const std::string& normed, int64_t heads, int64_t dim,
                                         std::vector<int>& nodes) {
  int r2 = 0, lp = 0, r1 = 0;
  const auto* reshape_out = g.producer(normed, "Reshape", "", 0, &r2);
  if (!reshape_out || !g.private_value(normed)) return std::nullopt;
  const auto* norm = g.producer(input(*reshape_out, 0), "LpNormalization", "", 0, &lp);
  if (!norm || !g.private_value(input(*reshape_out, 0))) return std::nullopt;
  if (int_or(*norm, "p", 2) != 2 || (int_or(*norm, "axis", -1) != -1 && int_or(*norm, "axis", -1) != 3))
    return std::nullopt;
  const auto* reshape_in = g.producer(input(*norm, 0), "Reshape", "", 0, &r1);
  if (!reshape_in || !g.private_value(input(*norm, 0))) return std::nullopt;
  const auto shape = g.constant_ints(input(*reshape_in, 1));
  if (!shape || shape->size() != 4 || (*shape)[2] != heads || (*shape)[3] != dim) return std::nullopt;
  nodes.insert(nodes.end(), {r2, lp, r1});
  return input(*reshape_in, 0);
}

// Where the fused node reads a state and writes its next value. A
// --state-dtype fp16 build reads each state through a Cast to float of its
// fp16 graph input and writes it through a Cast to float16: the fused node
// takes both Casts in (the kernel keeps fp16 states, half the DRAM traffic).
// Any other form keeps its Casts outside the fused node.
struct StateIo {
  std::string past, present;
  bool f16 = false;
  std::vector<int> casts;
};

StateIo state_io(const GraphIndex& g, const std::string& past, const std::string& present) {
  StateIo io{past, present, false, {}};
  int widen_index = 0, narrow_index = 0;
  const auto* widen = g.producer(past, "Cast", "", 0, &widen_index);
  const auto* narrow = g.reader(present, "Cast", "", &narrow_index);
  if (!widen || !narrow || !g.private_value(past) || int_or(*widen, "to", 0) != onnx::TensorProto_DataType_FLOAT ||
      int_or(*narrow, "to", 0) != onnx::TensorProto_DataType_FLOAT16 ||
      g.graph_input_type(input(*widen, 0)) != onnx::TensorProto_DataType_FLOAT16)
    return io;
  return StateIo{input(*widen, 0), output(*narrow, 0), true, {widen_index, narrow_index}};
}

std::optional<DeltaChain> match_layer(const GraphIndex& g, const onnx::NodeProto& la, int la_index) {
  DeltaChain m;
  m.nodes.push_back(la_index);
  // LinearAttention: gated delta rule, per-head decay and beta, no window.
  if (la.input_size() < 6 || la.output_size() < 2 || output(la, 1).empty() || input(la, 3).empty()) return {};
  if (int_or(la, "state_window", 0) != 0) return {};
  if (const auto* rule = find_attribute(la, "update_rule"); rule && rule->s() != "gated_delta") return {};
  const int64_t nk = int_or(la, "q_num_heads", 0), nv = int_or(la, "kv_num_heads", 0);
  if (nk < 1 || nv < 1 || nv % nk != 0) return {};
  const auto* scale = find_attribute(la, "scale");

  // o -> GatedRMSNorm(o, weight [dv], z), its only reader.
  const auto* norm = g.reader(output(la, 0), "GatedRMSNorm", kMs, &m.last);
  if (!norm || norm->input_size() != 3 || input(*norm, 2).empty()) return {};
  const auto* eps = find_attribute(*norm, "epsilon");
  const auto* norm_w = g.initializer(input(*norm, 1));
  if (!eps || !norm_w || norm_w->data_type() != onnx::TensorProto_DataType_FLOAT || norm_w->dims_size() != 1)
    return {};
  m.nodes.push_back(m.last);

  // decay, beta: the two outputs of one LinearAttentionGate(a, dt_bias, -exp(A_log), b).
  int gate_index = 0;
  const auto* gate = g.producer(input(la, 4), "LinearAttentionGate", kMs, 0, &gate_index);
  if (!gate || gate->input_size() != 4 || input(*gate, 3).empty() || output(*gate, 1) != input(la, 5)) return {};
  if (!g.private_value(input(la, 4)) || !g.private_value(input(la, 5))) return {};
  m.nodes.push_back(gate_index);

  // q, k, v from one Split of the conv output, sizes [nk dk, nk dk, nv dv].
  int split_index = 0;
  const auto* split = g.producer(input(la, 2), "Split", "", 2, &split_index);
  if (!split || split->output_size() != 3 || !g.private_value(input(la, 2))) return {};
  const int64_t axis = int_or(*split, "axis", 0);
  const auto sizes = g.constant_ints(input(*split, 1));
  if ((axis != -1 && axis != 2) || !sizes || sizes->size() != 3 || (*sizes)[0] != (*sizes)[1] || (*sizes)[0] % nk ||
      (*sizes)[2] % nv)
    return {};
  if (nk > 4096 || nv > 4096 || (*sizes)[0] < 1 || (*sizes)[2] < 1) return {};
  const int64_t dk = (*sizes)[0] / nk, dv = (*sizes)[2] / nv;
  if (dk > kernels::kMaxDeltaHeadDim || dv > kernels::kMaxDeltaHeadDim) return {};  // the kernel's limit
  if (norm_w->dims(0) != dv) return {};
  const auto q = l2_norm_chain(g, input(la, 0), nk, dk, m.nodes);
  const auto k = l2_norm_chain(g, input(la, 1), nk, dk, m.nodes);
  if (!q || *q != output(*split, 0) || !k || *k != output(*split, 1)) return {};
  m.nodes.push_back(split_index);

  // The conv (SiLU, no bias, with state), channels last or between two Transposes.
  std::string conv_out = input(*split, 0);
  if (!g.private_value(conv_out)) return {};
  auto transpose = [&](const std::string& value) -> const onnx::NodeProto* {
    int index = 0;
    const auto* t = g.producer(value, "Transpose", "", 0, &index);
    const auto* perm = t ? find_attribute(*t, "perm") : nullptr;
    if (!perm || perm->ints_size() != 3 || perm->ints(0) != 0 || perm->ints(1) != 2 || perm->ints(2) != 1) return nullptr;
    m.nodes.push_back(index);
    return t;
  };
  const onnx::NodeProto* after = nullptr;
  int conv_index = 0;
  const onnx::NodeProto* conv = g.producer(conv_out, "CausalConvWithState", kMs, 0, &conv_index);
  if (!conv) {
    after = transpose(conv_out);
    if (!after || !g.private_value(input(*after, 0))) return {};
    conv = g.producer(input(*after, 0), "CausalConvWithState", kMs, 0, &conv_index);
  }
  if (!conv || conv->input_size() != 4 || !input(*conv, 2).empty() || input(*conv, 3).empty() ||
      conv->output_size() != 2 || output(*conv, 1).empty())
    return {};
  const bool channels_last = int_or(*conv, "channels_last", 0) != 0;
  if (channels_last == (after != nullptr)) return {};
  if (int_or(*conv, "ndim", 1) != 1 || int_or(*conv, "dilation", 1) != 1 || int_or(*conv, "state_window", 0) != 0)
    return {};
  const auto* activation = find_attribute(*conv, "activation");
  if (!activation || (activation->s() != "silu" && activation->s() != "swish")) return {};
  const auto* conv_w = g.initializer(input(*conv, 1));
  if (!conv_w || conv_w->data_type() != onnx::TensorProto_DataType_FLOAT || conv_w->dims_size() != 3 ||
      conv_w->dims(0) != 2 * nk * dk + nv * dv || conv_w->dims(1) != 1)
    return {};
  m.nodes.push_back(conv_index);
  std::string x = input(*conv, 0);
  if (!channels_last) {
    if (!g.private_value(x)) return {};
    const auto* before = transpose(x);
    if (!before) return {};
    x = input(*before, 0);
  }

  StateIo conv_state = state_io(g, input(*conv, 3), output(*conv, 1));
  StateIo recurrent = state_io(g, input(la, 3), output(la, 1));
  if (conv_state.f16 != recurrent.f16) {  // the kernel takes both fp16 or neither
    conv_state = StateIo{input(*conv, 3), output(*conv, 1), false, {}};
    recurrent = StateIo{input(la, 3), output(la, 1), false, {}};
  }
  for (const StateIo* io : {&conv_state, &recurrent}) m.nodes.insert(m.nodes.end(), io->casts.begin(), io->casts.end());

  // x, z, b, a: the four outputs of one Split of the in_proj output, read by
  // this chain only, in the builder's order: the fused node reads the in_proj
  // output itself (in_proj_widths).
  int in_split_index = 0;
  const int64_t z_width = nv * dv;
  const std::vector<int64_t> widths = {2 * nk * dk + nv * dv, z_width, nv, nv};
  const auto* in_split = g.producer(x, "Split", "", 0, &in_split_index);
  const bool packed = in_split && in_split->output_size() == 4 && in_split->input_size() == 2 &&
                      (int_or(*in_split, "axis", 0) == -1 || int_or(*in_split, "axis", 0) == 2) &&
                      g.constant_ints(input(*in_split, 1)) == std::optional(widths) && output(*in_split, 1) == input(*norm, 2) &&
                      output(*in_split, 2) == input(*gate, 3) && output(*in_split, 3) == input(*gate, 0) &&
                      g.private_value(x) && g.private_value(output(*in_split, 1)) &&
                      g.private_value(output(*in_split, 2)) && g.private_value(output(*in_split, 3));
  if (packed) m.nodes.push_back(in_split_index);

  onnx::NodeProto& f = m.fused;
  std::string name = la.name();
  const std::string suffix = "/LinearAttention";
  if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  f.set_name(name + "/GatedDeltaNet");
  f.set_op_type("GatedDeltaNet");
  f.set_domain(kDeltagenDomain);
  const std::string none;
  for (const std::string& in :
       {packed ? input(*in_split, 0) : x, input(*conv, 1), conv_state.past, packed ? none : input(*norm, 2),
        packed ? none : input(*gate, 0), packed ? none : input(*gate, 3), input(*gate, 1), input(*gate, 2),
        recurrent.past, input(*norm, 1)})
    f.add_input(in);
  for (const std::string& out : {output(*norm, 0), conv_state.present, recurrent.present}) f.add_output(out);
  set_int_attribute(f, "q_num_heads", nk);
  set_int_attribute(f, "kv_num_heads", nv);
  set_float_attribute(f, "scale", scale ? scale->f() : 0.0f);
  set_float_attribute(f, "epsilon", eps->f());
  if (packed) set_ints_attribute(f, "in_proj_widths", widths);
  return m;
}

}  // namespace

int64_t fuse_gated_delta_net(onnx::GraphProto& graph) {
  const std::vector<DeltaChain> matches = find_matches<DeltaChain>(graph, "LinearAttention", kMs, match_layer, &DeltaChain::nodes);
  if (matches.empty()) return 0;
  // Each fused node takes the place of its chain's last node (the
  // GatedRMSNorm): every input of the chain is computed before that point.
  std::unordered_map<int, const onnx::NodeProto*> replace;
  std::vector<int> drop;
  for (const auto& m : matches) {
    drop.insert(drop.end(), m.nodes.begin(), m.nodes.end());
    replace[m.last] = &m.fused;
  }
  edit_nodes(graph, drop, replace);
  return int64_t(matches.size());
}

}  // namespace deltagen::rewrite
