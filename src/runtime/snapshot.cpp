#include "runtime/snapshot.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/tensor.h"
#include "util/atomic_file.h"
#include "deltagen/error.h"
#include "util/number_text.h"

namespace deltagen {

static_assert(std::endian::native == std::endian::little, "the snapshot format is little-endian");

namespace {

constexpr char kMagic[8] = {'D', 'G', 'S', 'T', 'A', 'T', 'E', '\0'};
constexpr uint32_t kVersion = 1;       // a text state
constexpr uint32_t kVersionImages = 2;  // + rope_delta and images
constexpr uint32_t kMaxImages = 1u << 16, kMaxHashSize = 256;
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxCaches = 1u << 16;

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

// FNV-1a 64 over a stream of bytes, fed piece by piece.
class Checksum {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      hash_ ^= p[i];
      hash_ *= 0x100000001b3ull;
    }
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

// Writes straight to a stream (a file: no copy of the state in memory),
// checksumming as it goes.
class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) {}

  template <class T>
  void put(T value) {
    put_bytes(&value, sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    checksum_.add(data, n);
    out_.write(static_cast<const char*>(data), std::streamsize(n));
  }
  void put_checksum() {
    const uint64_t value = checksum_.value();
    out_.write(reinterpret_cast<const char*>(&value), sizeof value);
  }

 private:
  std::ostream& out_;
  Checksum checksum_;
};

// Reads from a stream of known size, checksumming as it goes; running past
// the end is a "truncated" error naming the part it was reading.
class Reader {
 public:
  Reader(std::istream& in, uint64_t size, const std::string& origin) : in_(in), size_(size), origin_(origin) {}

  template <class T>
  T get(const char* what) {
    T value;
    get_bytes(&value, sizeof(T), what);
    return value;
  }
  void get_bytes(void* data, size_t n, const char* what) {
    if (n > size_ - pos_)
      fail(origin_, std::string("truncated snapshot (ends inside the ") + what + ", after " + std::to_string(size_) +
                        " bytes)");
    if (!in_.read(static_cast<char*>(data), std::streamsize(n))) fail(origin_, "cannot read the snapshot");
    checksum_.add(data, n);
    pos_ += n;
  }
  uint64_t position() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t checksum() const { return checksum_.value(); }

 private:
  std::istream& in_;
  uint64_t size_;
  const std::string& origin_;
  uint64_t pos_ = 0;
  Checksum checksum_;
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

namespace {

void write_snapshot(const StateSnapshot& s, std::ostream& stream) {
  Writer out(stream);
  out.put_bytes(kMagic, sizeof(kMagic));
  const bool multimodal = s.rope_delta != 0 || !s.images.empty();
  out.put(multimodal ? kVersionImages : kVersion);
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
  if (multimodal) {
    out.put(int64_t(s.rope_delta));
    out.put(uint32_t(s.images.size()));
    for (const SnapshotImage& image : s.images) {
      out.put(int64_t(image.start));
      out.put(int64_t(image.tokens));
      out.put(uint32_t(image.pixel_hash.size()));
      out.put_bytes(image.pixel_hash.data(), image.pixel_hash.size());
    }
  }
  out.put_bytes(s.tokens.data(), s.tokens.size() * sizeof(int64_t));
  for (const CacheSnapshot& c : s.caches) out.put_bytes(c.data.data(), c.data.size());
  out.put_checksum();
}

StateSnapshot read_snapshot(std::istream& stream, uint64_t size, const std::string& origin) {
  Reader in(stream, size, origin);
  char magic[sizeof(kMagic)] = {};
  if (size < sizeof(kMagic)) fail(origin, "not a deltagen state snapshot (bad magic)");
  in.get_bytes(magic, sizeof(magic), "magic");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) fail(origin, "not a deltagen state snapshot (bad magic)");
  const uint32_t version = in.get<uint32_t>("header");
  if (version != kVersion && version != kVersionImages)
    fail(origin, "snapshot format version " + std::to_string(version) + " is not supported (this build reads " +
                     std::to_string(kVersion) + " and " + std::to_string(kVersionImages) + ")");
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
  if (version == kVersionImages) {
    s.rope_delta = in.get<int64_t>("images");
    const uint32_t count = in.get<uint32_t>("images");
    if (count > kMaxImages) fail(origin, "snapshot header is inconsistent (image count)");
    for (uint32_t i = 0; i < count; ++i) {
      SnapshotImage image;
      image.start = in.get<int64_t>("images");
      image.tokens = in.get<int64_t>("images");
      const uint32_t hash_size = in.get<uint32_t>("images");
      if (image.start < 0 || image.tokens < 1 || image.start > int64_t(length) || hash_size > kMaxHashSize)
        fail(origin, "snapshot header is inconsistent (image " + std::to_string(i) + ")");
      image.pixel_hash.resize(hash_size);
      in.get_bytes(image.pixel_hash.data(), hash_size, "images");
      s.images.push_back(std::move(image));
    }
  }

  // The header fixes the file size: check it before allocating and reading the rest.
  uint64_t expected = in.position() + token_count * sizeof(int64_t) + sizeof(uint64_t);
  for (uint64_t n : data_bytes)
    if (__builtin_add_overflow(expected, n, &expected)) fail(origin, "snapshot header announces an impossible size");
  if (size < expected)
    fail(origin, "truncated snapshot (" + std::to_string(size) + " bytes, the header announces " +
                     std::to_string(expected) + ")");
  if (size > expected)
    fail(origin, "snapshot has " + std::to_string(size - expected) + " unexpected bytes after its end");

  s.tokens.resize(token_count);
  in.get_bytes(s.tokens.data(), token_count * sizeof(int64_t), "tokens");
  for (uint32_t c = 0; c < cache_count; ++c) {
    s.caches[c].data.resize(data_bytes[c]);
    in.get_bytes(s.caches[c].data.data(), data_bytes[c], "state data");
  }
  const uint64_t computed = in.checksum();
  if (in.get<uint64_t>("checksum") != computed) fail(origin, "snapshot checksum mismatch (the file is corrupt)");
  return s;
}

}  // namespace

std::vector<std::byte> serialize_snapshot(const StateSnapshot& s) {
  std::ostringstream out;
  write_snapshot(s, out);
  const std::string bytes = std::move(out).str();
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  return std::vector<std::byte>(data, data + bytes.size());
}

StateSnapshot parse_snapshot(std::span<const std::byte> bytes, const std::string& origin) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  return read_snapshot(in, bytes.size(), origin);
}

void save_snapshot_file(const StateSnapshot& snapshot, const std::filesystem::path& file) {
  AtomicFile out(file);
  write_snapshot(snapshot, out.stream());
  out.commit();
}

StateSnapshot load_snapshot_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(file, ec);
  if (!in || ec) fail(file.string(), "cannot open the snapshot file");
  return read_snapshot(in, size, file.string());
}

}  // namespace deltagen
