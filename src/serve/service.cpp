#include "serve/service.h"

#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <random>

#include "runtime/fidelity_card_file.h"
#include "runtime/engine_impl.h"
#include "runtime/image_prompt.h"
#include "serve/data_url.h"
#include "serve/router_metrics.h"
#include "tokenizer/tokenizer.h"

namespace deltagen::serve {
using nlohmann::ordered_json;

namespace {

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

uint64_t random_u64() {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mutex);
  return rng();
}

std::string random_id(const char* prefix) {
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id = prefix;
  uint64_t a = random_u64(), b = random_u64();
  for (int i = 0; i < 24; ++i) {
    uint64_t& r = i < 12 ? a : b;
    id += kDigits[r % 62];
    r /= 62;
  }
  return id;
}

// A Tokenizer or template failure while preparing a request is the client's
// doing (a template's raise_exception, text that does not encode).
[[noreturn]] void client_error(const Error& e, const char* param) {
  throw ApiError(400, "invalid_request_error", param, e.what());
}

}  // namespace

Service::Service(std::shared_ptr<Engine> engine, ChatTemplate chat_template, Scheduler& scheduler, ServiceOptions options)
    : engine_(std::move(engine)),
      template_(std::move(chat_template)),
      scheduler_(scheduler),
      options_(std::move(options)),
      chat_stop_ids_(reply_end_ids(engine_->tokenizer())),
      created_(unix_time()) {
  // A card that does not parse stops the server at start (an Error naming the file).
  if (auto card = read_fidelity_card(engine_->model_dir())) fidelity_ = std::move(*card);
}

SamplingOptions Service::defaults() const { return engine_->sampling_defaults(); }

ReplyHeader Service::header(const char* prefix) const { return {random_id(prefix), unix_time(), options_.model_name}; }

SequenceRequest Service::sequence_for(const CompletionParams& p, std::vector<int64_t> prompt) const {
  const int64_t limit = scheduler_.max_length();
  if (int64_t(prompt.size()) >= limit)
    throw ApiError(400, "invalid_request_error", "messages",
                   "This model's maximum context length is " + std::to_string(limit) + " tokens. However, your request has " +
                       std::to_string(prompt.size()) + " prompt tokens, which leaves no room for a reply.",
                   "context_length_exceeded");
  SequenceRequest r;
  r.prompt = std::move(prompt);
  GenerationOptions& o = r.options;
  o.max_new_tokens = p.max_tokens.value_or(limit);
  o.sampling = p.sampling;
  if (!p.seed_given) o.sampling.seed = random_u64();
  o.stop_strings = p.stop;
  o.stop_at_eos = !p.ignore_eos;
  r.top_logprobs = p.top_logprobs;
  // response_format: the sampler may only choose tokens that keep the reply
  // valid JSON (of the schema). Whitespace runs up to 16 bytes: enough for
  // pretty-printed JSON nested 7 deep, and a model drawn to newlines gets to
  // the point (llama.cpp's JSON grammar allows 20).
  const JsonGrammarOptions grammar_options{.max_whitespace_run = 16};
  if (p.response_format == ResponseFormat::JsonObject) {
    r.grammar = std::make_shared<const JsonGrammar>(JsonGrammar::any_object(grammar_options));
  } else if (p.response_format == ResponseFormat::JsonSchema) {
    try {
      r.grammar = std::make_shared<const JsonGrammar>(JsonGrammar::from_schema(p.json_schema, grammar_options));
    } catch (const Error& e) {
      throw ApiError(400, "invalid_request_error", "response_format.json_schema", e.what());
    }
  }
  return r;
}

