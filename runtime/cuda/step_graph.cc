#include "runtime/cuda/step_graph.h"

#include "base/error.h"
#include "runtime/cuda/cuda_check.h"

namespace ampc::rt::cuda {

StepGraph::~StepGraph() {
  if (exec_) (void)cudaGraphExecDestroy(exec_);
  if (graph_) (void)cudaGraphDestroy(graph_);
}

void StepGraph::capture(cudaStream_t stream, const std::function<void(cudaStream_t)>& enqueue) {
  if (exec_) throw Error("internal: the step graph is captured already");
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    enqueue(stream);
  } catch (...) {
    cudaGraph_t broken = nullptr;
    (void)cudaStreamEndCapture(stream, &broken);
    if (broken) (void)cudaGraphDestroy(broken);
    (void)cudaGetLastError();
    throw;
  }
  check(cudaStreamEndCapture(stream, &graph_), "cudaStreamEndCapture (capturing the step)");
  check(cudaGraphGetNodes(graph_, nullptr, &nodes_), "cudaGraphGetNodes");
  check(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
  check(cudaGraphUpload(exec_, stream), "cudaGraphUpload");
}

void StepGraph::launch(cudaStream_t stream) const {
  check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch");
}

}  // namespace ampc::rt::cuda
