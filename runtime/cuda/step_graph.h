// One CUDA Graph for a whole plan step: the step's work is captured once from a stream
// (cudaStreamBeginCapture / cudaStreamEndCapture, cudaGraphInstantiate) and replayed with
// one cudaGraphLaunch per step.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace ampc::rt::cuda {

class StepGraph {
 public:
  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph();

  // Captures what `enqueue` puts on `stream` (which must be idle) and instantiates it. An
  // ampc::Error thrown by `enqueue` ends the capture and propagates.
  void capture(cudaStream_t stream, const std::function<void(cudaStream_t)>& enqueue);
  // One cudaGraphLaunch on `stream`.
  void launch(cudaStream_t stream) const;
  // Nodes of the captured graph (kernels, copies...).
  size_t nodes() const { return nodes_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace ampc::rt::cuda
