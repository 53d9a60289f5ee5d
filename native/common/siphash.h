// SipHash-2-4 (Aumasson and Bernstein): a keyed 64-bit hash of a byte string. Without the 128-bit key an attacker
// cannot choose inputs that collide, so it can name namespaces made of untrusted text (the prefix cache's
// cache_salt). Invariant: same key and bytes -> same value; a header-only function of its arguments.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace spindle {

inline uint64_t siphash24(uint64_t k0, uint64_t k1, const void* data, size_t n) {
  const auto rotl = [](uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  const auto round = [&] {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  };
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t full = n / 8 * 8;
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = 0;
    for (int b = 0; b < 8; ++b) m |= uint64_t(p[i + b]) << (8 * b);  // little-endian word
    v3 ^= m;
    round(), round();
    v0 ^= m;
  }
  uint64_t last = uint64_t(n & 0xff) << 56;
  for (size_t b = 0; b < n - full; ++b) last |= uint64_t(p[full + b]) << (8 * b);
  v3 ^= last;
  round(), round();
  v0 ^= last;
  v2 ^= 0xff;
  round(), round(), round(), round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace spindle
