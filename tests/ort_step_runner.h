// Runs a built model directly with ONNX Runtime, step by step as a
// generation loop would (batch 1), carrying every present.* output into the
// matching past_key_values.* input. Independent of src/runtime on purpose:
// the builder tests check graphs of every dtype and I/O variant, including
// ones the generation loop does not take (inputs_embeds, hidden_states).
#pragma once
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "util/half.h"

namespace deltagen::test {

inline Ort::Env& ort_test_env() {
  static Ort::Env env(ORT_LOGGING_LEVEL_ERROR, "deltagen_tests");
  return env;
}

// A float / float16 / bfloat16 tensor's elements as fp32.
inline std::vector<float> to_f32(const Ort::Value& v) {
  auto info = v.GetTensorTypeAndShapeInfo();
  const size_t n = info.GetElementCount();
  std::vector<float> out(n);
  switch (info.GetElementType()) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: std::memcpy(out.data(), v.GetTensorData<float>(), n * 4); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: {
      const auto* p = static_cast<const uint16_t*>(v.GetTensorRawData());
      for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
      break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: {
      const auto* p = static_cast<const uint16_t*>(v.GetTensorRawData());
      for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    default: throw std::runtime_error("to_f32: not a float tensor");
  }
  return out;
}

class StepRunner {
 public:
  explicit StepRunner(const std::filesystem::path& model_file)
      : session_(ort_test_env(), model_file.c_str(), options()) {
    Ort::AllocatorWithDefaultOptions alloc;
    for (size_t i = 0; i < session_.GetInputCount(); ++i) {
      std::string name = session_.GetInputNameAllocated(i, alloc).get();
      input_names_.push_back(name);
      Ort::TypeInfo type_info = session_.GetInputTypeInfo(i);  // keep alive: the shape info is a view into it
      auto tensor_info = type_info.GetTensorTypeAndShapeInfo();
      if (name == "inputs_embeds" || name == "hidden_states") embeds_dtype_ = tensor_info.GetElementType();
      if (name == "position_ids") mrope_ = tensor_info.GetShape().size() == 3;
      if (name.rfind("past_key_values.", 0) != 0) continue;
      std::vector<int64_t> shape = tensor_info.GetShape();
      shape[0] = 1;                                  // batch 1
      for (int64_t& d : shape) d = d < 0 ? 0 : d;    // past length 0
      past_.emplace(name, zeros(tensor_info.GetElementType(), shape));
    }
    for (size_t i = 0; i < session_.GetOutputCount(); ++i)
      output_names_.push_back(session_.GetOutputNameAllocated(i, alloc).get());
  }

  // Feeds `ids` (and, for an inputs_embeds model or the head's mtp.onnx,
  // `embeds` [ids.size(), hidden] fp32: inputs_embeds / hidden_states) after
  // the earlier tokens; returns the first output (logits or hidden_states) as
  // fp32, all rows it has. A model with 3-D position_ids
  // (a --vision decoder) gets `positions3` [3][ids.size()] when given, else
  // the token position + rope_delta in all three rows.
  // Int64 inputs with a default (e.g. logits_to_keep) fed on every step.
  std::map<std::string, std::vector<int64_t>> extra_inputs;

  std::vector<float> step(const std::vector<int64_t>& ids, const std::vector<float>& embeds = {},
                          const std::vector<int64_t>& positions3 = {}) {
    const int64_t s = int64_t(ids.size()), total = position_ + s;
    std::vector<int64_t> input_ids = ids, mask(size_t(total), 1), positions(static_cast<size_t>(s));
    for (int64_t i = 0; i < s; ++i) positions[size_t(i)] = position_ + i + rope_delta_;
    if (mrope_) {
      std::vector<int64_t> rows = positions3;
      if (rows.empty())
        for (int r = 0; r < 3; ++r) rows.insert(rows.end(), positions.begin(), positions.end());
      positions = std::move(rows);
    }
    std::vector<uint16_t> embeds16;

    auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    auto i64 = [&](std::vector<int64_t>& v, std::vector<int64_t> shape) {
      return Ort::Value::CreateTensor<int64_t>(mem, v.data(), v.size(), shape.data(), shape.size());
    };
    std::vector<Ort::Value> inputs;
    std::vector<float> embeds_copy = embeds;
    for (const auto& name : input_names_) {
      if (name == "input_ids") {
        inputs.push_back(i64(input_ids, {1, s}));
      } else if (name == "inputs_embeds" || name == "hidden_states") {  // hidden_states: mtp.onnx's input
        std::vector<int64_t> shape = {1, s, int64_t(embeds.size()) / std::max<int64_t>(s, 1)};
        if (embeds_dtype_ == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
          inputs.push_back(Ort::Value::CreateTensor<float>(mem, embeds_copy.data(), embeds_copy.size(),
                                                           shape.data(), shape.size()));
        } else {
          for (float x : embeds) embeds16.push_back(embeds_dtype_ == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16
                                                        ? f32_to_f16(x)
                                                        : f32_to_bf16(x));
          inputs.push_back(Ort::Value::CreateTensor(mem, embeds16.data(), embeds16.size() * 2, shape.data(),
                                                    shape.size(), embeds_dtype_));
        }
      } else if (name == "attention_mask") {
        inputs.push_back(i64(mask, {1, total}));
      } else if (name == "position_ids") {
        inputs.push_back(mrope_ ? i64(positions, {3, 1, s}) : i64(positions, {1, s}));
      } else {
        Ort::Value& past = past_.at(name);
        auto info = past.GetTensorTypeAndShapeInfo();
        std::vector<int64_t> shape = info.GetShape();
        inputs.push_back(Ort::Value::CreateTensor(mem, past.GetTensorMutableRawData(), byte_size(past),
                                                  shape.data(), shape.size(), info.GetElementType()));
      }
    }
    std::vector<const char*> in_names, out_names;
    for (const auto& n : input_names_) in_names.push_back(n.c_str());
    // Inputs with a default (not among GetInputNames), when a test sets them.
    std::vector<std::vector<int64_t>> extra_values;
    extra_values.reserve(extra_inputs.size());
    for (auto& [name, values] : extra_inputs) {
      extra_values.push_back(values);
      inputs.push_back(i64(extra_values.back(), {int64_t(values.size())}));
      in_names.push_back(name.c_str());
    }
    for (const auto& n : output_names_) out_names.push_back(n.c_str());
    auto outputs = session_.Run(Ort::RunOptions{nullptr}, in_names.data(), inputs.data(), inputs.size(),
                                out_names.data(), out_names.size());

    std::vector<float> first = to_f32(outputs[0]);
    last_shape_ = outputs[0].GetTensorTypeAndShapeInfo().GetShape();
    for (size_t i = 1; i < outputs.size(); ++i) {
      const std::string& name = output_names_[i];
      if (name.rfind("present.", 0) != 0) {  // hidden_states(.N), hidden_states_out
        others_.insert_or_assign(name, to_f32(outputs[i]));
        continue;
      }
      past_.insert_or_assign("past_key_values." + name.substr(std::string("present.").size()),
                             std::move(outputs[i]));
    }
    position_ = total;
    return first;
  }

  // Greedy continuation of `prompt` (prefill, then one token per step).
  std::vector<int64_t> greedy(const std::vector<int64_t>& prompt, int n) {
    std::vector<int64_t> out;
    std::vector<float> logits = step(prompt);
    for (int i = 0; i < n; ++i) {
      const int64_t vocab = last_shape_.back();
      const float* row = logits.data() + logits.size() - size_t(vocab);
      out.push_back(int64_t(std::max_element(row, row + vocab) - row));
      if (i + 1 < n) logits = step({out.back()});
    }
    return out;
  }

  std::vector<float> state(const std::string& past_name) const { return to_f32(past_.at(past_name)); }
  std::vector<int64_t> state_shape(const std::string& past_name) const {
    return past_.at(past_name).GetTensorTypeAndShapeInfo().GetShape();
  }
  const std::vector<int64_t>& last_output_shape() const { return last_shape_; }
  void set_rope_delta(int64_t delta) { rope_delta_ = delta; }
  // An output other than the first and the present states, from the last step.
  const std::vector<float>& output(const std::string& name) const { return others_.at(name); }

 private:
  static Ort::SessionOptions options() {
    Ort::SessionOptions o;
    o.SetIntraOpNumThreads(1);
    return o;
  }
  static size_t byte_size(const Ort::Value& v) {
    auto info = v.GetTensorTypeAndShapeInfo();
    return info.GetElementCount() * (info.GetElementType() == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ? 4 : 2);
  }
  static Ort::Value zeros(ONNXTensorElementDataType type, const std::vector<int64_t>& shape) {
    Ort::AllocatorWithDefaultOptions alloc;
    Ort::Value v = Ort::Value::CreateTensor(alloc, shape.data(), shape.size(), type);
    if (const size_t bytes = byte_size(v)) std::memset(v.GetTensorMutableRawData(), 0, bytes);  // empty past KV: no buffer
    return v;
  }

  Ort::Session session_;
  std::vector<std::string> input_names_, output_names_;
  std::map<std::string, Ort::Value> past_;
  std::map<std::string, std::vector<float>> others_;
  ONNXTensorElementDataType embeds_dtype_ = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  std::vector<int64_t> last_shape_;
  int64_t position_ = 0;
  bool mrope_ = false;
  int64_t rope_delta_ = 0;
};

}  // namespace deltagen::test
