// util/sha256.h against the FIPS 180-4 example vectors (and NIST's
// one-million-'a' vector), whole and fed in pieces.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>

#include "util/sha256.h"

namespace deltagen {
namespace {

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks: the padding does not fit after 56 bytes.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesEqualTheWhole) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += char('a' + i % 26);
  for (size_t piece : {1, 7, 63, 64, 65, 200}) {
    Sha256 s;
    for (size_t at = 0; at < text.size(); at += piece) s.update(std::string_view(text).substr(at, piece));
    std::string hex;
    for (uint8_t b : s.finish()) {
      char buf[3];
      std::snprintf(buf, sizeof buf, "%02x", b);
      hex += buf;
    }
    EXPECT_EQ(hex, sha256_hex(text)) << "pieces of " << piece;
  }
}

// Lengths around the block and padding boundaries (values: Python's hashlib).
TEST(Sha256, PaddingBoundaries) {
  const std::pair<size_t, const char*> cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"}};
  for (const auto& [n, hex] : cases) EXPECT_EQ(sha256_hex(std::string(n, 'a')), hex) << n << " bytes";
}

}  // namespace
}  // namespace deltagen
