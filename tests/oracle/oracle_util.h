// Helpers shared by the PyTorch oracle tests of training (torch_training_oracle_test.cc,
// torch_gradient_oracle_test.cc): the example models and their batches as the oracle script
// writes them, running the script, and the relative error against PyTorch.
#pragma once

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/io/npy.h"
#include "runtime/tensor.h"

namespace ampc::oracle {

struct Model {
  const char* name;
  std::vector<const char*> inputs;
};

inline const std::vector<Model>& example_models() {
  static const std::vector<Model> models = {
      {"mlp", {"x", "y"}}, {"cnn", {"x", "y"}}, {"gpt", {"tokens", "targets"}}};
  return models;
}

// Runs tests/oracle/torch_training_oracle.py with Debian's Python (torch, numpy, onnx) into
// `out`, with `extra` arguments appended; true when it exits with status 0.
inline bool run_training_oracle(const std::filesystem::path& out, const std::string& extra = "") {
  const std::string src = AMPC_SOURCE_DIR;
  const std::string cmd = "/usr/bin/python3 '" + src +
                          "/tests/oracle/torch_training_oracle.py' --models-dir '" + src +
                          "/models' --out '" + out.string() + "' " + extra;
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The model's batch as the script wrote it: OUT/<model>_<input>.npy.
inline std::map<std::string, rt::Tensor> read_batch(const Model& model,
                                                    const std::filesystem::path& dir) {
  std::map<std::string, rt::Tensor> batch;
  for (const char* in : model.inputs) {
    batch[in] = rt::io::read_npy((dir / (std::string(model.name) + "_" + in + ".npy")).string());
  }
  return batch;
}

inline double as_double(const rt::Tensor& t, int64_t i) {
  return t.dtype() == DType::kFloat64 ? t.data<double>()[i] : t.data<float>()[i];
}

// ||got - want|| / ||want|| (float32 or float64 tensors of equal size)
inline double relative_error(const rt::Tensor& got, const rt::Tensor& want) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = as_double(want, i);
    diff += (as_double(got, i) - w) * (as_double(got, i) - w);
    norm += w * w;
  }
  return std::sqrt(diff / norm);
}

}  // namespace ampc::oracle
