// Pieces of issue 19 tested in-process: overflow-checked sizes, "nan" rather than "-nan",
// round axis ticks and uncut labels in the report's SVGs (parsed back), the second signal
// ending `ampc train` at once, and the memory check's refusal.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "base/checked_size.h"
#include "base/error.h"
#include "base/number_format.h"
#include "runtime/memory_fit.h"
#include "runtime/stats/axis_ticks.h"
#include "runtime/stats/svg_plot.h"
#include "tools/ampc/interrupt.h"

namespace ampc {
namespace {

TEST(CheckedSize, CountsAndBytesWithinTheAddressSpace) {
  EXPECT_EQ(checked_numel({32, 64}), 2048);
  EXPECT_EQ(checked_numel({}), 1);
  EXPECT_EQ(checked_numel({0, int64_t{1} << 62}), 0);
  EXPECT_FALSE(checked_numel({int64_t{1} << 40, int64_t{1} << 40}));
  EXPECT_FALSE(checked_numel({-1, 3}));
  EXPECT_EQ(checked_tensor_bytes({32, 64}, 4, "x"), 8192);
  EXPECT_EQ(checked_tensor_bytes({int64_t{1} << 46}, 4, "x"), kMaxTensorBytes);  // just fits
  EXPECT_THROW(checked_tensor_bytes({(int64_t{1} << 46) + 1}, 4, "x"), Error);
  EXPECT_THROW(checked_tensor_bytes({int64_t{1} << 40, int64_t{1} << 40}, 4, "x"), Error);
  EXPECT_THROW(checked_tensor_bytes({int64_t{1} << 31, int64_t{1} << 31, 4}, 1, "x"), Error);
  EXPECT_THROW(checked_tensor_bytes({2, -3}, 4, "x"), Error);
  try {
    checked_tensor_bytes({int64_t{1} << 40, int64_t{1} << 40}, 4, "graph input 'x'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "graph input 'x': shape [1099511627776,1099511627776] has more than 2^63 "
                 "elements, more than the 256 TiB (2^48 bytes) a process can address");
  }
  EXPECT_EQ(checked_add_bytes(1, 2, "sum"), 3);
  EXPECT_THROW(checked_add_bytes(std::numeric_limits<int64_t>::max(), 1, "sum"), Error);
}

TEST(NumberFormat, NanIsNanWhateverItsSign) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(format_number(nan), "nan");
  EXPECT_EQ(format_number(-nan), "nan");
  EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity(), "%.4f"), "-inf");
  EXPECT_EQ(format_number(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(format_number(0.12345, "%.4f"), "0.1235");
  char glibc[16];
  std::snprintf(glibc, sizeof glibc, "%f", -nan);
  EXPECT_STREQ(glibc, "-nan");  // what the old output showed
}

// Whether consecutive ticks are k * step with step = {1, 2, 5} * 10^e.
void expect_round(const std::vector<double>& values) {
  ASSERT_GE(values.size(), 2u);
  const double step = values[1] - values[0];
  ASSERT_GT(step, 0);
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-12));
  EXPECT_TRUE(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 ||
              std::abs(mantissa - 5) < 1e-9)
      << "step " << step;
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(values[i] - values[0], step * static_cast<double>(i), step * 1e-9);
    const double k = values[i] / step;
    EXPECT_NEAR(k, std::round(k), 1e-9) << values[i] << " is not a multiple of " << step;
  }
}

TEST(AxisTicks, RoundValuesCoveringTheRange) {
  // The report's cases: steps 1..100 (ticks were 25.75 / 50.5 / 75.25) and a loss from 3.474
  // to 4.426.
  for (auto [lo, hi] : {std::pair{1.0, 100.0}, std::pair{3.474, 4.426}, std::pair{-0.3, 0.7},
                        std::pair{0.0, 1e-5}, std::pair{12345.0, 98765.0}}) {
    const auto t = rt::stats::nice_ticks(lo, hi);
    expect_round(t.values);
    // Covering the range (up to the rounding of step * k).
    EXPECT_LE(t.lo, lo + 1e-9 * t.step);
    EXPECT_GE(t.hi, hi - 1e-9 * t.step);
    EXPECT_GE(t.values.size(), 3u);
    EXPECT_LE(t.values.size(), 11u);
  }
  const auto steps = rt::stats::nice_ticks(1, 100);
  EXPECT_EQ(steps.labels, (std::vector<std::string>{"0", "20", "40", "60", "80", "100"}));
  const auto loss = rt::stats::nice_ticks(3.474, 4.426);
  EXPECT_EQ(loss.labels.front(), "3.4");
  EXPECT_EQ(loss.labels.back(), "4.6");
  EXPECT_EQ(rt::stats::nice_ticks(-14.2, 3.1, 5, true).step, 5);
}

struct SvgText {
  std::string cls;
  double x = 0;
  std::string anchor, text;
};

