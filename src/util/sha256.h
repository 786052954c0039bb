// SHA-256 (FIPS 180-4), for naming the exact bytes a measurement used (the
// fidelity card's text file). Not for anything secret: no constant-time care.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace deltagen {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  // The digest of everything fed so far; the object is spent afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes fed
};

// The digest of `bytes` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace deltagen
