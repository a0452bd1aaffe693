// The executor's training-run state: masks of seedless training-mode Dropout are new every
// step, the same for the same seed, and a run resumed at step k (set_random_state) draws what
// the uninterrupted run drew at step k; load_state replaces state and refuses what does not
// fit. The masks are drawn under the keys of kernels/shared/dropout_math.h, which the CUDA
// executor uses too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/shared/dropout_math.h"
#include "runtime/cpu/executor.h"

namespace ampc::rt::cpu {
namespace {
using ::testing::HasSubstr;

plan::Buffer* add_buffer(plan::Plan& p, const std::string& name, DType dtype,
                         std::vector<int64_t> shape, plan::BufferRole role) {
  plan::Buffer* b = p.add_buffers();
  b->set_id(p.buffers_size() - 1);
  b->set_name(name);
  b->set_dtype(static_cast<int>(dtype));
  for (int64_t d : shape) b->add_shape(d);
  b->set_shape_known(true);
  b->set_role(role);
  return b;
}

template <typename T>
void set_initial(plan::Buffer* b, T value) {
  b->mutable_initial()->set_dtype(b->dtype());
  b->mutable_initial()->set_data(std::string(reinterpret_cast<const char*>(&value), sizeof value));
}

// y, mask = Dropout(x, ratio 0.5, training_mode true), and a state `w` that w + x replaces.
plan::Plan dropout_plan() {
  plan::Plan p;
  add_buffer(p, "x", DType::kFloat32, {1000}, plan::INPUT);
  set_initial(add_buffer(p, "ratio", DType::kFloat32, {}, plan::CONSTANT), 0.5f);
  set_initial(add_buffer(p, "training", DType::kBool, {}, plan::CONSTANT), true);
  add_buffer(p, "y", DType::kFloat32, {1000}, plan::OUTPUT);
  add_buffer(p, "mask", DType::kBool, {1000}, plan::OUTPUT);
  plan::Step* s = p.add_steps();
  s->set_op("Dropout");
  s->set_opset_version(13);
  s->mutable_dropout()->set_default_ratio(0.5f);  // what legalize writes for opset 13
  s->mutable_dropout()->set_mode_inputs(true);
  s->mutable_dropout()->set_mask_bool(true);
  for (int id : {0, 1, 2}) s->add_inputs(id);
  for (int id : {3, 4}) s->add_outputs(id);
  s->add_source_nodes("dropout");
  for (auto [name, id] : {std::pair{"x", 0}}) {
    auto* b = p.add_inputs();
    b->set_name(name);
    b->set_buffer(id);
  }
  for (auto [name, id] : {std::pair{"y", 3}, std::pair{"mask", 4}}) {
    auto* b = p.add_outputs();
    b->set_name(name);
    b->set_buffer(id);
  }
  auto* w = add_buffer(p, "w", DType::kFloat32, {1000}, plan::STATE);
  w->mutable_initial()->set_dtype(w->dtype());
  w->mutable_initial()->add_dims(1000);
  w->mutable_initial()->set_data(std::string(4000, '\0'));
  return p;
}

std::vector<bool> mask_of(Executor& e) {
  Tensor x(DType::kFloat32, {1000});
  for (int i = 0; i < 1000; ++i) x.data<float>()[i] = 1;
  const Tensor m = e.run({{"x", x}}).at("mask");
  return std::vector<bool>(m.data<bool>(), m.data<bool>() + m.numel());
}

TEST(ExecutorRandomState, DropoutMasksChangePerStepAndResumeExactly) {
  Executor run(dropout_plan());
  run.set_random_state(7, 0);
  const auto m1 = mask_of(run), m2 = mask_of(run), m3 = mask_of(run);
  EXPECT_NE(m1, m2);
  EXPECT_NE(m2, m3);
  const auto kept = std::count(m1.begin(), m1.end(), true);
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);

  Executor resumed(dropout_plan());
  resumed.set_random_state(7, 2);
  EXPECT_EQ(mask_of(resumed), m3);

  Executor again(dropout_plan());
  again.set_random_state(7, 0);
  EXPECT_EQ(mask_of(again), m1);
  Executor other(dropout_plan());
  other.set_random_state(8, 0);
  EXPECT_NE(mask_of(other), m1);
}

// The contract the CUDA executor keeps too (runtime/cuda/executor.cc writes run_key(seed, runs
// done) before each run, its kernel mixes in the step's index): run r of step s draws under
// step_key(run_key(seed, r), s) (kernels/shared/dropout_math.h).
TEST(ExecutorRandomState, StepKeysAreTheSharedRunAndStepKeys) {
  namespace sh = kernels::shared;
  Executor e(dropout_plan());
  e.set_random_state(7, 5);
  for (int64_t run = 5; run < 7; ++run) {
    const auto got = mask_of(e);
    const uint64_t key = sh::step_key(sh::run_key(7, run), 0);  // the plan's step 0
    std::vector<bool> want(1000);
    for (uint64_t i = 0; i < 1000; ++i) want[i] = sh::uniform_at(key, i) >= 0.5;
    EXPECT_EQ(got, want) << "run " << run;
  }
}

TEST(ExecutorState, LoadStateReplacesAndRefusesMisfits) {
  Executor e(dropout_plan());
  Tensor w(DType::kFloat32, {1000});
  w.data<float>()[3] = 2.5f;
  e.load_state({{"w", w}, {"unrelated", Tensor(DType::kInt64, {2})}});
  EXPECT_EQ(e.state().at("w").data<float>()[3], 2.5f);
  try {
    e.load_state({{"w", Tensor(DType::kFloat32, {999})}});
    FAIL() << "accepted a wrong shape";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("state 'w' must be f32[1000], got f32[999]"));
  }
  try {
    e.load_state({});
    FAIL() << "accepted missing state";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("no value for state 'w'"));
  }
  EXPECT_EQ(e.state().at("w").data<float>()[3], 2.5f);
}

// Once loaded, the state lives in the executor only: the plan it keeps has dropped the STATE
// buffers' initial bytes (every weight, which it would otherwise hold twice for its
// lifetime), keeps their type and shape, and keeps the constants' values.
TEST(ExecutorState, KeepsTheInitialStateOnce) {
  plan::Plan p = dropout_plan();
  std::string bytes(4000, '\0');
  for (int i = 0; i < 1000; ++i) {
    const float v = 0.25f * static_cast<float>(i);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  p.mutable_buffers(5)->mutable_initial()->set_data(bytes);
  Executor e(std::move(p));
  const plan::Buffer& w = e.plan().buffers(5);
  ASSERT_EQ(w.name(), "w");
  EXPECT_TRUE(w.initial().data().empty());
  EXPECT_EQ(w.shape_size(), 1);
  EXPECT_EQ(e.plan().buffers(1).initial().data().size(), 4u);  // the constant ratio
  const Tensor state = e.state().at("w");
  ASSERT_EQ(state.nbytes(), 4000u);
  EXPECT_EQ(std::memcmp(state.raw(), bytes.data(), 4000), 0);
  EXPECT_EQ(mask_of(e).size(), 1000u);  // and it runs
}

}  // namespace
}  // namespace ampc::rt::cpu
