// The Qwen3.5-MoE feed-forward block (every layer of a qwen3_5_moe model):
//   router   logits = x W_router^T                    [tokens, E]
//   routed   com.microsoft MoE (float experts) or QMoE (int4/int8 experts):
//            softmax over all E, top-k, weights renormalised, each chosen
//            expert's SwiGLU down(silu(gate x) * up x) times its weight, summed
//   shared   down_s(silu(gate_s x) * up_s x) * sigmoid(x . w_shared_gate)
//   out      routed + shared
// The routed experts are one node, as onnxruntime-genai builds them; the
// shared expert and its gate are ordinary MatMul / MatMulNBits nodes, so
// every precision option of the dense MLP applies to them unchanged.
#include "models/expert_weights.h"
#include "models/qwen35_graph.h"

namespace deltagen::qwen35 {

using graph::attr;
using graph::kMsDomain;

std::string Graph::moe(int64_t i, const std::string& x) {
  const std::string p = layer_path(i) + "/moe";
  const std::string c = ckpt_layer(i) + "mlp.";
  const int64_t E = cfg_.num_experts;

  // The router stays in float: its top-k decides which experts run at all,
  // so its rounding must not be the quantizer's (onnxruntime-genai does the same).
  WeightFormat router_format;
  router_format.float_dtype = plan_.layers.quantized ? plan_.activations : plan_.layers.float_dtype;
  const std::string logits = matmul(p + "/router", x, {c + "gate.weight"}, router_format);

  // The experts' node takes x as it is ([batch, seq, H]) and the logits as [tokens, E].
  const std::string logits2 = reshape(p + "/router/Reshape", logits, {-1, E});
  const std::string routed = routed_experts(i, p + "/experts", x, logits2);

  // Shared expert: the dense SwiGLU MLP's nodes, and its scalar sigmoid gate.
  auto gate_up = projections(p + "/shared_expert/gate_up_proj", x,
                             {{p + "/shared_expert/gate_proj", c + "shared_expert.gate_proj.weight"},
                              {p + "/shared_expert/up_proj", c + "shared_expert.up_proj.weight"}},
                             plan_.layers);
  const std::string act = silu(p + "/shared_expert/act_fn", gate_up[0]);
  const std::string prod = compute("Mul", p + "/shared_expert/Mul", {act, gate_up[1]});
  const std::string shared =
      matmul(p + "/shared_expert/down_proj", prod, {c + "shared_expert.down_proj.weight"}, plan_.layers);
  const std::string gate_logit =
      matmul(p + "/shared_expert_gate", x, {c + "shared_expert_gate.weight"}, router_format);
  const std::string gate = compute("Sigmoid", p + "/shared_expert_gate/Sigmoid", {gate_logit});
  const std::string gated = compute("Mul", p + "/shared_expert/gate/Mul", {shared, gate});
  return compute("Add", p + "/Add", {routed, gated});
}

// One MoE (float experts) or QMoE (quantized experts) node over x
// (facts of ORT 1.30's CPU kernels: docs/moe.md). SwiGLU with alpha 1, beta 0
// and no clamp is Qwen's silu(gate) * up. The router input holds logits: MoE
// soft-maxes them over all experts, takes the top k and renormalises
// (normalize_routing_weights); QMoE takes the top k logits and soft-maxes
// those, the same weights in exact arithmetic. Float experts run in fp32:
// the CPU EP's fp16 MoE kernel returns zeros on x86 and it has no bf16 one.
std::string Graph::routed_experts(int64_t i, const std::string& path, const std::string& x,
                                  const std::string& logits2) {
  const WeightFormat& format = plan_.layers;
  const std::string weight_base = weight_name_for(path + "/experts");
  std::vector<onnx::AttributeProto> attrs = {
      attr("k", cfg_.num_experts_per_tok),
      attr("activation_type", "swiglu"),
      attr("normalize_routing_weights", int64_t(1)),
      attr("swiglu_fusion", int64_t(1)),
      attr("activation_alpha", 1.0f),
      attr("activation_beta", 0.0f),  // swiglu_limit left out: no clamp
  };
  if (!format.quantized) {
    const DataType wdt = format.float_dtype;
    const DataType dt = wdt == plan_.activations ? run_dtype("MoE") : graph::kFloat;
    const std::string fc1 = weight(expert_float_weight(ckpt_, i, ExpertFc::Fc1GateUp,
                                                       weight_base + ".fc1", wdt));
    const std::string fc2 = weight(expert_float_weight(ckpt_, i, ExpertFc::Fc2Down, weight_base + ".fc2", wdt));
    const std::string name = path + "/MoE";
    return node("MoE", name,
                {cast(x, dt, name + "/input_0/Cast"), cast(logits2, dt, name + "/input_1/Cast"),
                 cast(fc1, dt, name + "/fc1/Cast"), "", cast(fc2, dt, name + "/fc2/Cast")},
                attrs, kMsDomain, {dt})
        .front();
  }
  const DataType dt = run_dtype("QMoE");
  const quant::BlockFormat& block = format.block;
  QuantizedWeight fc1 = expert_quantized_weight(ckpt_, i, ExpertFc::Fc1GateUp, weight_base + ".fc1", block, dt,
                                                opts_.threads);
  QuantizedWeight fc2 = expert_quantized_weight(ckpt_, i, ExpertFc::Fc2Down, weight_base + ".fc2", block, dt,
                                                opts_.threads);
  weight(fc1.packed);
  weight(fc1.scales);
  weight(fc2.packed);
  weight(fc2.scales);
  attrs.push_back(attr("expert_weight_bits", int64_t(block.bits)));
  attrs.push_back(attr("block_size", block.block_size));
  const std::string name = path + "/QMoE";
  return node("QMoE", name,
              {cast(x, dt, name + "/input_0/Cast"), cast(logits2, dt, name + "/input_1/Cast"), fc1.packed.name,
               fc1.scales.name, "", fc2.packed.name, fc2.scales.name},
              attrs, kMsDomain, {dt})
      .front();
}

}  // namespace deltagen::qwen35
