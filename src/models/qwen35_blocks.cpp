// Building blocks of the Qwen3.5 graph: projections (MatMul, MatMulNBits,
// fused groups), RMSNorms (in the activation dtype, or the old fp32-upcast
// form), SiLU.
#include "models/qwen35_graph.h"

namespace deltagen::qwen35 {

using graph::attr;
using graph::kMsDomain;

// ---- projections ------------------------------------------------------------------

std::string Graph::matmul_nbits(const std::string& path, const std::string& x, const QuantizedWeight& w, int bits,
                                int64_t block_size, const std::string& output) {
  const std::string node_name = path + (bits == 4 ? "/MatMul_Q4" : "/MatMul_Q8");
  std::vector<std::string> inputs = {cast(x, dtype_of(w.scales.name), node_name + "/input_0/Cast"), w.packed.name,
                                     w.scales.name};
  if (!w.zero_points.name.empty()) inputs.push_back(w.zero_points.name);
  return node("MatMulNBits", node_name, inputs,
              {attr("K", w.k), attr("N", w.n), attr("bits", int64_t(bits)), attr("block_size", block_size),
               attr("accuracy_level", plan_.accuracy_level)},
              kMsDomain, {dtype_of(w.scales.name)}, output.empty() ? std::vector<std::string>{} : std::vector{output})
      .front();
}

std::string Graph::matmul(const std::string& path, const std::string& x, const std::vector<std::string>& tensors,
                          const WeightFormat& planned, const std::string& output) {
  return matmul_in_format(path, x, tensors, recipe_.format_for(tensors, planned), output);
}

std::string Graph::matmul_in_format(const std::string& path, const std::string& x,
                                    const std::vector<std::string>& tensors, const WeightFormat& format,
                                    const std::string& output, const KeptRows& kept) {
  const std::string node_name = path + "/MatMul";
  if (format.quantized) {
    QuantizedWeight w = quantized_weight(ckpt_, tensors, weight_name_for(node_name), format.block,
                                         run_dtype("MatMulNBits"), opts_.threads,
                                         recipe_.fit_for(tensors, run_dtype("MatMulNBits")));
    if (kept.rows > 0) w = first_rows(w, kept.rows, kept.suffix);
    weight(w.packed);
    weight(w.scales);
    if (!format.block.symmetric) weight(w.zero_points);
    return matmul_nbits(path, x, w, format.block.bits, format.block.block_size, output);
  }
  // Float weights: the activation dtype when the weights are stored in it,
  // else fp32 (a Cast of a weight is folded by ORT when the session loads).
  const DataType wdt = format.float_dtype;
  const DataType dt = wdt == plan_.activations ? run_dtype("MatMul") : graph::kFloat;
  graph::Initializer all = matmul_weight(ckpt_, tensors, weight_name_for(node_name), wdt, opts_.threads);
  if (kept.rows > 0) all = first_columns(all, kept.rows, all.name + kept.suffix);  // [K, N]: outputs are columns
  const std::string w = weight(std::move(all));
  return node("MatMul", node_name,
              {cast(x, dt, node_name + "/input_0/Cast"), cast(w, dt, node_name + "/weight/Cast")}, {}, "", {dt},
              output.empty() ? std::vector<std::string>{} : std::vector{output})
      .front();
}

std::vector<std::string> Graph::projections(const std::string& fused_path, const std::string& x,
                                            const std::vector<Projection>& parts, const WeightFormat& format) {
  std::vector<std::string> outs;
  if (!opts_.fuse_projections || parts.size() == 1) {
    for (const Projection& p : parts) outs.push_back(matmul(p.path, x, {p.tensor}, format));
    return outs;
  }
  // One wider matmul over the stacked weights, then a Split: the same dot
  // products, one kernel launch and one read of x instead of several.
  std::vector<std::string> tensors;
  std::vector<int64_t> sizes;
  for (const Projection& p : parts) {
    tensors.push_back(p.tensor);
    sizes.push_back(ckpt_.info(p.tensor).shape.at(0));
  }
  std::string fused = matmul(fused_path, x, tensors, format);
  std::vector<DataType> dts(parts.size(), dtype_of(fused));
  return node("Split", fused_path + "/Split", {fused, b_.constant_i64(sizes)}, {attr("axis", -1)}, "", dts);
}

// ---- RMSNorms ---------------------------------------------------------------------

DataType Graph::norm_dtype(const std::string& op_type) const {
  return opts_.norm_upcast ? graph::kFloat : run_dtype(op_type);
}

graph::Initializer Graph::norm_weight(const std::string& ckpt_weight, const std::string& node, ValueMap map,
                                      DataType dtype) {
  return float_weight(ckpt_, ckpt_weight, weight_name_for(node), dtype, map);
}

std::string Graph::norm_input(const std::string& norm, int index, const std::string& x, DataType dtype) {
  return cast(x, dtype, norm + "/input_" + std::to_string(index) + "/Cast");
}

// With --norm-upcast the fp32 result goes back to the activation dtype right
// away (the old form); `output` names the final value ("" = default name).
std::string Graph::norm_output(const std::string& norm, int index, const std::string& y, const std::string& output) {
  if (!opts_.norm_upcast || dtype_of(y) == plan_.activations) return y;
  const std::string name = norm + "/output_" + std::to_string(index) + "/Cast";
  return node("Cast", name, {y}, {attr("to", int64_t(plan_.activations))}, "", {plan_.activations},
              {output.empty() ? name + "/output_0" : output})
      .front();
}

std::string Graph::rms_norm(const std::string& name, const std::string& x, const std::string& ckpt_weight,
                            const std::string& weight_node, ValueMap map, const std::string& output) {
  const DataType dt = norm_dtype("SimplifiedLayerNormalization");
  const std::string w = weight(norm_weight(ckpt_weight, weight_node, map, dt));
  const bool cast_back = opts_.norm_upcast && dt != plan_.activations;
  std::string y = node("SimplifiedLayerNormalization", name, {norm_input(name, 0, x, dt), w},
                       {attr("axis", -1), attr("epsilon", cfg_.rms_norm_eps), attr("stash_type", 1)}, "", {dt},
                       {cast_back || output.empty() ? name + "/output_0" : output})
                      .front();
  return norm_output(name, 0, y, output);
}

std::pair<std::string, std::string> Graph::skip_norm(const std::string& name, const std::string& x,
                                                     const std::string& skip, const std::string& ckpt_weight,
                                                     bool with_sum, const std::string& output) {
  const DataType dt = norm_dtype("SkipSimplifiedLayerNormalization");
  const std::string w = weight(norm_weight(ckpt_weight, name, ValueMap::PlusOne, dt));
  const bool cast_back = opts_.norm_upcast && dt != plan_.activations;
  std::vector<std::string> outs = {cast_back || output.empty() ? name + "/output_0" : output, "", "",
                                   with_sum ? name + "/output_3" : ""};
  auto y = node("SkipSimplifiedLayerNormalization", name,
                {norm_input(name, 0, x, dt), norm_input(name, 1, skip, dt), w}, {attr("epsilon", cfg_.rms_norm_eps)},
                kMsDomain, {dt, dt, dt, dt}, outs);
  std::string normed = norm_output(name, 0, y[0], output);
  std::string sum = with_sum ? norm_output(name, 3, y[3], "") : "";
  return {normed, sum};
}

std::string Graph::silu(const std::string& path, const std::string& x) {
  std::string sig = compute("Sigmoid", path + "/Sigmoid", {x});
  return compute("Mul", path + "/Mul", {x, sig});
}

}  // namespace deltagen::qwen35