PreparedChat Service::prepare_chat(std::string_view body) const {
  PreparedChat c;
  c.params = parse_chat_params(parse_body(body), defaults());
  ChatRenderInputs inputs{c.params.messages, c.params.tools, c.params.template_kwargs, true};
  std::vector<int64_t> prompt_ids, base_ids;
  try {
    c.prompt = template_.render(inputs);
    prompt_ids = tokenizer().encode(c.prompt);
    // The end of the history without the generation prompt: the next turn of
    // this conversation renders the same text up to here (Qwen3.5's template
    // re-renders the reply after it without its reasoning), so its state is
    // the one worth keeping.
    inputs.add_generation_prompt = false;
    const std::string base = template_.render(inputs);
    if (c.prompt.compare(0, base.size(), base) == 0) base_ids = tokenizer().encode(base);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    // The template's own errors name its file: the client hears the file
    // name, not where the server keeps it.
    std::string message = e.what();
    const std::string& file = template_.name();
    if (message.rfind(file, 0) == 0) message = std::filesystem::path(file).filename().string() + message.substr(file.size());
    throw ApiError(400, "invalid_request_error", "messages", message);
  }
  int64_t checkpoint = 0;
  if (!base_ids.empty() && base_ids.size() < prompt_ids.size() &&
      std::equal(base_ids.begin(), base_ids.end(), prompt_ids.begin()))
    checkpoint = int64_t(base_ids.size());
  prepare_images(c, prompt_ids, checkpoint);
  std::shared_ptr<const RowImages> images = std::move(c.sequence.images);
  std::vector<SnapshotImage> image_keys = std::move(c.sequence.image_keys);
  c.sequence = sequence_for(c.params, std::move(prompt_ids));
  c.sequence.images = std::move(images);
  c.sequence.image_keys = std::move(image_keys);
  if (checkpoint > 0) c.sequence.checkpoints.push_back(checkpoint);
  if (!c.params.ignore_eos) c.sequence.options.extra_stop_ids = chat_stop_ids_;
  c.header = header("chatcmpl-");
  c.parser.starts_in_reasoning = prompt_opens_reasoning(c.prompt);
  // A reply that starts with reasoning is JSON only after it: the constraint waits for </think>.
  if (c.sequence.grammar && c.parser.starts_in_reasoning)
    c.sequence.grammar_after = tokenizer().token_to_id("</think>").value_or(-1);
  c.parser.parse_tool_calls = !c.params.tools.is_null();  // parser.tools: set by the caller, see PreparedChat
  c.parser.id_seed = random_u64();
  return c;
}

void Service::prepare_images(PreparedChat& c, std::vector<int64_t>& prompt, int64_t& checkpoint) const {
  Model& model = *detail::Access::engine(*engine_).model;
  const std::vector<MessageImage>& images = c.params.images;
  if (images.empty()) {
    // Pads typed as text would reach the model without features.
    if (model.has_vision() && std::count(prompt.begin(), prompt.end(), model.config().image_token_id) > 0)
      bad_request("messages", "the prompt holds <|image_pad|> tokens but the request has no images");
    return;
  }
  if (!model.has_vision())
    bad_request(images[0].field, "this model takes no images (it was not built with --vision)");
  if (int64_t(images.size()) > options_.max_images)
    bad_request("messages", std::to_string(images.size()) + " images, more than the " +
                                std::to_string(options_.max_images) + " this server takes per request");
  std::vector<ImageInput> inputs;
  for (const MessageImage& image : images) {
    if (image.source.empty()) bad_request(image.field, "names no image (send image_url.url as a data: URL)");
    inputs.push_back({image_from_data_url(image.source, image.field, options_.max_image_bytes), image.field});
  }
  const int64_t pads_before_checkpoint =
      std::count(prompt.begin(), prompt.begin() + checkpoint, model.config().image_token_id);
  ImagePrompt ready;
  try {
    std::lock_guard lock(vision_mutex_);
    ready = prepare_image_prompt(model, prompt, inputs, 0);
  } catch (const Error& e) {
    // A bad image names its field first ("messages[0].content[1].image_url.url: ..."); pads that do not
    // match the images (one typed as text) are the messages' fault.
    const std::string message = e.what();
    const std::string param = message.rfind("messages[", 0) == 0 ? message.substr(0, message.find(':')) : "messages";
    throw ApiError(400, "invalid_request_error", param, message);
  }
  for (int64_t k = 0; k < pads_before_checkpoint && k < int64_t(ready.keys.size()); ++k)
    checkpoint += ready.keys[size_t(k)].tokens - 1;
  prompt = std::move(ready.ids);
  c.sequence.images = std::make_shared<const RowImages>(std::move(ready.images));
  c.sequence.image_keys = std::move(ready.keys);
}

PreparedText Service::prepare_text(std::string_view body) const {
  PreparedText t;
  t.params = parse_text_params(parse_body(body), defaults());
  std::vector<int64_t> ids = t.params.prompt_ids;
  try {
    if (t.params.prompt) {
      if (t.params.prompt->empty()) bad_request("prompt", "must not be empty");
      ids = tokenizer().encode(*t.params.prompt);
    }
    check_token_ids(ids, "prompt");
    if (t.params.echo) t.echo = t.params.prompt ? *t.params.prompt : tokenizer().decode(ids);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    client_error(e, "prompt");
  }
  t.sequence = sequence_for(t.params, std::move(ids));
  t.header = header("cmpl-");
  return t;
}

void Service::check_token_ids(const std::vector<int64_t>& ids, const char* param) const {
  const int64_t vocab = engine_->vocab_size();
  for (int64_t id : ids)
    if (id < 0 || id >= vocab)
      bad_request(param, "token id " + std::to_string(id) + " is outside the vocabulary (size " + std::to_string(vocab) + ")");
}

