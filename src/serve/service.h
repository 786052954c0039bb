// What the server's endpoints do, without HTTP: a request body in, a
// prepared sequence (prompt ids, checkpoints, sampling, how to shape the
// reply) or a JSON answer out. serve/http_server.cpp adds the transport:
// routes, auth, streaming, disconnects. Errors are ApiError (status + OpenAI
// error object).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/output_parser.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/scheduler.h"

namespace deltagen::serve {

// What GET /version reports: bumped when the server's API changes.
inline constexpr const char* kServeVersion = "0.2.0";

struct ServiceOptions {
  std::string model_name;  // what /v1/models lists and responses carry
  // Images (a --vision model): at most this many per request (more: 400)
  // and this many bytes each once base64-decoded (more: 413).
  int64_t max_images = 16;
  int64_t max_image_bytes = int64_t(20) << 20;
  std::string model_root;  // the model folder's name (/v1/models' "root"); model_name when empty
};

// A chat request ready to submit, with what its reply needs.
struct PreparedChat {
  ChatParams params;
  std::string prompt;  // the rendered template
  SequenceRequest sequence;
  ReplyHeader header;
  // Its `tools` is left null: point it at params.tools where the reply is made
  // (a pointer into this struct would not survive a move).
  ChatOutputParserOptions parser;
};

struct PreparedText {
  TextParams params;
  SequenceRequest sequence;
  ReplyHeader header;
  std::string echo;  // the prompt text, with "echo": true
};

class Service {
 public:
  Service(std::shared_ptr<Engine> engine, ChatTemplate chat_template, Scheduler& scheduler, ServiceOptions options);

  PreparedChat prepare_chat(std::string_view body) const;
  PreparedText prepare_text(std::string_view body) const;

  // The served model, with its fidelity card ("fidelity", the model
  // folder's fidelity.json as read at start) when it has one.
  nlohmann::ordered_json models() const;
  nlohmann::ordered_json tokenize(std::string_view body) const;    // llama-server's /tokenize
  nlohmann::ordered_json detokenize(std::string_view body) const;  // and /detokenize
  // POST /v1/chat/completions/render and /v1/completions/render: the prompt
  // ids a request would run, checked as the real endpoint checks it (the
  // same ApiErrors), without running it.
  nlohmann::ordered_json render_chat(std::string_view body) const;
  nlohmann::ordered_json render_text(std::string_view body) const;
  nlohmann::ordered_json version() const;  // GET /version

  // Prometheus text: requests, tokens, prefill/decode speed, cache, queue;
  // then the same under the names routers read (vllm:*, serve/router_metrics.h).
  std::string metrics() const;
  // Counted by the transport, per answer.
  void count_response(int status) const;

  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }
  Scheduler& scheduler() const { return scheduler_; }
  const ServiceOptions& options() const { return options_; }
  const ChatTemplate& chat_template() const { return template_; }

 private:
  // The sampling settings a request starts from: the model's (genai_config.json "search").
  SamplingOptions defaults() const;
  SequenceRequest sequence_for(const CompletionParams& p, std::vector<int64_t> prompt) const;
  ReplyHeader header(const char* prefix) const;
  // Decodes and encodes the request's images (serialized: one image at a
  // time through vision.onnx), expands `prompt`'s pads and fills
  // c.sequence's images; moves the checkpoint with the expansion.
  void prepare_images(PreparedChat& c, std::vector<int64_t>& prompt, int64_t& checkpoint) const;
  // 400 naming `param` for an id outside the vocabulary.
  void check_token_ids(const std::vector<int64_t>& ids, const char* param) const;

  std::shared_ptr<Engine> engine_;
  ChatTemplate template_;
  Scheduler& scheduler_;
  ServiceOptions options_;
  std::vector<int64_t> chat_stop_ids_;
  int64_t created_;  // when the server started: /v1/models' "created"
  nlohmann::ordered_json fidelity_;  // the model folder's fidelity.json; null when it has none
  mutable std::mutex vision_mutex_;
  mutable std::atomic<int64_t> responses_2xx_{0}, responses_4xx_{0}, responses_5xx_{0};
};

}  // namespace deltagen::serve
