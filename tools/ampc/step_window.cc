#include "tools/ampc/step_window.h"

#include <algorithm>
#include <chrono>

namespace ampc::cli {

StepWindow::StepWindow(rt::Backend& backend, rt::data::Batcher& batcher, int64_t accum,
                       int64_t window, Prepare prepare)
    : backend_(backend),
      batcher_(batcher),
      accum_(accum),
      window_(std::max<int64_t>(1, window)),
      prepare_(std::move(prepare)),
      position_(batcher.position()) {}

StepWindow::Run StepWindow::next(int64_t step, int64_t k, int64_t window_end) {
  if (queue_.empty()) {
    const auto start = std::chrono::steady_clock::now();
    // Without look-ahead one micro-batch, else whole steps up to the window's end.
    const int64_t steps = window_ == 1 ? 1 : std::clamp<int64_t>(window_end - step + 1, 1, window_);
    const int64_t runs = window_ == 1 ? 1 : steps * accum_;
    std::vector<Queued> submitted;
    for (int64_t r = 0; r < runs; ++r) {
      Queued q;
      q.run.batch = batcher_.next();
      q.position = batcher_.position();
      const int64_t run_step = window_ == 1 ? step : step + r / accum_;
      const int64_t run_k = window_ == 1 ? k : r % accum_;
      if (prepare_) prepare_(q.run.batch, run_step, run_k);
      backend_.submit(q.run.batch);
      submitted.push_back(std::move(q));
    }
    auto outputs = backend_.collect();
    for (size_t r = 0; r < submitted.size(); ++r) {
      submitted[r].run.outputs = std::move(outputs.at(r));
      queue_.push_back(std::move(submitted[r]));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    step_seconds_ = window_ == 1 ? seconds * static_cast<double>(accum_) : seconds / steps;
  }
  Queued q = std::move(queue_.front());
  queue_.pop_front();
  position_ = q.position;
  return std::move(q.run);
}

}  // namespace ampc::cli
