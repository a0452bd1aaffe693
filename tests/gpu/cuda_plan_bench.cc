// cuda_plan_bench PLAN DATA.npz [--steps N] [--warmup W]: the training step of a plan on the
// GPU (runtime/cuda), for scripts/bench_gpu.py. W steps run one by one first, then N steps
// are submitted without waiting and collected once; prints one JSON line: the mean step time
// over the N steps, the device memory the executor allocated and what cudaMemGetInfo saw it
// take, graph launches and host synchronisations during the N steps, the last loss.
// A benchmark, not a test: nothing here passes or fails on a timing.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "base/error.h"
#include "runtime/cuda/executor.h"
#include "runtime/data/batcher.h"
#include "runtime/plan/plan_file.h"

namespace {

size_t used_bytes() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return total - free;
}

int run(int argc, char** argv) {
  using namespace ampc;
  if (argc < 3) {
    std::cerr << "usage: cuda_plan_bench PLAN DATA.npz [--steps N] [--warmup W]\n";
    return 2;
  }
  int64_t steps = 20, warmup = 3;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--steps") steps = std::atoll(argv[i + 1]);
    if (flag == "--warmup") warmup = std::atoll(argv[i + 1]);
  }
  plan::Plan p = plan::load_plan(argv[1]);
  std::map<std::string, rt::data::InputSpec> specs;
  int64_t batch = 0;
  for (const auto& binding : p.inputs()) {
    const auto& b = p.buffers(binding.buffer());
    specs[binding.name()] = {static_cast<DType>(b.dtype()),
                             {b.shape().begin() + 1, b.shape().end()}};
    batch = b.shape(0);
  }
  rt::data::Batcher batcher(rt::data::Dataset::open(argv[2]), specs, {.batch_size = batch});
  (void)cudaFree(nullptr);  // the context first, so that it is not counted below
  const size_t before = used_bytes();
  const auto t_load = std::chrono::steady_clock::now();
  rt::cuda::Executor exec(std::move(p), {.device = 0, .pipeline_depth = steps});
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const size_t taken = used_bytes() - before;
  for (int64_t s = 0; s < warmup; ++s) exec.run(batcher.next());
  std::vector<std::map<std::string, rt::Tensor>> batches;
  for (int64_t s = 0; s < steps; ++s) batches.push_back(batcher.next());
  const rt::cuda::Counters start = exec.counters();
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& b : batches) exec.submit(b);
  const auto outputs = exec.collect();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const rt::cuda::Counters& c = exec.counters();
  const rt::Tensor& loss = outputs.back().at(exec.plan().outputs(0).name());
  std::printf(
      "{\"step_ms\": %.4f, \"device_mib\": %.1f, \"taken_mib\": %.1f, \"load_s\": %.2f, "
      "\"steps\": %lld, \"graph_launches\": %lld, \"host_syncs\": %lld, \"launching_steps\": "
      "%lld, \"graph_nodes\": %zu, \"loss\": %g}\n",
      seconds / static_cast<double>(steps) * 1e3, exec.device_bytes() / 1048576.0,
      taken / 1048576.0, load_s, static_cast<long long>(c.steps - start.steps),
      static_cast<long long>(c.graph_launches - start.graph_launches),
      static_cast<long long>(c.host_syncs - start.host_syncs),
      static_cast<long long>(exec.launching_steps()), exec.graph_nodes(),
      loss.dtype() == DType::kFloat32 ? loss.data<float>()[0] : 0.0f);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ampc::Error& e) {
    std::cerr << "cuda_plan_bench: error: " << e.what() << '\n';
    return 1;
  }
}
