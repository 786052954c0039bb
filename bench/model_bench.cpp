// End-to-end check of the fast MatMulNBits kernels on a built model folder:
// the same model.onnx through stock ONNX Runtime and through
// ortext::create_session_with_fast_kernels, prefill of --prompt tokens then
// --decode greedy steps, the two sessions measured in turns (run by run).
// Prompt tok/s = prompt / prefill time; decode tok/s = 1 / mean step time
// (first step excluded). Also prints how far the fast logits are from stock.
//
// With --reference DIR (e.g. the same checkpoint built with accuracy_level 0),
// both sessions' prefill logits are also compared with stock ORT on DIR.
//
// Usage: model_bench MODEL_DIR [--prompt 1000] [--decode 32] [--threads 2] [--runs 3]
//                    [--reference DIR]
// Run under `flock /tmp/deltagen-bench.lock` on a shared machine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ortext/fast_session.h"
#include "runtime/session.h"

namespace {

using namespace deltagen;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Step {
  std::vector<float> last_logits;  // logits of the last position
  std::map<std::string, Ort::Value> present;
};

// One forward pass of `tokens` after past_len positions held in `past` (empty = start).
Step forward(Ort::Session& session, const ModelIo& io, const std::vector<int64_t>& tokens, int64_t past_len,
             std::map<std::string, Ort::Value>& past) {
  const auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const int64_t s = int64_t(tokens.size());
  std::vector<int64_t> ids = tokens;
  std::vector<int64_t> mask(static_cast<size_t>(past_len + s), 1), pos(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) pos[size_t(i)] = past_len + i;
  const std::vector<int64_t> ids_dims = {1, s}, mask_dims = {1, past_len + s};
  std::vector<std::string> names = {"input_ids"};
  std::vector<Ort::Value> values;
  values.push_back(Ort::Value::CreateTensor<int64_t>(mem, ids.data(), ids.size(), ids_dims.data(), 2));
  if (io.has_attention_mask) {
    names.push_back("attention_mask");
    values.push_back(Ort::Value::CreateTensor<int64_t>(mem, mask.data(), mask.size(), mask_dims.data(), 2));
  }
  if (io.has_position_ids) {
    names.push_back("position_ids");
    values.push_back(Ort::Value::CreateTensor<int64_t>(mem, pos.data(), pos.size(), ids_dims.data(), 2));
  }
  Ort::AllocatorWithDefaultOptions alloc;
  for (const CacheSpec& c : io.caches) {
    names.push_back(c.input_name);
    if (auto it = past.find(c.input_name); it != past.end()) {
      values.push_back(std::move(it->second));
      continue;
    }
    std::vector<int64_t> dims = c.shape;
    dims[0] = 1;
    if (c.kind == CacheKind::Key || c.kind == CacheKind::Value) dims[2] = 0;
    Ort::Value v = Ort::Value::CreateTensor(alloc, dims.data(), dims.size(), c.dtype);
    const size_t count = v.GetTensorTypeAndShapeInfo().GetElementCount();
    const size_t elem = c.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ? 4 : 2;
    if (count) std::memset(v.GetTensorMutableRawData(), 0, count * elem);
    values.push_back(std::move(v));
  }
  std::vector<std::string> outs = {"logits"};
  for (const CacheSpec& c : io.caches) outs.push_back(c.output_name);
  std::vector<const char*> in_names, out_names;
  for (const auto& n : names) in_names.push_back(n.c_str());
  for (const auto& n : outs) out_names.push_back(n.c_str());
  auto results = session.Run(Ort::RunOptions{nullptr}, in_names.data(), values.data(), values.size(), out_names.data(),
                             out_names.size());
  Step step;
  const auto info = results[0].GetTensorTypeAndShapeInfo();
  const int64_t vocab = info.GetShape().back();
  const float* p = results[0].GetTensorData<float>() + (info.GetElementCount() - size_t(vocab));
  step.last_logits.assign(p, p + vocab);
  for (size_t i = 0; i < io.caches.size(); ++i) step.present.emplace(io.caches[i].input_name, std::move(results[i + 1]));
  return step;
}

int64_t argmax(const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

struct RunResult {
  double prefill_s = 0, decode_step_s = 0;
  std::vector<float> prefill_logits;
  std::vector<int64_t> tokens;
};

RunResult generate(Ort::Session& session, const ModelIo& io, int64_t prompt_len, int decode_steps) {
  std::vector<int64_t> prompt;
  const int64_t vocab = io.logits_vocab > 0 ? io.logits_vocab : 1000;
  for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back((i * 7919 + 13) % std::min<int64_t>(vocab, 150000));
  std::map<std::string, Ort::Value> past;
  RunResult r;
  auto t0 = Clock::now();
  Step s = forward(session, io, prompt, 0, past);
  r.prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.prefill_logits = s.last_logits;
  int64_t past_len = prompt_len;
  double decode_total = 0;
  for (int step = 0; step < decode_steps; ++step) {
    const int64_t next = argmax(s.last_logits);
    r.tokens.push_back(next);
    past = std::move(s.present);
    t0 = Clock::now();
    s = forward(session, io, {next}, past_len, past);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (step > 0) decode_total += dt;
    ++past_len;
  }
  r.decode_step_s = decode_steps > 1 ? decode_total / (decode_steps - 1) : 0;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: model_bench MODEL_DIR [--prompt N] [--decode N] [--threads N] [--runs N]\n");
    return 2;
  }
  const fs::path model = fs::path(argv[1]) / "model.onnx";
  int64_t prompt = 1000;
  int decode = 32, threads = 2, runs = 3;
  std::string reference;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--prompt") prompt = std::stoll(argv[i + 1]);
    else if (flag == "--decode") decode = std::stoi(argv[i + 1]);
    else if (flag == "--threads") threads = std::stoi(argv[i + 1]);
    else if (flag == "--runs") runs = std::stoi(argv[i + 1]);
    else if (flag == "--reference") reference = argv[i + 1];
  }
  Ort::SessionOptions options;
  options.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_ALL);
  options.SetExecutionMode(ExecutionMode::ORT_SEQUENTIAL);
  options.SetInterOpNumThreads(1);
  options.SetIntraOpNumThreads(threads);

  auto t0 = Clock::now();
  Ort::Session stock(ort_env(), model.c_str(), options);
  const double stock_load = std::chrono::duration<double>(Clock::now() - t0).count();
  t0 = Clock::now();
  ortext::RewriteSummary summary;
  Ort::Session fast = ortext::create_session_with_fast_kernels(ort_env(), model, options, &summary);
  const double fast_load = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%s: %lld of %lld MatMulNBits on deltagen kernels; session load %.1f s stock, %.1f s fast\n",
              model.string().c_str(), (long long)summary.rewritten, (long long)summary.matmul_nbits, stock_load,
              fast_load);
  const ModelIo io = describe_model_io(stock);

  std::vector<double> pre[2], dec[2];
  RunResult last[2];
  Ort::Session* sessions[2] = {&stock, &fast};
  generate(stock, io, std::min<int64_t>(prompt, 16), 2);  // warm-up
  generate(fast, io, std::min<int64_t>(prompt, 16), 2);
  for (int r = 0; r < runs; ++r)
    for (int i = 0; i < 2; ++i) {
      last[i] = generate(*sessions[i], io, prompt, decode);
      pre[i].push_back(last[i].prefill_s);
      dec[i].push_back(last[i].decode_step_s);
    }
  double max_diff = 0, max_logit = 0;
  for (size_t i = 0; i < last[0].prefill_logits.size(); ++i) {
    max_diff = std::max(max_diff, double(std::fabs(last[0].prefill_logits[i] - last[1].prefill_logits[i])));
    max_logit = std::max(max_logit, double(std::fabs(last[0].prefill_logits[i])));
  }
  int agree = 0;
  while (agree < int(last[0].tokens.size()) && last[0].tokens[size_t(agree)] == last[1].tokens[size_t(agree)]) ++agree;
  const char* label[2] = {"stock ORT", "deltagen kernels"};
  std::printf("threads %d, prompt %lld, decode %d, runs %d (median)\n", threads, (long long)prompt, decode, runs);
  for (int i = 0; i < 2; ++i)
    std::printf("  %-17s prefill %.2f s = %.1f tok/s   decode %.2f ms/step = %.1f tok/s\n", label[i], median(pre[i]),
                double(prompt) / median(pre[i]), median(dec[i]) * 1e3, 1.0 / median(dec[i]));
  std::printf("  last prefill logits: max |fast - stock| %.3g (max |logit| %.3g); greedy tokens identical for %d/%zu steps\n",
              max_diff, max_logit, agree, last[0].tokens.size());
  if (!reference.empty()) {
    Ort::Session ref(ort_env(), (fs::path(reference) / "model.onnx").c_str(), options);
    const RunResult r = generate(ref, describe_model_io(ref), prompt, 0);
    for (int i = 0; i < 2; ++i) {
      double d = 0;
      for (size_t j = 0; j < r.prefill_logits.size(); ++j)
        d = std::max(d, double(std::fabs(last[i].prefill_logits[j] - r.prefill_logits[j])));
      std::printf("  %-17s vs %s: max |dlogit| %.3g, same argmax: %s\n", label[i], reference.c_str(), d,
                  argmax(last[i].prefill_logits) == argmax(r.prefill_logits) ? "yes" : "no");
    }
  }
  return 0;
}
