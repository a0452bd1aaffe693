// zoo_step_dump MODEL.onnx BATCH_DIR OUT_DIR: diagnosis of a zoo gradient check. Builds and
// runs the same plan as zoo_gradients and writes every step's fp32 outputs as
// OUT_DIR/sSTEP_OUTPUT.npy (e.g. s0075_0.npy), with OUT_DIR/steps.txt listing each step: index,
// domain:op, kernel, input and output buffer ids and the ONNX nodes it computes. Two runs of
// the same model (two builds, or two settings) are then compared step by step to find the
// first value that differs by more than rounding.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "tests/zoo/gradient_plan.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: zoo_step_dump MODEL.onnx BATCH_DIR OUT_DIR\n");
    return 2;
  }
  try {
    ampc::rt::cpu::Executor exec(ampc::zoo::gradient_plan(argv[1]).plan);
    const auto& plan = exec.plan();
    const fs::path out_dir = argv[3];
    fs::create_directories(out_dir);
    {
      std::ofstream f(out_dir / "steps.txt");
      for (int i = 0; i < plan.steps_size(); ++i) {
        const auto& s = plan.steps(i);
        f << i << ' ' << s.domain() << ':' << s.op() << ' ' << s.kernel() << " in";
        for (int id : s.inputs()) f << ' ' << id;
        f << " out";
        for (int id : s.outputs()) f << ' ' << id;
        f << " src";
        for (const auto& n : s.source_nodes()) f << ' ' << n;
        f << '\n';
      }
    }
    exec.set_step_observer([&](int step, const std::vector<const ampc::rt::Tensor*>&,
                               const std::vector<const ampc::rt::Tensor*>& outs) {
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!outs[k] || outs[k]->dtype() != ampc::DType::kFloat32) continue;
        char name[64];
        std::snprintf(name, sizeof name, "s%04d_%zu.npy", step, k);
        ampc::rt::io::write_npy(*outs[k], (out_dir / name).string());
      }
    });
    exec.run(ampc::zoo::read_batch(argv[2]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampc: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
