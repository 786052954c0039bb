#include "runtime/session.h"

#include <cstring>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "ortext/fast_session.h"
#include "ortext/released_weights.h"
#include "runtime/execution_provider.h"
#include "runtime/tensor.h"
#include "deltagen/error.h"

namespace deltagen {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPastPrefix = "past_key_values.";
constexpr const char* kPresentPrefix = "present.";

std::optional<CacheKind> kind_from_suffix(const std::string& suffix) {
  for (CacheKind k : {CacheKind::Key, CacheKind::Value, CacheKind::ConvState, CacheKind::RecurrentState})
    if (suffix == cache_kind_suffix(k)) return k;
  return std::nullopt;
}

// "past_key_values.12.conv_state" -> (12, ConvState); nullopt for other names.
std::optional<std::pair<int64_t, CacheKind>> parse_past_name(const std::string& name) {
  const std::string prefix = kPastPrefix;
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  auto dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return std::nullopt;
  int64_t layer = -1;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + dot;
  auto [p, ec] = std::from_chars(first, last, layer);
  if (ec != std::errc() || p != last || layer < 0) return std::nullopt;
  auto kind = kind_from_suffix(name.substr(dot + 1));
  if (!kind) return std::nullopt;
  return std::make_pair(layer, *kind);
}

// "hidden_states.7" -> 7; nullopt for other names (also for the plain hidden_states of --exclude-lm-head).
std::optional<int64_t> parse_layer_output_name(const std::string& name) {
  const std::string prefix = "hidden_states.";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  int64_t k = -1;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  auto [p, ec] = std::from_chars(first, last, k);
  if (ec != std::errc() || p != last || first == last || k < 0) return std::nullopt;
  return k;
}

struct TensorDecl {
  ONNXTensorElementDataType dtype;
  std::vector<int64_t> shape;
};

TensorDecl input_decl(const Ort::Session& session, size_t i) {
  // Keep the TypeInfo alive: the tensor info is a view into it.
  Ort::TypeInfo type_info = session.GetInputTypeInfo(i);
  auto tensor_info = type_info.GetTensorTypeAndShapeInfo();
  return {tensor_info.GetElementType(), tensor_info.GetShape()};
}

TensorDecl output_decl(const Ort::Session& session, size_t i) {
  Ort::TypeInfo type_info = session.GetOutputTypeInfo(i);
  auto tensor_info = type_info.GetTensorTypeAndShapeInfo();
  return {tensor_info.GetElementType(), tensor_info.GetShape()};
}

void expect_int64(const std::string& name, const TensorDecl& decl) {
  if (decl.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
    fail("model input " + name, "is " + element_type_name(decl.dtype) + ", expected int64");
}

// Checks what the loop assumes about a state tensor's declared shape: rank,
// and that only batch (and the KV length) may be symbolic.
void check_cache_shape(const CacheSpec& spec) {
  const size_t rank = spec.kind == CacheKind::ConvState ? 3 : 4;
  if (spec.shape.size() != rank)
    fail("model input " + spec.input_name, "has rank " + std::to_string(spec.shape.size()) + ", expected " +
                                               std::to_string(rank));
  const bool kv = is_kv(spec.kind);
  for (size_t d = 1; d < rank; ++d) {
    if (kv && d == 2) continue;  // the past length
    if (spec.shape[d] <= 0)
      fail("model input " + spec.input_name, "dimension " + std::to_string(d) + " is not static");
  }
  float_element_size(spec.dtype);  // throws for a non-float state
}

}  // namespace

const char* cache_kind_suffix(CacheKind kind) {
  switch (kind) {
    case CacheKind::Key: return "key";
    case CacheKind::Value: return "value";
    case CacheKind::ConvState: return "conv_state";
    case CacheKind::RecurrentState: return "recurrent_state";
  }
  return "?";
}

std::vector<int64_t> ModelIo::full_attention_layers() const {
  std::vector<int64_t> layers;
  for (const auto& c : caches)
    if (c.kind == CacheKind::Key) layers.push_back(c.layer);
  return layers;
}

std::vector<int64_t> ModelIo::linear_attention_layers() const {
  std::vector<int64_t> layers;
  for (const auto& c : caches)
    if (c.kind == CacheKind::RecurrentState) layers.push_back(c.layer);
  return layers;
}

const CacheSpec& ModelIo::cache(int64_t layer, CacheKind kind) const {
  for (const auto& c : caches)
    if (c.layer == layer && c.kind == kind) return c;
  fail("model", std::string("layer ") + std::to_string(layer) + " has no " + cache_kind_suffix(kind) + " input");
}

ModelIo describe_model_io(const Ort::Session& session) {
  ModelIo io;
  bool has_input_ids = false;
  const auto input_names = session.GetInputNames();
  for (size_t i = 0; i < input_names.size(); ++i) {
    const std::string& name = input_names[i];
    TensorDecl decl = input_decl(session, i);
    if (name == "input_ids") {
      expect_int64(name, decl);
      has_input_ids = true;
    } else if (name == "inputs_embeds") {
      if (decl.shape.size() != 3) fail("model input inputs_embeds", "expected shape [batch, sequence, hidden]");
      float_element_size(decl.dtype);  // throws for a non-float input
      io.has_inputs_embeds = true;
      io.embeds_dtype = decl.dtype;
    } else if (name == "attention_mask") {
      expect_int64(name, decl);
      io.has_attention_mask = true;
    } else if (name == "position_ids") {
      expect_int64(name, decl);
      if (decl.shape.size() == 3 && decl.shape[0] == 3) io.mrope_positions = true;
      else if (decl.shape.size() != 2) fail("model input position_ids", "expected shape [batch, sequence] or [3, batch, sequence]");
      io.has_position_ids = true;
    } else if (auto parsed = parse_past_name(name)) {
      CacheSpec spec;
      spec.layer = parsed->first;
      spec.kind = parsed->second;
      spec.input_name = name;
      spec.output_name = kPresentPrefix + std::to_string(spec.layer) + "." + cache_kind_suffix(spec.kind);
      spec.dtype = decl.dtype;
      spec.shape = decl.shape;
      check_cache_shape(spec);
      io.caches.push_back(std::move(spec));
    } else {
      fail("model input " + name, "is not one the generation loop can feed");
    }
  }
  if (!has_input_ids && !io.has_inputs_embeds) fail("model", "has no input_ids (or inputs_embeds) input");
  // Inputs with a default are not among GetInputNames(): ONNX Runtime lists them apart.
  Ort::AllocatorWithDefaultOptions names_allocator;
  for (size_t i = 0; i < session.GetOverridableInitializerCount(); ++i)
    if (std::string(session.GetOverridableInitializerNameAllocated(i, names_allocator).get()) == "logits_to_keep")
      io.has_logits_to_keep = true;

  const auto output_names = session.GetOutputNames();
  const std::set<std::string> outputs(output_names.begin(), output_names.end());
  bool has_logits = false;
  for (size_t i = 0; i < output_names.size(); ++i) {
    if (output_names[i] != "logits") continue;
    TensorDecl decl = output_decl(session, i);
    if (decl.shape.size() != 3) fail("model output logits", "expected shape [batch, sequence, vocab]");
    io.logits_dtype = decl.dtype;
    io.logits_vocab = decl.shape[2] > 0 ? decl.shape[2] : 0;
    io.logits_last_position_only = decl.shape[1] == 1;
    has_logits = true;
  }
  if (!has_logits) fail("model", "has no logits output");
  // Layer outputs: every index from 0 up, each [B, S, hidden] in a float type.
  std::map<int64_t, std::string> layer_outputs;
  for (size_t i = 0; i < output_names.size(); ++i) {
    auto k = parse_layer_output_name(output_names[i]);
    if (!k) continue;
    const TensorDecl decl = output_decl(session, i);
    if (decl.shape.size() != 3) fail("model output " + output_names[i], "expected shape [batch, sequence, hidden]");
    float_element_size(decl.dtype);  // throws for a non-float output
    layer_outputs[*k] = output_names[i];
  }
  for (const auto& [k, name] : layer_outputs) {
    if (k != int64_t(io.layer_outputs.size()))
      fail("model output " + name, "hidden_states." + std::to_string(io.layer_outputs.size()) + " is missing");
    io.layer_outputs.push_back(name);
  }
  for (const auto& c : io.caches)
    if (!outputs.count(c.output_name)) fail("model", "input " + c.input_name + " has no matching output " + c.output_name);

  std::sort(io.caches.begin(), io.caches.end(), [](const CacheSpec& a, const CacheSpec& b) {
    return a.layer != b.layer ? a.layer < b.layer : a.kind < b.kind;
  });
  // A full-attention layer needs both halves of its KV cache, a linear one both states.
  for (const auto& c : io.caches) {
    auto partner = c.kind == CacheKind::Key              ? CacheKind::Value
                   : c.kind == CacheKind::Value          ? CacheKind::Key
                   : c.kind == CacheKind::ConvState      ? CacheKind::RecurrentState
                                                         : CacheKind::ConvState;
    io.cache(c.layer, partner);
  }
  return io;
}

std::string ort_error_line(const Ort::Exception& e) {
  std::string text = e.what();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

namespace {

// The environment's log sink (ORT's default one has no way to hand messages
// to the program): prints from WARNING up as ORT would, and keeps messages
// for an OrtLogCapture while one lives.
struct LogCaptureState {
  std::mutex mutex;
  bool active = false;
  OrtLoggingLevel level = ORT_LOGGING_LEVEL_WARNING;
  std::vector<std::string> messages;
};

LogCaptureState& log_capture_state() {
  static LogCaptureState state;
  return state;
}

// What deltagen's graphs do on purpose: logits_to_keep is an input with a
// default, i.e. an initializer listed among the inputs, which ORT warns about
// at every load.
bool by_design(const char* message) {
  return std::strstr(message, "Initializer logits_to_keep appears in graph inputs") != nullptr;
}

void ORT_API_CALL log_to_stderr(void*, OrtLoggingLevel severity, const char* category, const char* logid,
                                const char* code_location, const char* message) {
  LogCaptureState& state = log_capture_state();
  {
    std::lock_guard lock(state.mutex);
    if (state.active && severity >= state.level) state.messages.emplace_back(message);
  }
  if (severity < ORT_LOGGING_LEVEL_WARNING || by_design(message)) return;
  static const char kLetters[] = "VIWEF";
  const char letter = severity >= 0 && severity <= ORT_LOGGING_LEVEL_FATAL ? kLetters[severity] : '?';
  std::fprintf(stderr, "[%c:%s:%s, %s] %s\n", letter, category, logid, code_location, message);
}

}  // namespace

Ort::Env& ort_env() {
  static Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "deltagen", log_to_stderr, nullptr);
  return env;
}

OrtLogCapture::OrtLogCapture(OrtLoggingLevel level) {
  LogCaptureState& state = log_capture_state();
  {
    std::lock_guard lock(state.mutex);
    if (state.active) fail("ONNX Runtime log", "already being captured");
    state.active = true;
    state.level = level;
    state.messages.clear();
  }
  // Sessions created from now on take this level too (their loggers start
  // at the environment's level).
  if (level < ORT_LOGGING_LEVEL_WARNING) ort_env().UpdateEnvWithCustomLogLevel(level);
}

OrtLogCapture::~OrtLogCapture() {
  LogCaptureState& state = log_capture_state();
  if (state.level < ORT_LOGGING_LEVEL_WARNING) ort_env().UpdateEnvWithCustomLogLevel(ORT_LOGGING_LEVEL_WARNING);
  std::lock_guard lock(state.mutex);
  state.active = false;
  state.messages.clear();
}

std::vector<std::string> OrtLogCapture::messages() const {
  LogCaptureState& state = log_capture_state();
  std::lock_guard lock(state.mutex);
  return state.messages;
}

Model::Model(fs::path dir, GenaiConfig config, Ort::Session session)
    : dir_(std::move(dir)), config_(std::move(config)), session_(std::move(session)),
      io_(describe_model_io(session_)) {}

std::unique_ptr<Model> Model::load(const fs::path& dir, const RuntimeOptions& options) {
  if (!fs::is_directory(dir)) fail(dir.string(), "model folder not found");
  GenaiConfig config = load_genai_config(dir / "genai_config.json");
  const fs::path model_path = dir / config.model_filename;
  if (!fs::is_regular_file(model_path)) fail(model_path.string(), "model file not found");

  Ort::SessionOptions session_options;
  session_options.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_ALL);
  // One request at a time: all parallelism is inside the kernels.
  session_options.SetExecutionMode(ExecutionMode::ORT_SEQUENTIAL);
  session_options.SetInterOpNumThreads(1);
  // ORT caches a memory pattern per set of input shapes; the attention mask
  // grows by one column every step, so the cache would grow with every token.
  session_options.DisableMemPattern();
  if (options.intra_op_threads > 0) session_options.SetIntraOpNumThreads(options.intra_op_threads);
  const ExecutionProvider ep = options.ep.value_or(config.provider.value_or(ExecutionProvider::Cpu));
  // deltagen's kernels are CPU code: on another provider the model runs as built.
  KernelOptions kernels = resolved_kernel_options(options.kernels);
  if (ep != ExecutionProvider::Cpu) kernels.set = KernelSet::Ort;
  for (const auto& [key, value] : kernel_session_config(kernels))
    session_options.AddConfigEntry(key.c_str(), value.c_str());
  if (options.idle_threads_sleep) make_idle_threads_sleep(session_options);
  for (const auto& [key, value] : options.session_config) session_options.AddConfigEntry(key.c_str(), value.c_str());
  // DELTAGEN_ORT_PROFILE=PREFIX writes ONNX Runtime's per-node profile
  // (PREFIX_<date>.json, Chrome trace events: "Node" events carry args.op_name
  // and dur in µs) when the session ends; docs/performance.md shows a summary.
  std::string profile_prefix = options.profile_prefix;
  if (const char* prefix = std::getenv("DELTAGEN_ORT_PROFILE"); profile_prefix.empty() && prefix && *prefix)
    profile_prefix = prefix;
  if (!profile_prefix.empty()) session_options.EnableProfiling(profile_prefix.c_str());