ordered_json Service::models() const {
  ordered_json model;
  model["id"] = options_.model_name;
  model["object"] = "model";
  model["created"] = created_;
  model["owned_by"] = "deltagen";
  // vLLM's fields, which routers and clients built for it read.
  model["root"] = options_.model_root.empty() ? options_.model_name : options_.model_root;
  model["parent"] = nullptr;
  model["max_model_len"] = scheduler_.max_length();
  model["meta"] = {{"context_length", scheduler_.max_length()},
                   {"vocab_size", engine_->vocab_size()},
                   {"chat_template", template_.name()},
                   {"parallel", scheduler_.options().parallel}};
  if (!fidelity_.is_null()) model["fidelity"] = fidelity_;
  return {{"object", "list"}, {"data", ordered_json::array({model})}};
}

ordered_json Service::tokenize(std::string_view body) const {
  const ordered_json j = parse_body(body);
  if (!j.contains("content") || !j["content"].is_string()) bad_request("content", "must be a string");
  bool pieces = false;
  if (j.contains("with_pieces")) {
    if (!j["with_pieces"].is_boolean()) bad_request("with_pieces", "must be a boolean");
    pieces = j["with_pieces"].get<bool>();
  }
  std::vector<int64_t> ids;
  try {
    ids = tokenizer().encode(j["content"].get<std::string>());
  } catch (const Error& e) {
    client_error(e, "content");
  }
  ordered_json tokens = ordered_json::array();
  for (int64_t id : ids) {
    if (pieces) tokens.push_back({{"id", id}, {"piece", token_text(tokenizer(), id)}});
    else tokens.push_back(id);
  }
  return {{"tokens", tokens}};
}

ordered_json Service::detokenize(std::string_view body) const {
  const ordered_json j = parse_body(body);
  if (!j.contains("tokens") || !j["tokens"].is_array()) bad_request("tokens", "must be a list of token ids");
  std::vector<int64_t> ids;
  for (const ordered_json& id : j["tokens"]) {
    if (!id.is_number_integer()) bad_request("tokens", "must be a list of token ids");
    ids.push_back(id.get<int64_t>());
  }
  check_token_ids(ids, "tokens");
  return {{"content", tokenizer().decode(ids)}};
}

ordered_json Service::render_chat(std::string_view body) const {
  PreparedChat c = prepare_chat(body);
  scheduler_.check(c.sequence);
  return {{"model", options_.model_name}, {"prompt", c.prompt}, {"token_ids", c.sequence.prompt},
          {"prompt_tokens", c.sequence.prompt.size()}};
}

ordered_json Service::render_text(std::string_view body) const {
  PreparedText t = prepare_text(body);
  scheduler_.check(t.sequence);
  return {{"model", options_.model_name}, {"token_ids", t.sequence.prompt}, {"prompt_tokens", t.sequence.prompt.size()}};
}

ordered_json Service::version() const {
  return {{"name", "deltagen"}, {"version", kServeVersion}, {"onnxruntime", Ort::GetVersionString()},
          {"model", options_.model_name}};
}

void Service::count_response(int status) const {
  if (status < 400) ++responses_2xx_;
  else if (status < 500) ++responses_4xx_;
  else ++responses_5xx_;
}

namespace {

struct ProcessMemory {
  int64_t resident_bytes = 0;
  int64_t heap_bytes = -1;  // -1: not known (not glibc)
};

ProcessMemory process_memory() {
  ProcessMemory m;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long long pages = 0, resident = 0;
    if (std::fscanf(f, "%lld %lld", &pages, &resident) == 2) m.resident_bytes = resident * sysconf(_SC_PAGESIZE);
    std::fclose(f);
  }
#ifdef __GLIBC__
  // All arenas: in-use chunks plus mmap'd blocks. Unlike the resident size it
  // does not move with fragmentation or with pages malloc keeps for reuse.
  const struct mallinfo2 info = mallinfo2();
  m.heap_bytes = int64_t(info.uordblks + info.hblkhd);
#endif
  return m;
}

}  // namespace

