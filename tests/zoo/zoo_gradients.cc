// zoo_gradients MODEL.onnx BATCH_DIR OUT_DIR: ampc's step-1 loss and parameter gradients of
// a zoo model, for run_zoo.py to compare with PyTorch's. As the gradient oracle test does
// (tests/oracle/torch_gradient_oracle_test.cc): the model is loaded and prepared as
// compile_model prepares it (compiler::prepare_forward), passes::differentiate adds the backward graph, each gradient
// becomes a graph output, and the graph runs once as an fp32 forward plan on the CPU
// backend with the batch BATCH_DIR/NAME.npy. Writes OUT_DIR/loss.npy and
// OUT_DIR/grad/PARAMETER.npy. An error prints one `ampc: error:` line and exits with 1.
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "base/error.h"
#include "compiler/onnx/import.h"
#include "compiler/pipeline.h"
#include "passes/autodiff/autodiff.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: zoo_gradients MODEL.onnx BATCH_DIR OUT_DIR\n");
    return 2;
  }
  try {
    auto model = ampc::onnx_io::load_model(argv[1]);
    ampc::compiler::prepare_forward(*model);
    ampc::ir::Graph& g = *model->graph;
    const std::string loss = g.outputs.at(0)->name;
    const auto grads = ampc::passes::differentiate(*model, {});
    for (const auto& pg : grads) {
      ampc::ir::Value* out = g.add_value("grad." + pg.parameter->name, pg.gradient->type);
      g.add_node("Identity", {pg.gradient}, {out}, "grad." + pg.parameter->name);
      g.outputs.push_back(out);
    }
    ampc::rt::cpu::Executor exec(ampc::compiler::compile_model(*model, {}, "zoo"));
    std::map<std::string, ampc::rt::Tensor> batch;
    for (const auto& entry : fs::directory_iterator(argv[2])) {
      if (entry.path().extension() != ".npy") continue;
      batch[entry.path().stem().string()] = ampc::rt::io::read_npy(entry.path().string());
    }
    const auto outputs = exec.run(batch);
    const fs::path out_dir = argv[3];
    fs::create_directories(out_dir / "grad");
    ampc::rt::io::write_npy(outputs.at(loss), (out_dir / "loss.npy").string());
    for (const auto& pg : grads) {
      const std::string& name = pg.parameter->name;
      ampc::rt::io::write_npy(outputs.at("grad." + name),
                              (out_dir / "grad" / (name + ".npy")).string());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampc: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
