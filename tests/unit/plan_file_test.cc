// The plan file (runtime/plan/plan_file.h): a plan survives save/load unchanged; a file of
// another format version, a truncated file (cut at many points), a file with a flipped byte,
// a padded file and files that are not plans at all are refused with a message that says
// which of these it is and names the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "base/error.h"
#include "runtime/plan/plan_file.h"
#include "tests/support/temp_dir.h"

namespace ampc::plan {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kHeaderSize = 28;  // magic 8 + version 4 + size 8 + checksum 8

using ampc::test::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <typename T>
T read_le(const std::string& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

template <typename T>
void write_le(std::string& bytes, size_t offset, T v) {
  std::memcpy(bytes.data() + offset, &v, sizeof v);
}

// A plan that uses every kind of field: options, buffers of every role with initial data
// (one large), steps with attributes of every kind and provenance, bindings.
Plan sample_plan() {
  Plan p;
  p.set_producer("ampc 0.1.0");
  p.set_model_name("sample");
  auto* opt = p.add_options();
  opt->set_key("input_shape.x");
  opt->set_value("4x256");
  const BufferRole roles[] = {INPUT, CONSTANT, STATE, ACTIVATION, OUTPUT};
  const char* names[] = {"x", "w", "moment", "h", "loss"};
  for (int i = 0; i < 5; ++i) {
    auto* b = p.add_buffers();
    b->set_id(i);
    b->set_name(names[i]);
    b->set_dtype(1);  // FLOAT
    b->set_role(roles[i]);
    b->set_shape_known(i != 3);
    if (i < 3) {
      b->add_shape(4);
      b->add_shape(256);
    }
    if (roles[i] == CONSTANT || roles[i] == STATE) {
      auto* t = b->mutable_initial();
      t->set_dtype(1);
      t->add_dims(4);
      t->add_dims(256);
      std::vector<float> v(4 * 256);
      for (size_t k = 0; k < v.size(); ++k)
        v[k] = 0.001f * static_cast<float>(k) - static_cast<float>(i);
      t->set_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    }
  }
  auto* s = p.add_steps();
  s->set_op("Gemm");
  s->add_inputs(0);
  s->add_inputs(1);
  s->add_inputs(-1);
  s->add_outputs(3);
  s->add_source_nodes("/fc1/Gemm");
  s->add_source_nodes("/fc1/Add");
  s->set_opset_version(17);
  auto* a = s->add_attributes();
  a->set_name("transB");
  a->set_i(1);
  a = s->add_attributes();
  a->set_name("alpha");
  a->set_f(0.5f);
  a = s->add_attributes();
  a->set_name("mode");
  a->set_s("constant");
  a = s->add_attributes();
  a->set_name("perm");
  a->mutable_ints()->add_v(1);
  a->mutable_ints()->add_v(0);
  a = s->add_attributes();
  a->set_name("scales");
  a->mutable_floats()->add_v(2.5f);
  a = s->add_attributes();
  a->set_name("names");
  a->mutable_strings()->add_v("a");
  a = s->add_attributes();
  a->set_name("value");
  a->mutable_t()->set_dtype(7);  // INT64
  a->mutable_t()->add_dims(1);
  a->mutable_t()->set_data(std::string(8, '\x01'));
  s = p.add_steps();
  s->set_op("ReduceMean");
  s->set_domain("");
  s->add_inputs(3);
  s->add_outputs(4);
  s->add_source_nodes("/ReduceMean");
  s->set_opset_version(17);
  auto* in = p.add_inputs();
  in->set_name("x");
  in->set_buffer(0);
  auto* out = p.add_outputs();
  out->set_name("loss");
  out->set_buffer(4);
  return p;
}

// The message of the ampc::Error that load_plan throws for `bytes` written to a file.
std::string refusal(const TempDir& dir, const std::string& bytes,
                    const std::string& name = "bad.plan") {
  const std::string path = dir / name;
  write_bytes(path, bytes);
  try {
    load_plan(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_plan accepted " << path << " (" << bytes.size() << " bytes)";
  return "";
}

TEST(PlanFile, RoundTripsThroughSaveAndLoad) {
  TempDir dir;
  const Plan plan = sample_plan();
  save_plan(plan, dir / "p.plan");
  const Plan loaded = load_plan(dir / "p.plan");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(plan, loaded))
      << "saved:\n"
      << plan.DebugString() << "loaded:\n"
      << loaded.DebugString();
  EXPECT_EQ(loaded.buffers(1).initial().data().size(), 4u * 256u * sizeof(float));
  EXPECT_EQ(loaded.steps(0).attributes(1).f(), 0.5f);
  EXPECT_EQ(loaded.steps(0).source_nodes(1), "/fc1/Add");

  // The file is the header followed by the serialised message, nothing else.
  const std::string bytes = read_bytes(dir / "p.plan");
  ASSERT_GT(bytes.size(), kHeaderSize);
  EXPECT_EQ(bytes.substr(0, 8), "AMPCPLAN");
  EXPECT_EQ(read_le<uint32_t>(bytes, 8), kPlanFormatVersion);
  EXPECT_EQ(read_le<uint64_t>(bytes, 12), bytes.size() - kHeaderSize);
  EXPECT_EQ(read_le<uint64_t>(bytes, 20), fnv1a(bytes.substr(kHeaderSize)));
  EXPECT_EQ(bytes, serialize_plan(plan));

  // In memory too, and an empty plan.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(plan, parse_plan(bytes, "mem")));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      Plan(), parse_plan(serialize_plan(Plan()), "mem")));

  // Saving over an existing file replaces it and leaves nothing else in the folder.
  Plan other = plan;
  other.set_model_name("other");
  save_plan(other, dir / "p.plan");
  EXPECT_EQ(load_plan(dir / "p.plan").model_name(), "other");
  size_t files = 0;
  for ([[maybe_unused]] const auto& e :
       fs::directory_iterator(fs::path(dir / "p.plan").parent_path()))
    ++files;
  EXPECT_EQ(files, 1u) << "temporary file left beside the plan";
}

TEST(PlanFile, RefusesAnotherFormatVersionNamingBoth) {
  TempDir dir;
  const std::string good = serialize_plan(sample_plan());
  // Version 1 plans (before the training signature) are the ones users hold.
  for (uint32_t version :
       {1u, 2u, kPlanFormatVersion - 1, kPlanFormatVersion + 1, kPlanFormatVersion + 1000, 0u}) {
    SCOPED_TRACE("version " + std::to_string(version));
    std::string bytes = good;
    write_le<uint32_t>(bytes, 8, version);
    const std::string msg = refusal(dir, bytes);
    EXPECT_THAT(msg, HasSubstr("bad.plan"));
    EXPECT_THAT(msg, HasSubstr("version " + std::to_string(version)));
    EXPECT_THAT(msg, HasSubstr("version " + std::to_string(kPlanFormatVersion)));
    EXPECT_THAT(msg, HasSubstr("recompile"));
    EXPECT_THAT(msg, Not(HasSubstr("checksum")));
  }
}

TEST(PlanFile, RefusesATruncatedFileWhereverItIsCut) {
  TempDir dir;
  const std::string good = serialize_plan(sample_plan());
  const size_t n = good.size();
  // Inside the magic, inside the header fields, right after the header, inside the
  // payload (including inside the large initial value), one byte short.
  const std::vector<size_t> cuts = {1,
                                    4,
                                    7,
                                    8,
                                    11,
                                    12,
                                    19,
                                    20,
                                    27,
                                    kHeaderSize,
                                    kHeaderSize + 1,
                                    kHeaderSize + 10,
                                    n / 3,
                                    n / 2,
                                    n - 100,
                                    n - 2,
                                    n - 1};
  for (size_t cut : cuts) {
    SCOPED_TRACE("cut to " + std::to_string(cut) + " of " + std::to_string(n) + " bytes");
    const std::string msg = refusal(dir, good.substr(0, cut));
    EXPECT_THAT(msg, HasSubstr("bad.plan"));
    EXPECT_THAT(msg, HasSubstr("truncated"));
  }
  // Cut to nothing.
  EXPECT_THAT(refusal(dir, ""), HasSubstr("empty"));
  // Bytes appended after the payload are refused as well.
  EXPECT_THAT(refusal(dir, good + "x"), HasSubstr("padded"));
}

TEST(PlanFile, RefusesAFlippedByte) {
  TempDir dir;
  const std::string good = serialize_plan(sample_plan());
  const size_t n = good.size();
  // Every position in the payload would be slow to write to disk; flip in memory for all,
  // and through a file for a few.
  for (size_t pos = kHeaderSize; pos < n; ++pos) {
    std::string bytes = good;
    bytes[pos] = static_cast<char>(bytes[pos] ^ 0x01);
    try {
      parse_plan(bytes, "mem");
      ADD_FAILURE() << "flipped byte " << pos << " accepted";
    } catch (const Error& e) {
      ASSERT_THAT(e.what(), HasSubstr("checksum")) << "flipped byte " << pos;
    }
  }
  for (size_t pos : {kHeaderSize, kHeaderSize + 7, n / 2, n - 1}) {
    SCOPED_TRACE("flipped payload byte " + std::to_string(pos));
    std::string bytes = good;
    bytes[pos] = static_cast<char>(bytes[pos] ^ 0x80);
    const std::string msg = refusal(dir, bytes);
    EXPECT_THAT(msg, HasSubstr("bad.plan"));
    EXPECT_THAT(msg, HasSubstr("corrupted"));
    EXPECT_THAT(msg, HasSubstr("checksum"));
  }
  // A damaged checksum field is a mismatch too.
  std::string bytes = good;
  bytes[20] = static_cast<char>(bytes[20] ^ 0x01);
  EXPECT_THAT(refusal(dir, bytes), HasSubstr("checksum"));
}

TEST(PlanFile, RefusesAPayloadThatDoesNotParseDespiteAGoodChecksum) {
  TempDir dir;
  std::string bytes = serialize_plan(Plan());
  const std::string garbage("\xff\xff\xff\xff\xff\xff", 6);  // a truncated varint tag
  bytes = bytes.substr(0, kHeaderSize) + garbage;
  write_le<uint64_t>(bytes, 12, garbage.size());
  write_le<uint64_t>(bytes, 20, fnv1a(garbage));
  const std::string msg = refusal(dir, bytes);
  EXPECT_THAT(msg, HasSubstr("bad.plan"));
  EXPECT_THAT(msg, HasSubstr("does not parse"));
}

TEST(PlanFile, RefusesFilesThatAreNotPlans) {
  TempDir dir;
  const std::string onnx_model = read_bytes(AMPC_SOURCE_DIR "/models/mlp.onnx");
  ASSERT_FALSE(onnx_model.empty());
  EXPECT_THAT(refusal(dir, onnx_model, "mlp.onnx"), HasSubstr("not an ampc plan"));
  EXPECT_THAT(refusal(dir, "hello, this is a text file and certainly not a plan\n"),
              HasSubstr("not an ampc plan"));
  EXPECT_THAT(refusal(dir, "AMPC"), HasSubstr("truncated"));  // a prefix of the magic
  EXPECT_THAT(refusal(dir, "AMPCPLAX" + std::string(40, '\0')), HasSubstr("not an ampc plan"));
  // A file that does not exist: the message names it.
  try {
    load_plan(dir / "missing.plan");
    ADD_FAILURE() << "a missing file was loaded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing.plan"));
  }
}

TEST(PlanFile, LooksLikePlanTellsPlansFromOnnxModels) {
  TempDir dir;
  save_plan(sample_plan(), dir / "p.plan");
  EXPECT_TRUE(looks_like_plan(dir / "p.plan"));
  // Only the magic counts: the extension does not.
  fs::copy_file(dir / "p.plan", dir / "p.onnx");
  EXPECT_TRUE(looks_like_plan(dir / "p.onnx"));
  for (const char* model : {"mlp.onnx", "cnn.onnx", "gpt.onnx"}) {
    EXPECT_FALSE(looks_like_plan(std::string(AMPC_SOURCE_DIR "/models/") + model)) << model;
  }
  fs::copy_file(AMPC_SOURCE_DIR "/models/mlp.onnx", dir / "mlp.plan");
  EXPECT_FALSE(looks_like_plan(dir / "mlp.plan"));
  write_bytes(dir / "empty.plan", "");
  EXPECT_FALSE(looks_like_plan(dir / "empty.plan"));
  write_bytes(dir / "short.plan", "AMPC");
  EXPECT_FALSE(looks_like_plan(dir / "short.plan"));
  EXPECT_FALSE(looks_like_plan(dir / "missing.plan"));
}

}  // namespace
}  // namespace ampc::plan
