// The few MessagePack forms the KV events need (arrays, nil, integers,
// 64-bit floats, strings), written by hand from the format's specification
// (github.com/msgpack/msgpack/blob/master/spec.md): a dependency for five
// type codes would cost more than it saves. Each value takes the shortest
// form the spec allows for it, as every encoder does.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace deltagen::serve {

class MsgpackWriter {
 public:
  const std::string& bytes() const { return out_; }

  void nil() { byte(0xc0); }

  void array(uint32_t size) {
    if (size < 16) byte(uint8_t(0x90 | size));
    else if (size <= 0xffff) byte(0xdc), big_endian(size, 2);
    else byte(0xdd), big_endian(size, 4);
  }

  void uint(uint64_t v) {
    if (v < 128) byte(uint8_t(v));  // positive fixint
    else if (v <= 0xff) byte(0xcc), big_endian(v, 1);
    else if (v <= 0xffff) byte(0xcd), big_endian(v, 2);
    else if (v <= 0xffffffffull) byte(0xce), big_endian(v, 4);
    else byte(0xcf), big_endian(v, 8);
  }

  void integer(int64_t v) {
    if (v >= 0) return uint(uint64_t(v));
    if (v >= -32) byte(uint8_t(int8_t(v)));  // negative fixint
    else if (v >= INT8_MIN) byte(0xd0), big_endian(uint64_t(v), 1);
    else if (v >= INT16_MIN) byte(0xd1), big_endian(uint64_t(v), 2);
    else if (v >= INT32_MIN) byte(0xd2), big_endian(uint64_t(v), 4);
    else byte(0xd3), big_endian(uint64_t(v), 8);
  }

  void float64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    byte(0xcb), big_endian(bits, 8);
  }

  void str(std::string_view s) {
    const uint64_t n = s.size();
    if (n < 32) byte(uint8_t(0xa0 | n));
    else if (n <= 0xff) byte(0xd9), big_endian(n, 1);
    else if (n <= 0xffff) byte(0xda), big_endian(n, 2);
    else byte(0xdb), big_endian(n, 4);
    out_.append(s);
  }

 private:
  void byte(uint8_t b) { out_.push_back(char(b)); }
  void big_endian(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) byte(uint8_t(v >> (8 * i)));
  }

  std::string out_;
};

}  // namespace deltagen::serve
