// zoo_gradients MODEL.onnx BATCH_DIR OUT_DIR: ampc's step-1 loss and parameter gradients of
// a zoo model, for run_zoo.py to compare with PyTorch's. As the gradient oracle test does
// (tests/oracle/torch_gradient_oracle_test.cc): the model is loaded and prepared as
// compile_model prepares it (compiler::prepare_forward), passes::differentiate adds the backward
// graph, each gradient becomes a graph output, and the graph runs once as an fp32 forward plan on
// the CPU backend with the batch BATCH_DIR/NAME.npy. Writes OUT_DIR/loss.npy and
// OUT_DIR/grad/PARAMETER.npy. An error prints one `ampc: error:` line and exits with 1.
#include <cstdio>
#include <filesystem>
#include <string>

#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "tests/zoo/gradient_plan.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: zoo_gradients MODEL.onnx BATCH_DIR OUT_DIR\n");
    return 2;
  }
  try {
    const auto zoo = ampc::zoo::gradient_plan(argv[1]);
    ampc::rt::cpu::Executor exec(zoo.plan);
    const auto outputs = exec.run(ampc::zoo::read_batch(argv[2]));
    const fs::path out_dir = argv[3];
    fs::create_directories(out_dir / "grad");
    ampc::rt::io::write_npy(outputs.at(zoo.loss), (out_dir / "loss.npy").string());
    for (const std::string& name : zoo.parameters) {
      ampc::rt::io::write_npy(outputs.at("grad." + name),
                              (out_dir / "grad" / (name + ".npy")).string());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampc: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
