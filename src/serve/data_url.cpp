#include "serve/data_url.h"

#include <algorithm>
#include <cctype>

#include "deltagen/error.h"
#include "serve/openai_request.h"

namespace deltagen::serve {

namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<uint8_t> decode_base64(std::string_view text, const std::string& what) {
  if (text.size() % 4 != 0) fail(what, "base64 length " + std::to_string(text.size()) + " is not a multiple of 4");
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  const size_t data = text.size() - padding;
  for (size_t i = 0; i < data; ++i) {
    const int v = base64_value(text[i]);
    if (v < 0) fail(what, "invalid base64 character at offset " + std::to_string(i));
    bits = (bits << 6) | uint32_t(v);
    if (i % 4 == 3) {
      out.push_back(uint8_t(bits >> 16));
      out.push_back(uint8_t(bits >> 8));
      out.push_back(uint8_t(bits));
      bits = 0;
    }
  }
  if (padding == 1) {  // 3 characters: 18 bits, 2 bytes, 2 zero bits
    if (bits & 0x3) fail(what, "base64 has nonzero bits after its last byte");
    out.push_back(uint8_t(bits >> 10));
    out.push_back(uint8_t(bits >> 2));
  } else if (padding == 2) {  // 2 characters: 12 bits, 1 byte, 4 zero bits
    if (bits & 0xf) fail(what, "base64 has nonzero bits after its last byte");
    out.push_back(uint8_t(bits >> 4));
  }
  return out;
}

std::vector<uint8_t> image_from_data_url(std::string_view url, const std::string& field, int64_t max_bytes) {
  if (lower(url.substr(0, 5)) != "data:") bad_request(field, "only data: URLs are accepted (the server fetches nothing)");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) bad_request(field, "a data: URL needs a ',' before its data");
  const std::string header = lower(url.substr(5, comma - 5));
  const size_t semicolon = header.find(';');
  const std::string type = header.substr(0, semicolon);
  if (type.rfind("image/", 0) != 0)
    bad_request(field, "the data: URL's media type must be image/... (e.g. image/png, image/jpeg), not '" + type + "'");
  if (semicolon == std::string::npos || header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0)
    bad_request(field, "the data: URL must be base64 (data:" + type + ";base64,...)");
  const std::string_view data = url.substr(comma + 1);
  const uint64_t decoded = data.size() / 4 * 3;
  if (max_bytes > 0 && decoded > uint64_t(max_bytes) + 2)
    throw ApiError(413, "invalid_request_error", field,
                   field + ": the image is larger than " + std::to_string(max_bytes) + " bytes");
  std::vector<uint8_t> bytes;
  try {
    bytes = decode_base64(data, field);
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error", field, e.what());
  }
  if (max_bytes > 0 && int64_t(bytes.size()) > max_bytes)
    throw ApiError(413, "invalid_request_error", field,
                   field + ": the image is larger than " + std::to_string(max_bytes) + " bytes");
  if (bytes.empty()) bad_request(field, "the data: URL holds no bytes");
  return bytes;
}

}  // namespace deltagen::serve
