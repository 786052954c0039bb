#include "runtime/snapshot.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <string>

#include "runtime/tensor.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace deltagen {

static_assert(std::endian::native == std::endian::little, "the snapshot format is little-endian");

namespace {

constexpr char kMagic[8] = {'D', 'G', 'S', 'T', 'A', 'T', 'E', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxCaches = 1u << 16;

bool is_kv(CacheKind kind) { return kind == CacheKind::Key || kind == CacheKind::Value; }

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

uint64_t fnv1a64(std::span<const std::byte> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) {
    h ^= uint64_t(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

// The shape of one row of a cache as the snapshot stores it (KV: only `length` positions).
std::vector<int64_t> snapshot_dims(const HybridState& state, size_t cache, int64_t length) {
  std::vector<int64_t> dims = state.row_shape(cache);
  if (is_kv(state.io().caches[cache].kind)) dims[2] = length;
  return dims;
}

size_t byte_count(const std::vector<int64_t>& dims, ONNXTensorElementDataType dtype) {
  size_t n = float_element_size(dtype);
  for (int64_t d : dims) n *= size_t(d);
  return n;
}

// KV rows are [1, heads, capacity, head_dim]; a snapshot keeps the first
// `length` positions of every head, dense: [1, heads, length, head_dim].
struct KvLayout {
  size_t heads, used_bytes, stride_bytes;  // per head: bytes kept, bytes apart in the row buffer
};

KvLayout kv_layout(const std::vector<int64_t>& row_dims, int64_t length, size_t element) {
  const size_t head_bytes = size_t(row_dims[3]) * element;
  return {size_t(row_dims[1]), size_t(length) * head_bytes, size_t(row_dims[2]) * head_bytes};
}

// An empty state (length 0) has no dense bytes: dense is then null, and
// memcpy must not be handed a null pointer even for 0 bytes.
void kv_to_dense(std::span<const std::byte> row, std::byte* dense, const KvLayout& l) {
  if (l.used_bytes == 0) return;
  for (size_t h = 0; h < l.heads; ++h) std::memcpy(dense + h * l.used_bytes, row.data() + h * l.stride_bytes, l.used_bytes);
}

void dense_to_kv(const std::byte* dense, std::span<std::byte> row, const KvLayout& l) {
  if (l.used_bytes == 0) return;
  for (size_t h = 0; h < l.heads; ++h) std::memcpy(row.data() + h * l.stride_bytes, dense + h * l.used_bytes, l.used_bytes);
}

class Writer {
 public:
  template <class T>
  void put(T value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(std::span<const std::byte> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& origin) : bytes_(bytes), origin_(origin) {}

  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::span<const std::byte> take(size_t n, const char* what) {
    need(n, what);
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  size_t position() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  void need(size_t n, const char* what) const {
    if (n > remaining())
      fail(origin_, std::string("truncated snapshot (ends inside the ") + what + ", after " +
                        std::to_string(bytes_.size()) + " bytes)");
  }

  std::span<const std::byte> bytes_;
  const std::string& origin_;
  size_t pos_ = 0;
};

CacheSnapshot read_cache_header(Reader& in, const std::string& origin, uint64_t& data_bytes) {
  CacheSnapshot c;
  c.layer = in.get<uint32_t>("cache header");
  const uint32_t kind = in.get<uint32_t>("cache header");
  if (kind > uint32_t(CacheKind::RecurrentState)) fail(origin, "snapshot has an unknown cache kind " + std::to_string(kind));
  c.kind = CacheKind(kind);
  // Checked before it becomes the enum: a value outside the enum's range is undefined behavior.
  const uint32_t dtype = in.get<uint32_t>("cache header");
  const bool float_type = dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 ||
                          dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
  c.dtype = float_type ? ONNXTensorElementDataType(dtype) : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  const uint32_t rank = in.get<uint32_t>("cache header");
  if (rank == 0 || rank > kMaxRank) fail(origin, "snapshot has a cache of rank " + std::to_string(rank));
  for (uint32_t d = 0; d < rank; ++d) {
    const int64_t dim = in.get<int64_t>("cache header");
    if (dim < 0 || dim > (int64_t(1) << 32)) fail(origin, "snapshot has a cache dimension of " + std::to_string(dim));
    c.dims.push_back(dim);
  }
  data_bytes = in.get<uint64_t>("cache header");
  // The announced size must equal the dims' (computed without overflow).
  uint64_t expected = 0;
  bool ok = c.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || c.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 ||
            c.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
  if (ok) {
    expected = float_element_size(c.dtype);
    for (int64_t d : c.dims) ok = ok && !__builtin_mul_overflow(expected, uint64_t(d), &expected);
  }
  if (!ok || data_bytes != expected)
    fail(origin, "snapshot cache of layer " + std::to_string(c.layer) + " has an unsupported element type or a size that does not match its dimensions");
  return c;
}

}  // namespace

StateSnapshot capture_row(const HybridState& state, int64_t row, int64_t vocab_size, std::span<const int64_t> pending) {
  StateSnapshot s;
  s.vocab_size = vocab_size;
  s.length = state.length(row);
  s.tokens = state.tokens(row);
  s.tokens.insert(s.tokens.end(), pending.begin(), pending.end());
  for (size_t c = 0; c < state.io().caches.size(); ++c) {
    const CacheSpec& spec = state.io().caches[c];
    CacheSnapshot cache{spec.layer, spec.kind, spec.dtype, snapshot_dims(state, c, s.length), {}};
    cache.data.resize(byte_count(cache.dims, spec.dtype));
    std::span<const std::byte> row_bytes = state.row_bytes(c, row);
    if (is_kv(spec.kind))
      kv_to_dense(row_bytes, cache.data.data(), kv_layout(state.row_shape(c), s.length, float_element_size(spec.dtype)));
    else
      std::memcpy(cache.data.data(), row_bytes.data(), cache.data.size());
    s.caches.push_back(std::move(cache));
  }
  return s;
}

void restore_row(HybridState& state, int64_t row, int64_t vocab_size, const StateSnapshot& s, const std::string& origin) {
  const auto& specs = state.io().caches;
  if (s.vocab_size != vocab_size)
    fail(origin, "snapshot is of a model with vocabulary " + std::to_string(s.vocab_size) + ", this model has " +
                     std::to_string(vocab_size));
  if (s.length < 0 || s.length > int64_t(s.tokens.size())) fail(origin, "snapshot length is inconsistent");
  if (s.length > state.max_length())
    fail(origin, "snapshot holds " + std::to_string(s.length) + " tokens, more than the maximum length " +
                     std::to_string(state.max_length()));
  for (int64_t id : s.tokens)
    if (id < 0 || id >= vocab_size) fail(origin, "snapshot holds token id " + std::to_string(id) + ", outside the vocabulary");
  if (s.caches.size() != specs.size())
    fail(origin, "snapshot has " + std::to_string(s.caches.size()) + " state tensors, this model has " +
                     std::to_string(specs.size()));
  for (size_t c = 0; c < specs.size(); ++c) {
    const CacheSnapshot& cache = s.caches[c];
    const std::vector<int64_t> want = snapshot_dims(state, c, s.length);
    if (cache.layer != specs[c].layer || cache.kind != specs[c].kind || cache.dtype != specs[c].dtype ||
        cache.dims != want || cache.data.size() != byte_count(want, specs[c].dtype))
      fail(origin, "snapshot does not match this model: layer " + std::to_string(cache.layer) + " " +
                       cache_kind_suffix(cache.kind) + " " + dims_text(cache.dims) + ", the model has layer " +
                       std::to_string(specs[c].layer) + " " + cache_kind_suffix(specs[c].kind) + " " +
                       dims_text(want));
  }
  // Everything checked: now overwrite the row.
  state.reset_row(row);
  for (size_t c = 0; c < specs.size(); ++c) {
    const CacheSnapshot& cache = s.caches[c];
    std::span<std::byte> row_bytes = state.row_bytes(c, row);
    if (is_kv(specs[c].kind))
      dense_to_kv(cache.data.data(), row_bytes, kv_layout(state.row_shape(c), s.length, float_element_size(specs[c].dtype)));
    else
      std::memcpy(row_bytes.data(), cache.data.data(), cache.data.size());
  }
  state.set_tokens(row, std::span(s.tokens).first(size_t(s.length)));
}

std::vector<std::byte> serialize_snapshot(const StateSnapshot& s) {
  Writer out;
  for (char c : kMagic) out.put(c);
  out.put(kVersion);
  out.put(uint32_t(0));
  out.put(uint64_t(s.vocab_size));
  out.put(uint64_t(s.length));
  out.put(uint64_t(s.tokens.size()));
  out.put(uint32_t(s.caches.size()));
  for (const CacheSnapshot& c : s.caches) {
    out.put(uint32_t(c.layer));
    out.put(uint32_t(c.kind));
    out.put(uint32_t(c.dtype));
    out.put(uint32_t(c.dims.size()));
    for (int64_t d : c.dims) out.put(d);
    out.put(uint64_t(c.data.size()));
  }
  for (int64_t id : s.tokens) out.put(id);
  for (const CacheSnapshot& c : s.caches) out.put_bytes(c.data);
  out.put(fnv1a64(out.bytes()));
  return std::move(out.bytes());
}

StateSnapshot parse_snapshot(std::span<const std::byte> bytes, const std::string& origin) {
  Reader in(bytes, origin);
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    fail(origin, "not a deltagen state snapshot (bad magic)");
  in.take(sizeof(kMagic), "magic");
  const uint32_t version = in.get<uint32_t>("header");
  if (version != kVersion)
    fail(origin, "snapshot format version " + std::to_string(version) + " is not supported (this build reads " +
                     std::to_string(kVersion) + ")");
  in.get<uint32_t>("header");

  StateSnapshot s;
  s.vocab_size = int64_t(in.get<uint64_t>("header"));
  const uint64_t length = in.get<uint64_t>("header"), token_count = in.get<uint64_t>("header");
  const uint32_t cache_count = in.get<uint32_t>("header");
  if (token_count > (uint64_t(1) << 32) || length > token_count || cache_count > kMaxCaches || s.vocab_size <= 0)
    fail(origin, "snapshot header is inconsistent (length, token count, vocabulary or cache count)");
  s.length = int64_t(length);

  std::vector<uint64_t> data_bytes(cache_count);
  for (uint32_t c = 0; c < cache_count; ++c) s.caches.push_back(read_cache_header(in, origin, data_bytes[c]));

  // The header fixes the file size: check it before reading (and checksumming) the rest.
  uint64_t expected = in.position() + token_count * sizeof(int64_t) + sizeof(uint64_t);
  for (uint64_t n : data_bytes)
    if (__builtin_add_overflow(expected, n, &expected)) fail(origin, "snapshot header announces an impossible size");
  if (bytes.size() < expected)
    fail(origin, "truncated snapshot (" + std::to_string(bytes.size()) + " bytes, the header announces " +
                     std::to_string(expected) + ")");
  if (bytes.size() > expected)
    fail(origin, "snapshot has " + std::to_string(bytes.size() - expected) + " unexpected bytes after its end");
  uint64_t stored_checksum;
  std::memcpy(&stored_checksum, bytes.data() + expected - sizeof(uint64_t), sizeof(uint64_t));
  if (fnv1a64(bytes.first(expected - sizeof(uint64_t))) != stored_checksum)
    fail(origin, "snapshot checksum mismatch (the file is corrupt)");

  s.tokens.resize(token_count);
  for (uint64_t i = 0; i < token_count; ++i) s.tokens[i] = in.get<int64_t>("tokens");
  for (uint32_t c = 0; c < cache_count; ++c) {
    auto data = in.take(data_bytes[c], "state data");
    s.caches[c].data.assign(data.begin(), data.end());
  }
  return s;
}

void save_snapshot_file(const StateSnapshot& snapshot, const std::filesystem::path& file) {
  const std::vector<std::byte> bytes = serialize_snapshot(snapshot);
  write_file_atomic(file, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

StateSnapshot load_snapshot_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), "cannot open the snapshot file");
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(file.string(), "cannot read the snapshot file");
  const auto* data = reinterpret_cast<const std::byte*>(raw.data());
  return parse_snapshot(std::span(data, raw.size()), file.string());
}

}  // namespace deltagen