  ort_env();  // providers log through the environment's logger: it must exist first
  append_execution_provider(session_options, ep);

  try {
    if (kernels.set == KernelSet::Ort) {
      Ort::Session session(ort_env(), model_path.c_str(), session_options);
      std::unique_ptr<Model> model(new Model(dir, std::move(config), std::move(session)));
      model->ep_ = ep;
      model->profiling_ = !profile_prefix.empty();
      model->load_side_models(session_options, false);
      return model;
    }
    rewrite::RewriteSummary rewritten;
    Ort::Session session =
        ortext::create_session_with_fast_kernels(ort_env(), model_path, session_options, &rewritten,
                                                 {.fusions = kernels.set == KernelSet::Deltagen});
    // What the kernels packed, and what ORT read while loading (a Gather's
    // table it scanned), no longer needs to be resident: the pages come back
    // from the file when a kernel reads them (ortext/released_weights.h).
    if (rewritten.released > 0) ortext::release_clean_file_pages(model_path.string() + ".data");
    std::unique_ptr<Model> model(new Model(dir, std::move(config), std::move(session)));
    model->fast_kernel_nodes_ = rewritten.deltagen_nodes();
    model->profiling_ = !profile_prefix.empty();
    model->load_side_models(session_options, true);
    return model;
  } catch (const Ort::Exception& e) {
    const std::string why = execution_provider_failure(ep, ort_error_line(e));
    if (!why.empty()) fail(std::string("execution provider ") + execution_provider_name(ep), why);
    fail(model_path.string(), "ONNX Runtime cannot load it: " + ort_error_line(e));
  }
}

void Model::make_idle_threads_sleep(Ort::SessionOptions& options) {
  options.AddConfigEntry("session.intra_op.allow_spinning", "0");
}

std::string Model::end_profiling() {
  if (!profiling_) return "";
  profiling_ = false;
  Ort::AllocatorWithDefaultOptions allocator;
  return session_.EndProfilingAllocated(allocator).get();
}

int64_t Model::vocab_size() const {
  return io_.logits_vocab > 0 ? io_.logits_vocab : config_.vocab_size;
}

}  // namespace deltagen
