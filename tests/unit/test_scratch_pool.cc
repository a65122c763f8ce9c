// The scratch pool collectives draw their buffers from: blocks come back for
// the next collective, huge ones are not kept, and it keeps only a few.
#include <vector>

#include <catch2/catch.hpp>

#include "worker_runtime/gloo/scratch_pool.h"

namespace horovodd {
namespace {

using internal::ScratchPool;

TEST_CASE("a scratch block given back serves the next collective", "[collectives][scratch]") {
  ScratchPool pool;
  ScratchPool::Block first = pool.Take(1000);
  REQUIRE(first.data != nullptr);
  CHECK(first.capacity >= 1000);
  uint8_t* memory = first.data.get();
  pool.Give(std::move(first));
  // Smaller requests reuse it too; a bigger one needs a new block.
  ScratchPool::Block again = pool.Take(600);
  CHECK(again.data.get() == memory);
  ScratchPool::Block bigger = pool.Take(2000);
  CHECK(bigger.data.get() != memory);
  CHECK(bigger.capacity >= 2000);
}

TEST_CASE("the scratch pool takes the smallest fit and keeps few, modest blocks",
          "[collectives][scratch]") {
  ScratchPool pool;
  ScratchPool::Block small = pool.Take(100);
  ScratchPool::Block large = pool.Take(10000);
  uint8_t* small_memory = small.data.get();
  uint8_t* large_memory = large.data.get();
  pool.Give(std::move(large));
  pool.Give(std::move(small));
  CHECK(pool.Take(50).data.get() == small_memory);
  CHECK(pool.Take(50).data.get() == large_memory);

  ScratchPool::Block huge = pool.Take(ScratchPool::kMaxKeptBytes + 1);
  uint8_t* huge_memory = huge.data.get();
  pool.Give(std::move(huge));
  ScratchPool::Block after = pool.Take(ScratchPool::kMaxKeptBytes + 1);
  CHECK(after.data.get() != huge_memory);

  // Past kMaxKeptBlocks the smallest go: the biggest stay.
  constexpr size_t kBlocks = ScratchPool::kMaxKeptBlocks + 2;
  std::vector<ScratchPool::Block> held;
  std::vector<uint8_t*> memory;
  for (size_t i = 0; i < kBlocks; ++i) {
    held.push_back(pool.Take(1000 * (i + 1)));
    memory.push_back(held.back().data.get());
  }
  for (ScratchPool::Block& b : held) pool.Give(std::move(b));
  for (size_t i = 2; i < kBlocks; ++i) CHECK(pool.Take(1).data.get() == memory[i]);
  ScratchPool::Block fresh = pool.Take(1);
  CHECK(fresh.data.get() != memory[0]);
  CHECK(fresh.data.get() != memory[1]);
}

}  // namespace
}  // namespace horovodd
