// Loading a built model folder (model.onnx [+ model.onnx.data],
// genai_config.json) into an ONNX Runtime session, and describing the
// session's inputs and outputs the way the generation loop needs them.
//
// The graph I/O contract (onnxruntime-genai's, text-only Qwen3.5):
//   inputs  input_ids [B,S] int64, attention_mask [B,past+S] int64,
//           position_ids [B,S] int64, and per layer N either
//             past_key_values.N.key / .value           [B, kv_heads, past, head_dim]   (full attention)
//           or past_key_values.N.conv_state            [B, conv_dim, K-1]              (linear attention)
//              past_key_values.N.recurrent_state       [B, v_heads, d_k, d_v]
//   outputs logits [B,S,vocab] and present.N.<same suffix> for every past input;
//           optionally hidden_states.0 .. hidden_states.L [B,S,hidden] (a
//           --layer-outputs build), fetched only when asked (Generator::fetch_outputs).
// Which layers carry which state is discovered from the input names, never
// assumed from the layer index.
#pragma once
#include <cstdint>
#include <array>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <onnxruntime_cxx_api.h>

#include "runtime/genai_config.h"
#include "runtime/kernel_options.h"

namespace deltagen {

enum class CacheKind { Key, Value, ConvState, RecurrentState };
inline bool is_kv(CacheKind kind) { return kind == CacheKind::Key || kind == CacheKind::Value; }
const char* cache_kind_suffix(CacheKind kind);  // "key", "value", "conv_state", "recurrent_state"

// One piece of carried state: read from `input_name`, produced as `output_name`.
struct CacheSpec {
  int64_t layer = 0;
  CacheKind kind = CacheKind::Key;
  std::string input_name;   // past_key_values.N.<suffix>
  std::string output_name;  // present.N.<suffix>
  ONNXTensorElementDataType dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  std::vector<int64_t> shape;  // as declared by the model; -1 for a symbolic dimension
};

struct ModelIo {
  bool has_attention_mask = false;
  bool has_position_ids = false;
  // A --vision decoder: inputs_embeds [B, S, hidden] instead of input_ids
  // (Model::embed makes them), and position_ids [3, B, S] (T, H, W streams).
  bool has_inputs_embeds = false;
  ONNXTensorElementDataType embeds_dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  bool mrope_positions = false;
  ONNXTensorElementDataType logits_dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  int64_t logits_vocab = 0;  // last dim of `logits`; 0 when symbolic
  // logits are [B, 1, V] whatever the input length (a pruned lm_head): only
  // the last position's row exists.
  bool logits_last_position_only = false;
  // The model takes logits_to_keep (an input with a default, 0 = every
  // position): a run whose caller reads the last row asks for that row alone.
  bool has_logits_to_keep = false;
  std::vector<CacheSpec> caches;  // ordered by layer, then key/value/conv/recurrent
  // hidden_states.0 .. hidden_states.L in order (a --layer-outputs build), else empty.
  std::vector<std::string> layer_outputs;

  std::vector<int64_t> full_attention_layers() const;  // layers with a KV cache
  std::vector<int64_t> linear_attention_layers() const;  // layers with conv + recurrent state
  const CacheSpec& cache(int64_t layer, CacheKind kind) const;  // throws Error if absent
};

// Reads names, dtypes and shapes from the session; throws Error for an input
// or output the loop would not know how to feed (e.g. inputs_embeds).
ModelIo describe_model_io(const Ort::Session& session);

struct RuntimeOptions {
  int intra_op_threads = 0;  // 0 = ONNX Runtime's default (one per physical core)
  KernelOptions kernels;  // resolved at load (resolved_kernel_options); the CPU provider's only
  // Where the model runs; none = the provider it was built for
  // (genai_config.json, `build --target`), else the CPU.
  std::optional<ExecutionProvider> ep;
  // More session config entries (key, value), added after the kernels' own:
  // any ONNX Runtime setting; `bench --session-config` A/B-tests them.
  SessionConfig session_config;
  // The intra-op threads sleep once a run is over instead of spinning for the
  // next (EngineOptions::idle_threads_sleep says when that wins).
  bool idle_threads_sleep = false;
  // Non-empty: ONNX Runtime's profiler records every run of the session into
  // PREFIX_<date>.json (Chrome trace events); Model::end_profiling() closes it.
  // DELTAGEN_ORT_PROFILE=PREFIX does the same for any command.
  std::string profile_prefix;
};

// The process-wide ONNX Runtime environment (created on first use).
Ort::Env& ort_env();

// While one lives, ONNX Runtime's log messages of `level` and above (for
// the whole process: the environment's default logger and every session
// created meanwhile) are kept for messages(), besides being printed as usual
// from WARNING up. ORT names in them what it decided while loading a model,
// e.g. which nodes it put on the CPU on purpose. One at a time (Error otherwise).
class OrtLogCapture {
 public:
  explicit OrtLogCapture(OrtLoggingLevel level);
  ~OrtLogCapture();
  OrtLogCapture(const OrtLogCapture&) = delete;
  OrtLogCapture& operator=(const OrtLogCapture&) = delete;
  std::vector<std::string> messages() const;
};

// An ONNX Runtime error message on one line (deltagen errors are one line).
std::string ort_error_line(const Ort::Exception& e);

class Model {
 public:
  // `dir` holds genai_config.json and the model file it names. Throws Error.
  static std::unique_ptr<Model> load(const std::filesystem::path& dir, const RuntimeOptions& options = {});

