// The peer: a small program that calls Gloo directly, as a framework built on
// Gloo would (gloo::allreduce, the ring algorithm, TCP on 127.0.0.1,
// rendezvous through a FileStore). bench/bench.py starts one process per rank.
//
//   bench_gloo_raw RANK SIZE STORE_DIR allreduce|small
//
// allreduce: float32 sum over bench_common.h's sizes; small: one step is one
// gloo::allreduce per tensor of the 100-tensor gradient set. Rank 0 prints the
// RESULT lines.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench_common.h"

namespace horovodd::bench {
namespace {

void AllreduceFloats(const std::shared_ptr<gloo::Context>& context, float* data, size_t count) {
  gloo::AllreduceOptions options(context);
  options.setOutput(data, count);
  options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  options.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  gloo::allreduce(options);
}

void Barrier(const std::shared_ptr<gloo::Context>& context) {
  gloo::BarrierOptions options(context);
  gloo::barrier(options);
}

void RunAllreduce(const std::shared_ptr<gloo::Context>& context) {
  for (size_t bytes : AllreduceSizes()) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    for (int i = 0; i < WarmupsFor(bytes); ++i) AllreduceFloats(context, data.data(), data.size());
    Barrier(context);
    const int iters = IterationsFor(bytes);
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) AllreduceFloats(context, data.data(), data.size());
    const double per_op = Seconds(start, Clock::now()) / iters;
    if (context->rank == 0) PrintAllreduce("gloo", context->size, bytes, iters, per_op);
  }
}

void RunSmall(const std::shared_ptr<gloo::Context>& context) {
  std::vector<std::vector<float>> tensors(kSmallTensors,
                                          std::vector<float>(kSmallTensorFloats, 1.0f));
  auto step = [&] {
    for (auto& t : tensors) AllreduceFloats(context, t.data(), t.size());
  };
  for (int i = 0; i < 3; ++i) step();
  Barrier(context);
  const int steps = SmallSteps();
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double per_step = Seconds(start, Clock::now()) / steps;
  if (context->rank == 0) PrintSmall("gloo", context->size, steps, per_step);
}

int Main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s RANK SIZE STORE_DIR allreduce|small\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int size = std::atoi(argv[2]);
  const std::string store_dir = argv[3], mode = argv[4];
  if (size < 1 || rank < 0 || rank >= size || (mode != "allreduce" && mode != "small")) {
    std::fprintf(stderr, "bad arguments: rank %s size %s mode %s\n", argv[1], argv[2], argv[4]);
    return 2;
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::seconds(120));
    context->connectFullMesh(store, device);
    if (mode == "allreduce") {
      RunAllreduce(context);
    } else {
      RunSmall(context);
    }
    Barrier(context);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: gloo failed: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace horovodd::bench

int main(int argc, char** argv) { return horovodd::bench::Main(argc, argv); }
