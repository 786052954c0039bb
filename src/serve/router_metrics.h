// /metrics under the names routers read by default: llm-d's endpoint picker
// (the Gateway API Inference Extension) scrapes vLLM's metric names to score
// replicas by queue depth, state-memory use and prefix-cache hits
// (docs/scale-out.md maps each name to what deltagen measures). These are the
// same numbers as the deltagen_* series, under vLLM's names and types.
#pragma once
#include <string>

#include "serve/scheduler.h"

namespace deltagen::serve {

// Appends the vllm:* series for `s` (labelled model_name="...").
void append_router_metrics(std::string& out, const SchedulerStats& s, const SchedulerOptions& options,
                           int64_t max_length, const std::string& model_name);

}  // namespace deltagen::serve