  Ort::Session& session() { return session_; }
  const ModelIo& io() const { return io_; }
  const GenaiConfig& config() const { return config_; }
  const std::filesystem::path& dir() const { return dir_; }
  ExecutionProvider ep() const { return ep_; }
  // From the logits output shape, else from genai_config.json; 0 if neither says.
  int64_t vocab_size() const;
  // A --vision build: embedding.onnx and vision.onnx loaded beside the decoder.
  bool has_vision() const { return embedding_ != nullptr; }
  // inputs_embeds [batch, seq, hidden] of `ids` with feature rows [rows,
  // hidden] (fp32) scattered into its image-pad tokens, in the decoder's
  // embeds dtype. Throws Error on a model without embedding.onnx.
  Ort::Value embed(const int64_t* ids, int64_t batch, int64_t seq, const float* features, int64_t rows);
  // The image features [patches / merge^2, hidden] of one preprocessed image:
  // pixel_values [patches, patch_dim], grid (t, h, w). The first call loads
  // vision.onnx (Error naming the file if it does not load).
  std::vector<float> encode_image(const float* pixels, int64_t patches, int64_t patch_dim,
                                  const std::array<int64_t, 3>& grid);
  // vision.onnx's session, loaded on first use (a conversation without images
  // never loads the tower). Throws Error naming the file if it does not load.
  Ort::Session& vision_session();
  // mtp.onnx's session (the checkpoint's multi-token-prediction head),
  // loaded on first use. Throws Error naming the model folder when it has no
  // head, or the file when it does not load.
  Ort::Session& mtp_session();
  int64_t hidden_size() const { return hidden_size_; }  // from embedding.onnx; 0 for a text model
  // How many nodes (MatMulNBits, CausalConvWithState) run on deltagen's kernels.
  int64_t fast_kernel_nodes() const { return fast_kernel_nodes_; }
  // Stops the profiler (RuntimeOptions::profile_prefix) and returns the path
  // of the file it wrote; "" when the session was not profiled.
  std::string end_profiling();

 private:
  Model(std::filesystem::path dir, GenaiConfig config, Ort::Session session);
  // side_models.cpp: the sessions beside the decoder (embedding.onnx and
  // vision.onnx, mtp.onnx) take the decoder's options; fast_kernels: their
  // int4 MatMulNBits on deltagen's kernels.
  void load_side_models(const Ort::SessionOptions& options, bool fast_kernels);
  static void make_idle_threads_sleep(Ort::SessionOptions& options);

  std::filesystem::path dir_;
  GenaiConfig config_;
  Ort::Session session_;
  ModelIo io_;
  std::unique_ptr<Ort::Session> embedding_, vision_, mtp_;
  Ort::SessionOptions side_options_{nullptr};
  bool side_fast_kernels_ = false;
  std::mutex side_mutex_;  // the first image loads vision_, the first draft mtp_ (conversations may share the model)
  int64_t hidden_size_ = 0;
  int64_t fast_kernel_nodes_ = 0;
  ExecutionProvider ep_ = ExecutionProvider::Cpu;
  bool profiling_ = false;
};

}  // namespace deltagen
