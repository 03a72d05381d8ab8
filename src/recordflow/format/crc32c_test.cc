// One known-answer suite, run against every CRC32C backend compiled in (google/crc32c style):
// a fast path is trusted only when it passes the portable path's tests.
#include "recordflow/format/crc32c.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/crc32c_internal.h"
#include "recordflow/format/record_format.h"

namespace recordflow::format {
namespace {

using internal::Crc32cBackend;

class Crc32cBackendTest : public ::testing::TestWithParam<Crc32cBackend> {
 protected:
  void SetUp() override {
    if (!GetParam().supported()) GTEST_SKIP() << GetParam().name << " unsupported on this CPU";
  }
  uint32_t Crc(const std::string& s, uint32_t init = 0) {
    return GetParam().extend(init, reinterpret_cast<const std::byte*>(s.data()), s.size());
  }
};

TEST_P(Crc32cBackendTest, KnownAnswers) {
  // RFC 3720 (iSCSI) B.4 test vectors and the classic check value.
  EXPECT_EQ(Crc(""), 0u);
  EXPECT_EQ(Crc("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Crc(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending(32, '\0');
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc(ascending), 0x46dd794eu);
  EXPECT_EQ(Crc(descending), 0x113fdb5cu);
  // "hello world" from the TensorFlow / LevelDB crc32c tests.
  EXPECT_EQ(Crc("hello world"), 0xc99465aau);
}

TEST_P(Crc32cBackendTest, ExtendEqualsWhole) {
  std::string data = "The quick brown fox jumps over the lazy dog, again and again.";
  for (size_t split = 0; split <= data.size(); ++split) {
    uint32_t a = Crc(data.substr(0, split));
    EXPECT_EQ(Crc(data.substr(split), a), Crc(data)) << "split " << split;
  }
}

TEST_P(Crc32cBackendTest, MatchesPortableOnRandomBuffersAndAlignments) {
  const Crc32cBackend& portable = internal::AllCrc32cBackends()[0];
  std::mt19937_64 rng(42);
  std::vector<std::byte> buf(70000);
  for (auto& b : buf) b = static_cast<std::byte>(rng());
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t len : {0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 255, 256, 4095, 4096, 65536}) {
      uint32_t want = portable.extend(0, buf.data() + offset, len);
      EXPECT_EQ(GetParam().extend(0, buf.data() + offset, len), want)
          << "offset " << offset << " len " << len;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, Crc32cBackendTest,
                         ::testing::ValuesIn(internal::AllCrc32cBackends().begin(),
                                             internal::AllCrc32cBackends().end()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Crc32cTest, EightByteFastPathMatches) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 1000; ++i) {
    uint64_t v = rng();
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    EXPECT_EQ(Crc32c8(p), Crc32c(std::span(p, 8)));
  }
}

TEST(Crc32cTest, ActiveBackendIsTheFastestAvailable) {
  std::string name(Crc32cBackendName());
#if defined(RF_HAVE_ISAL)
  EXPECT_EQ(name, "isal");
#else
  EXPECT_TRUE(name == "sse42" || name == "portable") << name;
#endif
}

TEST(MaskTest, RoundTripsAndMatchesTensorFlowConstants) {
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu, 0x12345678u}) {
    EXPECT_EQ(UnmaskCrc(MaskCrc(crc)), crc);
    EXPECT_NE(MaskCrc(crc), crc);
  }
  // rotate right 15, plus 0xa282ead8.
  EXPECT_EQ(MaskCrc(0), 0xa282ead8u);
  EXPECT_EQ(MaskCrc(0x00008000u), 0xa282ead9u);
}

}  // namespace
}  // namespace recordflow::format
