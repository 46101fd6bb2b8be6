// lwsplit-harness shim for the third-party xxHash header: util/hash_util.h (via
// framework/block/block.h) sizes its hash arrays with sizeof(XXH128_hash_t); nothing hashes here.
#pragma once
#include <cstdint>
struct XXH128_hash_t {
  uint64_t low64;
  uint64_t high64;
};
