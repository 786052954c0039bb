#include "graph/onnx_writer.h"

#include <algorithm>
#include <string>

#include "util/atomic_file.h"
#include "deltagen/error.h"

namespace deltagen::graph {
namespace fs = std::filesystem;

namespace {

// protobuf refuses messages of 2 GiB and more; leave room for the graph itself.
constexpr int64_t kInlineLimit = int64_t(1900) << 20;

onnx::TensorProto tensor_header(const Initializer& w) {
  onnx::TensorProto t;
  t.set_name(w.name);
  t.set_data_type(w.dtype);
  for (int64_t d : w.dims) t.add_dims(d);
  return t;
}

WeightBuffer produce_checked(const Initializer& w) {
  WeightBuffer bytes = w.produce();
  if (int64_t(bytes.size()) != w.nbytes())
    fail(w.name, "produced " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(w.nbytes()));
  return bytes;
}

void add_external_entry(onnx::TensorProto& t, const std::string& key, const std::string& value) {
  auto* e = t.add_external_data();
  e->set_key(key);
  e->set_value(value);
}

void write_padding(std::ofstream& out, int64_t from, int64_t to) {
  static const char zeros[4096] = {};
  while (from < to) {
    int64_t n = std::min<int64_t>(to - from, sizeof zeros);
    out.write(zeros, std::streamsize(n));
    from += n;
  }
}

// Streams every weight into the data file and records where it went.
void write_external(onnx::GraphProto& graph, std::vector<Initializer>& weights, const fs::path& data_path,
                    const WriteOptions& opts, int64_t total) {
  AtomicFile file(data_path);
  std::ofstream& out = file.stream();
  const std::string location = data_path.filename().string();
  int64_t offset = 0, done = 0;
  for (Initializer& w : weights) {
    int64_t aligned = (offset + opts.alignment - 1) / opts.alignment * opts.alignment;
    write_padding(out, offset, aligned);
    offset = aligned;
    WeightBuffer bytes = produce_checked(w);
    w.produce = nullptr;  // release whatever the producer captured
    out.write(reinterpret_cast<const char*>(bytes.bytes()), std::streamsize(bytes.size()));
    if (!out) fail(data_path.string(), "write failed (disk full?)");

    onnx::TensorProto t = tensor_header(w);
    t.set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    add_external_entry(t, "location", location);
    add_external_entry(t, "offset", std::to_string(offset));
    add_external_entry(t, "length", std::to_string(bytes.size()));
    *graph.add_initializer() = std::move(t);

    offset += int64_t(bytes.size());
    done += int64_t(bytes.size());
    if (opts.progress) opts.progress(done, total);
  }
  file.commit();
}

void write_inline(onnx::GraphProto& graph, std::vector<Initializer>& weights, const WriteOptions& opts,
                  int64_t total) {
  int64_t done = 0;
  for (Initializer& w : weights) {
    WeightBuffer bytes = produce_checked(w);
    w.produce = nullptr;
    onnx::TensorProto t = tensor_header(w);
    t.set_raw_data(bytes.bytes(), bytes.size());
    *graph.add_initializer() = std::move(t);
    done += int64_t(bytes.size());
    if (opts.progress) opts.progress(done, total);
  }
}

}  // namespace

onnx::ModelProto make_model(const GraphBuilder& builder, const std::vector<Opset>& opsets, int64_t ir_version,
                            const std::string& producer) {
  onnx::ModelProto model;
  model.set_ir_version(ir_version);
  model.set_producer_name(producer);
  for (const Opset& o : opsets) {
    auto* imp = model.add_opset_import();
    imp->set_domain(o.domain);
    imp->set_version(o.version);
  }
  *model.mutable_graph() = builder.graph();
  return model;
}

std::string data_file_name(const fs::path& model_path) { return model_path.filename().string() + ".data"; }

WriteResult write_model(onnx::ModelProto model, std::vector<Initializer> weights, const fs::path& model_path,
                        const WriteOptions& opts) {
  WriteResult result;
  for (const Initializer& w : weights) result.weight_bytes += w.nbytes();
  result.external = result.weight_bytes > std::min(opts.external_data_threshold, kInlineLimit);

  onnx::GraphProto& graph = *model.mutable_graph();
  if (result.external) {
    result.data_file = model_path.parent_path() / data_file_name(model_path);
    write_external(graph, weights, result.data_file, opts, result.weight_bytes);
  } else {
    write_inline(graph, weights, opts, result.weight_bytes);
  }

  std::string bytes;
  if (!model.SerializeToString(&bytes)) fail(model_path.string(), "cannot serialize the model");
  write_file_atomic(model_path, bytes);
  return result;
}

}  // namespace deltagen::graph
