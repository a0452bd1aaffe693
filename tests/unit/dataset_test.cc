// Training data (runtime/data): .npz files that numpy writes (compressed and not) and folders
// of .npy files are read with the right arrays and values; every bad data set is refused with
// a message naming the file and array; the batcher checks names, dtypes and shapes before the
// first batch and yields the documented sample order, with and without shuffle.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/data/batcher.h"
#include "runtime/data/dataset.h"
#include "runtime/tensor.h"
#include "tests/support/temp_dir.h"

namespace ampc::rt::data {
namespace {
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using ampc::test::TempDir;

// Runs a Python program (numpy as np, the temp folder as `d`) with Debian's Python.
void python(const TempDir& dir, const std::string& program) {
  const std::string script = dir / "script.py";
  {
    std::ofstream out(script);
    out << "import sys, os, zipfile\nimport numpy as np\nd = sys.argv[1]\n" << program << "\n";
  }
  const std::string cmd = "/usr/bin/python3 '" + script + "' '" + dir.path().string() + "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "python failed:\n" << program;
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

// x: f32[10,2,3] with x[i] = 6i .. 6i+5; y: i64[10] with y[i] = 100 + i.
constexpr char kArrays[] =
    "x = np.arange(60, dtype=np.float32).reshape(10, 2, 3)\n"
    "y = np.arange(100, 110, dtype=np.int64)\n";

void expect_xy(const Dataset& ds) {
  EXPECT_EQ(ds.samples(), 10);
  ASSERT_EQ(ds.arrays().size(), 2u);
  const Array* x = ds.find("x");
  const Array* y = ds.find("y");
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->type_str(), "f32[10,2,3]");
  EXPECT_EQ(y->type_str(), "i64[10]");
  std::vector<float> want_x(60);
  std::iota(want_x.begin(), want_x.end(), 0.0f);
  EXPECT_THAT(values<float>(x->to_tensor()), ElementsAreArray(want_x));
  EXPECT_THAT(values<int64_t>(y->to_tensor()),
              ElementsAre(100, 101, 102, 103, 104, 105, 106, 107, 108, 109));
}

TEST(Dataset, ReadsCompressedAndUncompressedNpz) {
  TempDir d;
  python(d, std::string(kArrays) +
                "np.savez_compressed(os.path.join(d, 'c.npz'), x=x, y=y)\n"
                "np.savez(os.path.join(d, 'u.npz'), x=x, y=y)\n");
  expect_xy(Dataset::open(d / "c.npz"));
  expect_xy(Dataset::open(d / "u.npz"));
}

TEST(Dataset, MapsFolderOfNpyIgnoringOtherFiles) {
  TempDir d;
  python(d, std::string(kArrays) +
                "os.mkdir(os.path.join(d, 'f'))\n"
                "np.save(os.path.join(d, 'f', 'x.npy'), x)\n"
                "np.save(os.path.join(d, 'f', 'y.npy'), y)\n"
                "open(os.path.join(d, 'f', 'README.txt'), 'w').write('not data')\n");
  expect_xy(Dataset::open(d / "f"));
}

TEST(Dataset, ReadsCommittedData) {
  const Dataset ds = Dataset::open(std::string(AMPC_SOURCE_DIR) + "/models/data/digits.npz");
  EXPECT_EQ(ds.samples(), 1797);
  EXPECT_EQ(ds.find("x")->type_str(), "f32[1797,64]");
  EXPECT_EQ(ds.find("y")->type_str(), "i64[1797]");
  const Tensor y = ds.find("y")->to_tensor();
  for (int64_t v : values<int64_t>(y)) ASSERT_TRUE(v >= 0 && v <= 9) << v;
  const Dataset seq = Dataset::open(std::string(AMPC_SOURCE_DIR) + "/models/data/seqtask.npz");
  EXPECT_EQ(seq.find("tokens")->type_str(), "i64[2048,32]");
  EXPECT_EQ(seq.find("targets")->type_str(), "i64[2048,32]");
}

TEST(Dataset, SplitTakesFirstSamplesAndRest) {
  TempDir d;
  python(d, std::string(kArrays) + "np.savez(os.path.join(d, 'u.npz'), x=x, y=y)\n");
  const auto [head, rest] = split(Dataset::open(d / "u.npz"), 3);
  EXPECT_EQ(head.samples(), 3);
  EXPECT_EQ(rest.samples(), 7);
  EXPECT_THAT(values<int64_t>(head.find("y")->to_tensor()), ElementsAre(100, 101, 102));
  EXPECT_THAT(values<int64_t>(rest.find("y")->to_tensor()),
              ElementsAre(103, 104, 105, 106, 107, 108, 109));
  EXPECT_EQ(rest.find("x")->type_str(), "f32[7,2,3]");
  EXPECT_EQ(values<float>(rest.find("x")->to_tensor())[0], 18.0f);
  EXPECT_THAT(refusal([&] { split(head, 4); }), HasSubstr("which has 3"));
}

TEST(Dataset, RefusesBadData) {
  TempDir d;
  python(d,
         "open(os.path.join(d, 'text.npz'), 'w').write('hello')\n"
         "with zipfile.ZipFile(os.path.join(d, 'notes.npz'), 'w') as z:\n"
         "    z.writestr('notes.txt', 'hi')\n"
         "    z.writestr('x.npy', b'')\n"
         "with zipfile.ZipFile(os.path.join(d, 'junk.npz'), 'w') as z:\n"
         "    z.writestr('x.npy', 'not an array')\n"
         "np.savez(os.path.join(d, 'lengths.npz'), x=np.zeros((10, 2), np.float32),\n"
         "         y=np.zeros(9, np.int64))\n"
         "np.savez(os.path.join(d, 'strings.npz'), x=np.array(['a', 'b']))\n"
         "np.savez(os.path.join(d, 'scalar.npz'), x=np.float32(1))\n"
         "np.savez(os.path.join(d, 'empty.npz'))\n"
         "os.mkdir(os.path.join(d, 'f'))\n"
         "np.save(os.path.join(d, 'f', 'z.npy'), np.zeros(4, np.complex64))\n");
  EXPECT_THAT(refusal([&] { Dataset::open(d / "missing.npz"); }),
              HasSubstr("missing.npz' does not exist"));
  EXPECT_THAT(refusal([&] { Dataset::open(d / "text.npz"); }),
              HasSubstr("text.npz' is neither a folder of .npy files nor an .npz (zip) file"));
  EXPECT_THAT(refusal([&] { Dataset::map_folder(d / "text.npz"); }),
              HasSubstr("text.npz' is not a folder"));
  EXPECT_THAT(refusal([&] { Dataset::open(d / "notes.npz"); }),
              HasSubstr("notes.npz': entry 'notes.txt' is not a .npy array"));
  EXPECT_THAT(refusal([&] { Dataset::open(d / "junk.npz"); }),
              HasSubstr("junk.npz' array 'x' is not a .npy file"));
  const std::string lengths = refusal([&] { Dataset::open(d / "lengths.npz"); });
  EXPECT_THAT(lengths, HasSubstr("lengths.npz': arrays have different numbers of samples"));
  EXPECT_THAT(lengths, HasSubstr("'x' is f32[10,2], 'y' is i64[9]"));
  EXPECT_THAT(refusal([&] { Dataset::open(d / "strings.npz"); }),
              HasSubstr("strings.npz' array 'x': NumPy dtype '<U1' is not supported"));
  EXPECT_THAT(refusal([&] { Dataset::open(d / "scalar.npz"); }),
              HasSubstr("scalar.npz' array 'x' is a scalar"));
  EXPECT_THAT(refusal([&] { Dataset::open(d / "empty.npz"); }),
              HasSubstr("empty.npz' holds no .npy arrays"));
  EXPECT_THAT(refusal([&] { Dataset::open(d / "f"); }),
              HasSubstr("z.npy' array 'z': NumPy dtype '<c8' is not supported"));
}

// A folder with x: f32[n,2] (x[i] = {i, -i}) and y: i64[n] (y[i] = i).
Dataset numbered(const TempDir& d, int n) {
  python(d,
         "n = " + std::to_string(n) +
             "\nos.makedirs(os.path.join(d, 'num'), exist_ok=True)\n"
             "i = np.arange(n)\n"
             "np.save(os.path.join(d, 'num', 'x.npy'), np.stack([i, -i], 1).astype(np.float32))\n"
             "np.save(os.path.join(d, 'num', 'y.npy'), i.astype(np.int64))\n");
  return Dataset::open(d / "num");
}

const std::map<std::string, InputSpec> kXY = {{"x", {DType::kFloat32, {2}}},
                                              {"y", {DType::kInt64, {}}}};

// The sample indices of the next batch, read from the batch tensors themselves.
std::vector<int64_t> next_samples(Batcher& b) {
  const std::map<std::string, Tensor> batch = b.next();
  const std::vector<float> x = values<float>(batch.at("x"));
  const std::vector<int64_t> y = values<int64_t>(batch.at("y"));
  EXPECT_EQ(batch.at("x").type_str(), "f32[" + std::to_string(y.size()) + ",2]");
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(x[2 * i], static_cast<float>(y[i]));
    EXPECT_EQ(x[2 * i + 1], -static_cast<float>(y[i]));
  }
  return y;
}

TEST(Batcher, FileOrderWrapsAndDropsTail) {
  TempDir d;
  Batcher b(numbered(d, 10), kXY, {.batch_size = 4});
  EXPECT_EQ(b.batches_per_epoch(), 2);
  EXPECT_THAT(next_samples(b), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(next_samples(b), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(next_samples(b), ElementsAre(0, 1, 2, 3));  // 8, 9 dropped; next epoch
  EXPECT_THAT(next_samples(b), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(next_samples(b), ElementsAre(0, 1, 2, 3));
  b.set_position(7);
  EXPECT_THAT(next_samples(b), ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(b.position(), 8);

  Batcher exact(numbered(d, 6), kXY, {.batch_size = 3});
  EXPECT_THAT(next_samples(exact), ElementsAre(0, 1, 2));
  EXPECT_THAT(next_samples(exact), ElementsAre(3, 4, 5));
  EXPECT_THAT(next_samples(exact), ElementsAre(0, 1, 2));
}

TEST(Batcher, ShuffleIsReproduciblePerSeedAndPermutesEachEpoch) {
  TempDir d;
  const Dataset ds = numbered(d, 10);
  Batcher a(ds, kXY, {.batch_size = 3, .shuffle = true, .seed = 7});
  Batcher again(ds, kXY, {.batch_size = 3, .shuffle = true, .seed = 7});
  Batcher other(ds, kXY, {.batch_size = 3, .shuffle = true, .seed = 8});
  std::vector<std::vector<int64_t>> epochs;
  bool differs_from_other_seed = false;
  for (int e = 0; e < 4; ++e) {
    std::vector<int64_t> epoch;
    for (int j = 0; j < 3; ++j) {
      const std::vector<int64_t> s = next_samples(a);
      EXPECT_EQ(s, next_samples(again));
      if (s != next_samples(other)) differs_from_other_seed = true;
      epoch.insert(epoch.end(), s.begin(), s.end());
    }
    // The epoch's 9 samples are the first 9 of that epoch's permutation of 0..9.
    const std::vector<int64_t> order = shuffled_order(10, 7, e);
    EXPECT_EQ(epoch, std::vector<int64_t>(order.begin(), order.begin() + 9));
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_THAT(sorted, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    epochs.push_back(epoch);
  }
  EXPECT_TRUE(differs_from_other_seed);
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(shuffled_order(1000, 7, 0), shuffled_order(1000, 8, 0));
  // Resuming at batch 5 gives what an uninterrupted run gives there.
  Batcher resumed(ds, kXY, {.batch_size = 3, .shuffle = true, .seed = 7});
  resumed.set_position(5);
  EXPECT_EQ(resumed.indices(5), std::vector<int64_t>(epochs[1].begin() + 6, epochs[1].end()));
}

TEST(Batcher, RefusesMismatchedInputsBeforeTheFirstBatch) {
  TempDir d;
  const Dataset ds = numbered(d, 10);
  auto refuse = [&](std::map<std::string, InputSpec> inputs, int64_t batch) {
    return refusal([&] { Batcher(ds, std::move(inputs), {.batch_size = batch}); });
  };
  EXPECT_THAT(refuse({{"tokens", {DType::kInt64, {}}}}, 4),
              HasSubstr("input 'tokens' (i64[] per sample) has no array in '" + (d / "num") +
                        "', which holds: x, y"));
  EXPECT_THAT(refuse({{"y", {DType::kInt32, {}}}}, 4),
              HasSubstr("input 'y' expects element type i32, but array 'y' in '" + (d / "num") +
                        "' is i64"));
  EXPECT_THAT(refuse({{"x", {DType::kFloat32, {1, 2}}}}, 4),
              HasSubstr("input 'x' expects samples of shape [1,2], but array 'x' in '" +
                        (d / "num") + "' is f32[10,2] (samples of shape [2])"));
  EXPECT_THAT(refuse(kXY, 11), HasSubstr("has 10 samples, fewer than the batch size 11"));
}

}  // namespace
}  // namespace ampc::rt::data
