// The training loop's runs of the plan, a window of steps ahead on a backend that computes
// asynchronously (the CUDA executor): the window's micro-batches are submitted without
// waiting and their outputs collected once, so the host waits for the device once per
// window (every --log-every steps, and at checkpoints and the end) instead of once per step.
// Without look-ahead (the CPU backend, --find-nonfinite), each call runs one micro-batch.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>

#include "runtime/backend.h"
#include "runtime/data/batcher.h"

namespace ampc::cli {

class StepWindow {
 public:
  // Called on each micro-batch before it runs: (feeds, step, micro-batch index).
  using Prepare = std::function<void(std::map<std::string, rt::Tensor>&, int64_t, int64_t)>;

  // `window`: optimizer steps run ahead at most (1: none); `accum`: micro-batches per step.
  StepWindow(rt::Backend& backend, rt::data::Batcher& batcher, int64_t accum, int64_t window,
             Prepare prepare);

  struct Run {
    std::map<std::string, rt::Tensor> batch, outputs;
  };
  // Micro-batch `k` of optimizer step `step`, run, with its outputs; steps come in order.
  // With look-ahead, the first call of a window runs steps step..min(step + window - 1,
  // window_end) and waits for them once.
  Run next(int64_t step, int64_t k, int64_t window_end);
  // The batcher's position after the last micro-batch handed out (a checkpoint's).
  int64_t position() const { return position_; }
  // Wall-clock seconds per optimizer step of the last window.
  double step_seconds() const { return step_seconds_; }

 private:
  struct Queued {
    Run run;
    int64_t position = 0;
  };
  rt::Backend& backend_;
  rt::data::Batcher& batcher_;
  int64_t accum_, window_;
  Prepare prepare_;
  std::deque<Queued> queue_;
  int64_t position_ = 0;
  double step_seconds_ = 0;
};

}  // namespace ampc::cli
