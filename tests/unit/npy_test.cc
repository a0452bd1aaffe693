// NumPy .npy files (runtime/io/npy.h) against NumPy itself: files that numpy writes (made at
// test time with /usr/bin/python3) are read with the right dtype, shape and values; files
// that write_npy writes are read back by numpy, which prints what it sees; Fortran-order,
// big-endian and broken files are refused with a message that says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "runtime/io/npy.h"
#include "runtime/tensor.h"
#include "tests/support/temp_dir.h"

namespace ampc::rt::io {
namespace {
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using ampc::test::TempDir;

// Runs a Python program (numpy imported as np, the temp folder as `d`) with Debian's Python
// and returns its stdout; fails the test when it does not exit 0.
std::string python(const TempDir& dir, const std::string& program) {
  const std::string script = dir / "script.py";
  {
    std::ofstream out(script);
    out << "import sys, os\nimport numpy as np\nd = sys.argv[1]\n" << program << "\n";
  }
  const std::string cmd = "/usr/bin/python3 '" + script + "' '" + dir.path().string() + "'";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "python failed:\n" << program;
  return out;
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

std::string refusal(const std::string& path) {
  try {
    read_npy(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "read_npy accepted " << path;
  return "";
}

TEST(Npy, ReadsWhatNumpyWrites) {
  TempDir dir;
  python(dir, R"(
np.save(os.path.join(d, 'f32.npy'), (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3))
np.save(os.path.join(d, 'i64.npy'), np.array([-2**40, -1, 0, 7, 2**62], dtype=np.int64))
np.save(os.path.join(d, 'bool.npy'), np.array([True, False, False, True, True]))
np.save(os.path.join(d, 'f16.npy'),
        np.array([[0.5, -2.0], [65504.0, 1e-4], [0.1, -0.0]], dtype=np.float16))
np.save(os.path.join(d, 'scalar.npy'), np.float32(3.25))
np.save(os.path.join(d, 'f64_3d.npy'), np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 8)
np.save(os.path.join(d, 'i32_3d.npy'), -np.arange(24, dtype=np.int32).reshape(4, 3, 2))
np.save(os.path.join(d, 'u8.npy'), np.array([0, 1, 255], dtype=np.uint8))
np.save(os.path.join(d, 'empty.npy'), np.zeros((0, 3), dtype=np.float32))
np.save(os.path.join(d, 'one.npy'), np.array([42], dtype=np.int64))
np.lib.format.write_array(open(os.path.join(d, 'v2.npy'), 'wb'),
                          np.array([1.5, 2.5], dtype=np.float32), version=(2, 0))
np.lib.format.write_array(open(os.path.join(d, 'v3.npy'), 'wb'),
                          np.array([[7]], dtype=np.int16), version=(3, 0))
)");

  Tensor f32 = read_npy(dir / "f32.npy");
  EXPECT_EQ(f32.dtype(), DType::kFloat32);
  EXPECT_THAT(f32.shape(), ElementsAre(2, 3));
  EXPECT_THAT(values<float>(f32), ElementsAre(-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f));

  Tensor i64 = read_npy(dir / "i64.npy");
  EXPECT_EQ(i64.dtype(), DType::kInt64);
  EXPECT_THAT(i64.shape(), ElementsAre(5));
  EXPECT_THAT(values<int64_t>(i64), ElementsAre(-(int64_t{1} << 40), -1, 0, 7, int64_t{1} << 62));

  Tensor b = read_npy(dir / "bool.npy");
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_THAT(b.shape(), ElementsAre(5));
  EXPECT_THAT(values<bool>(b), ElementsAre(true, false, false, true, true));

  Tensor f16 = read_npy(dir / "f16.npy");
  EXPECT_EQ(f16.dtype(), DType::kFloat16);
  EXPECT_THAT(f16.shape(), ElementsAre(3, 2));
  std::vector<uint16_t> bits;
  for (Half h : values<Half>(f16)) bits.push_back(h.bits);
  // IEEE half bit patterns: 0.5, -2, 65504 (max), 1e-4 (nearest: 0x068e), 0.1 (0x2e66), -0.
  EXPECT_THAT(bits, ElementsAre(0x3800, 0xc000, 0x7bff, 0x068e, 0x2e66, 0x8000));
  EXPECT_EQ(half_to_float(values<Half>(f16)[3]), 0.00010001659393310547f);

  Tensor scalar = read_npy(dir / "scalar.npy");
  EXPECT_EQ(scalar.dtype(), DType::kFloat32);
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.data<float>()[0], 3.25f);

  Tensor f64 = read_npy(dir / "f64_3d.npy");
  EXPECT_EQ(f64.dtype(), DType::kFloat64);
  EXPECT_THAT(f64.shape(), ElementsAre(2, 3, 4));
  std::vector<double> expect64(24);
  for (int i = 0; i < 24; ++i) expect64[i] = i / 8.0;
  EXPECT_THAT(values<double>(f64), ElementsAreArray(expect64));

  Tensor i32 = read_npy(dir / "i32_3d.npy");
  EXPECT_EQ(i32.dtype(), DType::kInt32);
  EXPECT_THAT(i32.shape(), ElementsAre(4, 3, 2));
  EXPECT_EQ(i32.data<int32_t>()[0], 0);
  EXPECT_EQ(i32.data<int32_t>()[1], -1);  // [0,0,1]: C order
  EXPECT_EQ(i32.data<int32_t>()[2], -2);  // [0,1,0]
  EXPECT_EQ(i32.data<int32_t>()[23], -23);

  EXPECT_THAT(values<uint8_t>(read_npy(dir / "u8.npy")), ElementsAre(0, 1, 255));

  Tensor empty = read_npy(dir / "empty.npy");
  EXPECT_THAT(empty.shape(), ElementsAre(0, 3));
  EXPECT_EQ(empty.numel(), 0);

  Tensor one = read_npy(dir / "one.npy");
  EXPECT_THAT(one.shape(), ElementsAre(1));
  EXPECT_EQ(one.data<int64_t>()[0], 42);

  Tensor v2 = read_npy(dir / "v2.npy");
  EXPECT_THAT(v2.shape(), ElementsAre(2));
  EXPECT_THAT(values<float>(v2), ElementsAre(1.5f, 2.5f));
  Tensor v3 = read_npy(dir / "v3.npy");
  EXPECT_EQ(v3.dtype(), DType::kInt16);
  EXPECT_THAT(v3.shape(), ElementsAre(1, 1));
  EXPECT_EQ(v3.data<int16_t>()[0], 7);
}

TEST(Npy, NumpyReadsWhatWriteNpyWrites) {
  TempDir dir;
  Tensor f32(DType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) f32.data<float>()[i] = 0.25f * static_cast<float>(i) - 0.5f;
  write_npy(f32, dir / "f32.npy");

  Tensor i64(DType::kInt64, {4});
  const int64_t i64v[] = {-(int64_t{1} << 40), -1, 0, int64_t{1} << 62};
  for (int i = 0; i < 4; ++i) i64.data<int64_t>()[i] = i64v[i];
  write_npy(i64, dir / "i64.npy");

  Tensor b(DType::kBool, {2, 2});
  const bool bv[] = {true, false, false, true};
  for (int i = 0; i < 4; ++i) b.data<bool>()[i] = bv[i];
  write_npy(b, dir / "bool.npy");

  Tensor f16(DType::kFloat16, {3});
  const float hv[] = {0.5f, -2.0f, 65504.0f};
  for (int i = 0; i < 3; ++i) f16.data<Half>()[i] = float_to_half(hv[i]);
  write_npy(f16, dir / "f16.npy");

  Tensor scalar(DType::kFloat64, {});
  scalar.data<double>()[0] = -1.125;
  write_npy(scalar, dir / "scalar.npy");

  Tensor cube(DType::kInt32, {2, 1, 3});
  for (int i = 0; i < 6; ++i) cube.data<int32_t>()[i] = 10 * i;
  write_npy(cube, dir / "cube.npy");

  write_npy(Tensor(DType::kFloat32, {0, 5}), dir / "empty.npy");

  // numpy prints: name, dtype, shape, C-contiguity, values (repr of the list).
  const std::string out = python(dir, R"(
for name in ['f32', 'i64', 'bool', 'f16', 'scalar', 'cube', 'empty']:
    a = np.load(os.path.join(d, name + '.npy'))
    with open(os.path.join(d, name + '.npy'), 'rb') as f:
        assert f.read(6) == b'\x93NUMPY'
        major, minor = f.read(2)
        hlen = int.from_bytes(f.read(2), 'little')
        assert (10 + hlen) % 64 == 0, 'data not aligned to 64 bytes'
    print(name, a.dtype.str, a.shape, a.flags['C_CONTIGUOUS'], a.tolist())
)");
  EXPECT_EQ(out,
            "f32 <f4 (2, 3) True [[-0.5, -0.25, 0.0], [0.25, 0.5, 0.75]]\n"
            "i64 <i8 (4,) True [-1099511627776, -1, 0, 4611686018427387904]\n"
            "bool |b1 (2, 2) True [[True, False], [False, True]]\n"
            "f16 <f2 (3,) True [0.5, -2.0, 65504.0]\n"
            "scalar <f8 () True -1.125\n"
            "cube <i4 (2, 1, 3) True [[[0, 10, 20]], [[30, 40, 50]]]\n"
            "empty <f4 (0, 5) True []\n");

  // And ampc reads its own files back unchanged.
  Tensor back = read_npy(dir / "cube.npy");
  EXPECT_THAT(back.shape(), ElementsAre(2, 1, 3));
  EXPECT_THAT(values<int32_t>(back), ElementsAre(0, 10, 20, 30, 40, 50));
}

TEST(Npy, RefusesFortranOrderClearly) {
  TempDir dir;
  python(dir, R"(
a = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
assert not a.flags['C_CONTIGUOUS']
np.save(os.path.join(d, 'fortran.npy'), a)
)");
  const std::string msg = refusal(dir / "fortran.npy");
  EXPECT_THAT(msg, HasSubstr("fortran.npy"));
  EXPECT_THAT(msg, HasSubstr("Fortran"));
  EXPECT_THAT(msg, HasSubstr("not supported"));
}

TEST(Npy, RefusesOtherBrokenOrUnsupportedFiles) {
  TempDir dir;
  python(dir, R"(
np.save(os.path.join(d, 'big_endian.npy'), np.arange(3, dtype='>f4'))
np.save(os.path.join(d, 'complex.npy'), np.zeros(2, dtype=np.complex64))
np.save(os.path.join(d, 'objects.npy'), np.array(['a', None], dtype=object), allow_pickle=True)
np.save(os.path.join(d, 'good.npy'), np.arange(10, dtype=np.float32))
data = open(os.path.join(d, 'good.npy'), 'rb').read()
open(os.path.join(d, 'short_data.npy'), 'wb').write(data[:-4])
open(os.path.join(d, 'long_data.npy'), 'wb').write(data + b'\0\0\0\0')
open(os.path.join(d, 'short_header.npy'), 'wb').write(data[:40])
open(os.path.join(d, 'text.npy'), 'w').write('1 2 3\n')
)");
  EXPECT_THAT(refusal(dir / "big_endian.npy"), HasSubstr("'>f4' is not supported"));
  EXPECT_THAT(refusal(dir / "complex.npy"), HasSubstr("'<c8' is not supported"));
  EXPECT_THAT(refusal(dir / "objects.npy"), HasSubstr("'|O' is not supported"));
  EXPECT_THAT(refusal(dir / "short_data.npy"), HasSubstr("data has 36 bytes, f32[10] needs 40"));
  EXPECT_THAT(refusal(dir / "long_data.npy"), HasSubstr("data has 44 bytes, f32[10] needs 40"));
  EXPECT_THAT(refusal(dir / "short_header.npy"), HasSubstr("truncated"));
  EXPECT_THAT(refusal(dir / "text.npy"), HasSubstr("not a .npy file"));
  EXPECT_THAT(refusal(dir / "missing.npy"), HasSubstr("missing.npy"));
}

}  // namespace
}  // namespace ampc::rt::io
