#include "ortext/deltagen_ops.h"

#include "ortext/attention_op.h"
#include "ortext/causal_conv_op.h"
#include "ortext/gated_delta_net_op.h"
#include "ortext/matmul_nbits_op.h"
#include "ortext/moe_op.h"

namespace deltagen::ortext {

void register_deltagen_ops(Ort::SessionOptions& options) {
  // Sessions keep raw pointers to the op and the domain: both live (and are
  // deliberately never destroyed) for the whole process.
  static const MatMulNBitsOp* const matmul_nbits = new MatMulNBitsOp();
  static const CausalConvOp* const causal_conv = new CausalConvOp();
  static const GatedDeltaNetOp* const gated_delta_net = new GatedDeltaNetOp();
  static const AttentionOp* const attention = new AttentionOp();
  static const QMoeOp* const qmoe = new QMoeOp();
  static Ort::CustomOpDomain* const domain = [] {
    auto* d = new Ort::CustomOpDomain(kDeltagenDomain);
    d->Add(matmul_nbits);
    d->Add(causal_conv);
    d->Add(gated_delta_net);
    d->Add(attention);
    d->Add(qmoe);
    return d;
  }();
  options.Add(*domain);
}

}  // namespace deltagen::ortext