// Every <text> element of an SVG document with its class, x, text-anchor and content.
std::vector<SvgText> texts(const std::string& svg) {
  std::vector<SvgText> out;
  const std::regex element("<text([^>]*)>([^<]*)</text>");
  const std::regex cls("class=\"([^\"]*)\""), x("\\bx=\"([-0-9.]+)\""),
      anchor("text-anchor=\"([^\"]*)\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), element), end; it != end; ++it) {
    const std::string attrs = (*it)[1];
    SvgText t;
    t.text = (*it)[2];
    std::smatch m;
    if (std::regex_search(attrs, m, cls)) t.cls = m[1];
    if (std::regex_search(attrs, m, x)) t.x = std::stod(m[1]);
    if (std::regex_search(attrs, m, anchor)) t.anchor = m[1];
    out.push_back(t);
  }
  return out;
}

std::vector<double> tick_values(const std::vector<SvgText>& all, const std::string& cls) {
  std::vector<double> v;
  for (const auto& t : all) {
    if (t.cls != cls) continue;
    const std::string s = t.text.rfind("2^", 0) == 0 ? t.text.substr(2) : t.text;
    v.push_back(std::stod(s));
  }
  return v;
}

TEST(SvgPlot, ChartTicksAreRound) {
  rt::stats::Chart c;
  c.title = "loss";
  rt::stats::Series s;
  for (int i = 1; i <= 100; ++i) {
    s.x.push_back(i);
    s.y.push_back(3.474 + 0.952 * (i % 7) / 6.0);
  }
  c.series.push_back(s);
  const auto all = texts(rt::stats::chart_svg(c));
  expect_round(tick_values(all, "xtick"));
  // y ticks are listed bottom to top
  expect_round(tick_values(all, "ytick"));
  c.log2_y = true;
  const auto log = texts(rt::stats::chart_svg(c));
  const auto exps = tick_values(log, "ytick");
  for (double e : exps) EXPECT_EQ(e, std::round(e));
}

TEST(SvgPlot, BarLabelsStayInsideThePicture) {
  std::vector<rt::stats::Bar> bars;
  for (const std::string& name :
       {std::string("fc1.weight"),
        std::string("transformer.blocks.11.attention.query_key_value.weight.gradient"),
        std::string(90, 'W')}) {
    bars.push_back({name, 1e-7, 1e-2});
  }
  const auto all = texts(rt::stats::log2_bars_svg("gradient ranges", bars, std::ldexp(1.0, -14),
                                                  65504, "fp16 normal range"));
  int labels = 0;
  for (const auto& t : all) {
    if (t.cls != "label") continue;
    ++labels;
    ASSERT_EQ(t.anchor, "end");
    // 11 px sans-serif: even an all-capital label averages below 0.7 em a glyph.
    EXPECT_GE(t.x - 0.7 * 11 * static_cast<double>(t.text.size()), 0) << t.text;
  }
  EXPECT_EQ(labels, 3);
  expect_round(tick_values(all, "xtick"));
}

// The second signal ends the process at once with 128 + signal; the first only records it.
TEST(Interrupt, FirstSignalRecordedSecondExitsAtOnce) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    cli::InterruptGuard guard;
    ::raise(SIGINT);
    if (cli::InterruptGuard::signal_received() != SIGINT) ::_exit(3);
    ::raise(SIGINT);  // does not return
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(cli::interrupted_message(SIGTERM, 57, 2000, "c.onnx"),
            "ampc: SIGTERM: stopped after step 57 of 2000; checkpoint written to c.onnx; to "
            "resume, run the same command with --resume c.onnx --steps 1943");
}

TEST(Interrupt, GuardRestoresTheDefaultHandler) {
  { cli::InterruptGuard guard; }
  struct sigaction now {};
  ::sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(MemoryFit, RefusalNamesSizesAndTheInspectCommand) {
  rt::MemoryNeed need;
  need.arena = int64_t{3} << 30;
  need.state = int64_t{1} << 30;
  EXPECT_EQ(need.total(), int64_t{4} << 30);
  try {
    rt::check_memory_fits(need, {int64_t{5} << 29, "MemAvailable"}, "the CPU", "m.onnx");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "the plan needs 4.00 GiB (arena 3.00 GiB, state 1.00 GiB, constants 0 B, inputs "
                 "0 B, workspace 0 B) but only 2.50 GiB is available on the CPU (MemAvailable); "
                 "`ampc inspect m.onnx --memory --device-memory 2.5GiB` finds the largest batch "
                 "that fits");
  }
  EXPECT_NO_THROW(rt::check_memory_fits(need, {int64_t{4} << 30, "x"}, "the CPU", "m.onnx"));
  const auto host = rt::available_host_memory();
  ASSERT_TRUE(host);  // Linux always has MemAvailable
  EXPECT_GT(host->bytes, 0);
}

}  // namespace
}  // namespace ampc
