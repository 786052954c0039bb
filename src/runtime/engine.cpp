// Engine and generate_batch of the public API.
#include <algorithm>

#include "runtime/engine_impl.h"
#include "runtime/generation.h"
#include "runtime/generator.h"
#include "deltagen/error.h"

namespace deltagen {
namespace fs = std::filesystem;

namespace {

// An explicit tokenizer path must exist; otherwise the model folder's
// tokenizer.json is used when there is one.
fs::path find_tokenizer(const fs::path& model_dir, const fs::path& requested) {
  if (!requested.empty()) {
    if (!fs::exists(requested)) fail(requested.string(), "tokenizer not found");
    return requested;
  }
  return fs::is_regular_file(model_dir / "tokenizer.json") ? model_dir : fs::path();
}

}  // namespace

const Tokenizer* Engine::Impl::tokenizer_or_null() const {
  if (tokenizer_path.empty()) return nullptr;
  std::call_once(tokenizer_loaded, [this] { tokenizer.emplace(Tokenizer::load(tokenizer_path)); });
  return &*tokenizer;
}

const Tokenizer* Engine::Impl::tokenizer_for(const GenerationOptions& options) const {
  if (!options.stop_strings.empty()) {
    if (tokenizer_path.empty()) fail("generate", "stop strings need a tokenizer (no tokenizer.json in the model folder)");
    return tokenizer_or_null();
  }
  try {
    return tokenizer_or_null();
  } catch (const Error&) {
    return nullptr;
  }
}

int64_t resolve_max_length(const Engine& engine, int64_t requested) {
  if (requested < 0) fail("max length", "must not be negative");
  return requested > 0 ? requested : engine.max_length();
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::shared_ptr<Engine> Engine::load(const fs::path& model_dir, const EngineOptions& options) {
  if (options.threads < 0) fail("threads", "must not be negative");
  auto impl = std::make_unique<Impl>();
  impl->model = Model::load(model_dir, RuntimeOptions{.intra_op_threads = options.threads, .kernels = options.kernels,
                                                     .ep = options.ep, .idle_threads_sleep = options.idle_threads_sleep});
  const int64_t context = impl->model->config().context_length;
  if (options.max_length < 0) fail("max length", "must not be negative");
  if (options.max_length > 0 && context > 0 && options.max_length > context)
    fail("max length", std::to_string(options.max_length) + " exceeds the model's context length " +
                           std::to_string(context));
  impl->max_length = options.max_length > 0 ? options.max_length : default_max_length(*impl->model);
  impl->tokenizer_path = find_tokenizer(model_dir, options.tokenizer);
  return std::shared_ptr<Engine>(new Engine(std::move(impl)));
}

int64_t Engine::vocab_size() const { return impl_->model->vocab_size(); }
int64_t Engine::context_length() const { return impl_->model->config().context_length; }
int64_t Engine::max_length() const { return impl_->max_length; }
const std::vector<int64_t>& Engine::eos_token_ids() const { return impl_->model->config().eos_token_ids; }
const SamplingOptions& Engine::sampling_defaults() const { return impl_->model->config().sampling; }
const fs::path& Engine::model_dir() const { return impl_->model->dir(); }
bool Engine::has_tokenizer() const { return !impl_->tokenizer_path.empty(); }

const Tokenizer& Engine::tokenizer() const {
  const Tokenizer* t = impl_->tokenizer_or_null();
  if (!t) fail(model_dir().string(), "no tokenizer.json in the model folder (give token ids, or a tokenizer path)");
  return *t;
}

std::vector<int64_t> Engine::encode(std::string_view text) const { return tokenizer().encode(text); }
std::string Engine::decode(std::span<const int64_t> ids) const { return tokenizer().decode(ids); }

std::vector<GenerationResult> generate_batch(Engine& engine, std::span<const std::vector<int64_t>> prompts,
                                             const GenerationOptions& options, int64_t max_length,
                                             const BatchStreamCallback& on_text) {
  if (prompts.empty()) fail("generate", "no prompts");
  Generator generator(*detail::Access::engine(engine).model, int64_t(prompts.size()), resolve_max_length(engine, max_length));
  const Tokenizer* tokenizer = detail::Access::engine(engine).tokenizer_for(options);
  TokenCallback callback;
  if (on_text) callback = [&](int64_t row, int64_t token, std::string_view text) { return on_text(row, text, token); };
  return generate_rows(generator, prompts, options, tokenizer, callback);
}

}  // namespace deltagen
