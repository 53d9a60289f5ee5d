// common/siphash.h against the reference vectors of the SipHash paper (key 00..0f, messages 00, 01, ..., n-1).
#include <cstdint>
#include <vector>

#include "common/siphash.h"
#include "harness.h"

TEST_CASE("siphash24: the paper's test vectors") {
  const uint64_t k0 = 0x0706050403020100ull, k1 = 0x0f0e0d0c0b0a0908ull;
  std::vector<uint8_t> msg(64);
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = uint8_t(i);
  CHECK(spindle::siphash24(k0, k1, msg.data(), 0) == 0x726fdb47dd0e0e31ull);
  CHECK(spindle::siphash24(k0, k1, msg.data(), 8) == 0x93f5f5799a932462ull);
  CHECK(spindle::siphash24(k0, k1, msg.data(), 15) == 0xa129ca6149be45e5ull);
  CHECK(spindle::siphash24(k0, k1, msg.data(), 15) != spindle::siphash24(k0 ^ 1, k1, msg.data(), 15));
}
