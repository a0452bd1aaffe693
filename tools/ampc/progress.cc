#include "tools/ampc/progress.h"

#include <cstdio>
#include <string>

#include "base/number_format.h"

namespace ampc::cli {

Progress::Progress(int64_t first_step, int64_t last_step, int64_t every, int64_t batch,
                   bool terminal)
    : first_(first_step),
      last_(last_step),
      every_(every),
      batch_(batch),
      terminal_(terminal),
      start_(Clock::now()),
      last_print_(start_) {}

void Progress::step_done(int64_t step, double loss) {
  loss_sum_ += loss;
  ++loss_count_;
  const auto now = Clock::now();
  const bool due = terminal_ ? now - last_print_ >= std::chrono::milliseconds(100)
                             : (step - first_) % every_ == 0;
  if (due || step == last_) print(step);
}

void Progress::print(int64_t step) {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int64_t done = step - first_, total = last_ - first_;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;  // steps/s
  const double mean_loss = loss_sum_ / static_cast<double>(loss_count_);
  const long long samples_per_s = static_cast<long long>(rate * static_cast<double>(batch_));
  if (terminal_) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done / (total > 0 ? total : 1));
    const int eta = rate > 0 ? static_cast<int>(static_cast<double>(last_ - step) / rate) : 0;
    std::fprintf(stderr, "\r[%s%s] %3d%%  step %lld/%lld  loss %s  %lld samples/s  eta %d:%02d ",
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                 static_cast<int>(100 * done / (total > 0 ? total : 1)),
                 static_cast<long long>(step), static_cast<long long>(last_),
                 format_number(mean_loss, "%.4f").c_str(), samples_per_s, eta / 60, eta % 60);
    open_line_ = true;
  } else {
    std::fprintf(stderr, "step %lld/%lld  loss %s  %lld samples/s\n", static_cast<long long>(step),
                 static_cast<long long>(last_), format_number(mean_loss, "%.4f").c_str(),
                 samples_per_s);
  }
  std::fflush(stderr);
  last_print_ = now;
  loss_sum_ = 0;
  loss_count_ = 0;
}

void Progress::finish() {
  if (open_line_) std::fputc('\n', stderr);
  open_line_ = false;
}

}  // namespace ampc::cli