std::string Service::metrics() const {
  const SchedulerStats s = scheduler_.stats();
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, double value, const char* labels = "") {
    char line[512];
    std::snprintf(line, sizeof line, "# HELP deltagen_%s %s\n# TYPE deltagen_%s %s\ndeltagen_%s%s %.17g\n", name, help,
                  name, type, name, labels, value);
    out += line;
  };
  auto sample = [&out](const char* name, const char* labels, double value) {
    char line[256];
    std::snprintf(line, sizeof line, "deltagen_%s%s %.17g\n", name, labels, value);
    out += line;
  };
  metric("http_responses_total", "counter", "HTTP responses by status class.", double(responses_2xx_.load()),
         "{class=\"2xx\"}");
  sample("http_responses_total", "{class=\"4xx\"}", double(responses_4xx_.load()));
  sample("http_responses_total", "{class=\"5xx\"}", double(responses_5xx_.load()));
  metric("requests_total", "counter", "Sequences submitted to the scheduler.", double(s.requests));
  metric("requests_finished_total", "counter", "Sequences that ended normally.", double(s.finished));
  metric("requests_cancelled_total", "counter", "Sequences cancelled (client gone, shutdown).", double(s.cancelled));
  metric("requests_failed_total", "counter", "Sequences that failed.", double(s.failed));
  metric("requests_running", "gauge", "Sequences prefilling or decoding.", double(s.running));
  metric("requests_queued", "gauge", "Sequences waiting for a row (queue depth).", double(s.queued));
  metric("prompt_tokens_total", "counter", "Prompt tokens of all requests.", double(s.prompt_tokens));
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens restored from the prompt cache.", double(s.cached_tokens));
  metric("prefill_tokens_total", "counter", "Prompt tokens run through the model.", double(s.prefilled_tokens));
  metric("generated_tokens_total", "counter", "Tokens generated.", double(s.generated_tokens));
  metric("prefill_seconds_total", "counter", "Time spent in prefill runs.", s.prefill_seconds);
  metric("decode_seconds_total", "counter", "Time spent in decode steps.", s.decode_seconds);
  metric("decode_steps_total", "counter", "Batched decode steps.", double(s.decode_steps));
  // By the number of sequences a step ran: how full the batches are, and the
  // step time at each width (what `deltagen bench-serve` reads).
  auto by_rows = [&](const char* name, const char* help, const auto& values) {
    for (size_t rows = 1; rows < values.size(); ++rows) {
      const std::string label = "{rows=\"" + std::to_string(rows) + "\"}";
      if (rows == 1)
        metric(name, "counter", help, double(values[rows]), label.c_str());
      else
        sample(name, label.c_str(), double(values[rows]));
    }
  };
  by_rows("decode_steps_by_rows_total", "Decode steps by the number of sequences they ran.", s.steps_by_rows);
  by_rows("decode_seconds_by_rows_total", "Wall time of the decode steps by the number of sequences.", s.seconds_by_rows);
  // Speculative decoding (serve --speculative): guesses made and kept, and the
  // runs that checked them (a kept share = accepted / drafted).
  metric("speculative_verify_runs_total", "counter", "Runs that checked a sequence's guesses.", double(s.verify_runs));
  metric("speculative_drafted_tokens_total", "counter", "Guessed tokens checked.", double(s.drafted_tokens));
  metric("speculative_accepted_tokens_total", "counter", "Guessed tokens kept (the model chose them).",
         double(s.accepted_tokens));
  metric("speculative_replay_runs_total", "counter", "Runs that rolled a sequence back after a missed guess.",
         double(s.replay_runs));
  metric("speculative_verify_seconds_total", "counter", "Time spent guessing, checking and rolling back.",
         s.verify_seconds);
  metric("prefill_tokens_per_second", "gauge", "Prompt tokens per second of prefill time, since start.",
         s.prefill_seconds > 0 ? double(s.prefilled_tokens) / s.prefill_seconds : 0.0);
  metric("decode_tokens_per_second", "gauge", "Generated tokens per second of decode time (all streams), since start.",
         s.decode_seconds > 0 ? double(s.decode_rows) / s.decode_seconds : 0.0);
  metric("prompt_cache_lookups_total", "counter", "Prompt cache lookups.", double(s.cache.lookups));
  metric("prompt_cache_hits_total", "counter", "Prompt cache hits.", double(s.cache.hits));
  metric("prompt_cache_entries", "gauge", "Snapshots in memory.", double(s.cache.entries));
  metric("prompt_cache_bytes", "gauge", "Bytes of snapshots in memory.", double(s.cache.memory_bytes));
  metric("prompt_cache_disk_entries", "gauge", "Snapshots spilled to disk.", double(s.cache.disk_entries));
  metric("prompt_cache_disk_bytes", "gauge", "Bytes of snapshots on disk.", double(s.cache.disk_bytes));
  metric("prompt_cache_evictions_total", "counter", "Snapshots evicted from memory.", double(s.cache.evictions));
  const ProcessMemory memory = process_memory();
  metric("resident_bytes", "gauge", "Resident set size of the server process.", double(memory.resident_bytes));
  if (memory.heap_bytes >= 0)
    metric("heap_bytes", "gauge", "Bytes malloc has handed out and not had back (what a leak grows).",
           double(memory.heap_bytes));
  append_router_metrics(out, s, scheduler_.options(), scheduler_.max_length(), options_.model_name);
  return out;
}

}  // namespace deltagen::serve
