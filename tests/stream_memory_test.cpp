// Packed-weight memory (kernels/stream_memory.h): zeroed, aligned, disjoint,
// alive as long as its owner, and on huge-page-advised mappings by default.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/stream_memory.h"

namespace deltagen::kernels {
namespace {

// The "THPeligible:" value of the /proc/self/smaps mapping that holds `p`,
// or -1 when the kernel does not report it.
int thp_eligible(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = addr >= lo && addr < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

bool thp_enabled_on_request() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  return modes.find("[always]") != std::string::npos || modes.find("[madvise]") != std::string::npos;
}

class StreamMemory : public ::testing::TestWithParam<PageSize> {};

TEST_P(StreamMemory, BlocksAreZeroedAlignedAndDisjoint) {
  // Sizes around the 64-byte rounding and a 2 MiB page, as packed matrices have.
  const std::vector<size_t> sizes = {1, 63, 64, 65, 4096, 1234567, (size_t(2) << 20) + 1, 100};
  std::vector<std::shared_ptr<uint8_t>> blocks;
  for (size_t i = 0; i < sizes.size(); ++i) {
    blocks.push_back(allocate_stream_memory(sizes[i], GetParam()));
    uint8_t* p = blocks.back().get();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "size " << sizes[i];
    for (size_t j = 0; j < sizes[i]; ++j) ASSERT_EQ(p[j], 0) << "size " << sizes[i] << " byte " << j;
    std::fill(p, p + sizes[i], uint8_t(i + 1));
  }
  // A later block never overlapped an earlier one; releasing some keeps the rest.
  blocks[0].reset();
  blocks[3].reset();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!blocks[i]) continue;
    for (size_t j = 0; j < sizes[i]; ++j) ASSERT_EQ(blocks[i].get()[j], uint8_t(i + 1)) << "block " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Pages, StreamMemory, ::testing::Values(PageSize::Huge, PageSize::Small),
                         [](const auto& info) { return info.param == PageSize::Huge ? "Huge" : "Small"; });

TEST(StreamMemoryPages, HugeBlocksAreAdvisedForTransparentHugePages) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds use heap blocks";
#endif
  if (!thp_enabled_on_request()) GTEST_SKIP() << "transparent huge pages are off on this machine";
  std::shared_ptr<uint8_t> small = allocate_stream_memory(size_t(1) << 20, PageSize::Huge);
  std::shared_ptr<uint8_t> large = allocate_stream_memory(size_t(200) << 20, PageSize::Huge);  // own region
  std::shared_ptr<uint8_t> plain = allocate_stream_memory(size_t(8) << 20, PageSize::Small);
  EXPECT_EQ(thp_eligible(small.get()), 1);
  EXPECT_EQ(thp_eligible(large.get()), 1);
  EXPECT_EQ(thp_eligible(large.get() + (size_t(199) << 20)), 1);
  // The control: without the advice, "madvise" mode leaves a heap block out.
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  if (modes.find("[madvise]") != std::string::npos) EXPECT_EQ(thp_eligible(plain.get()), 0);
}

}  // namespace
}  // namespace deltagen::kernels
