#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/add_into.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/fill.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/tensor.h"
#include "gat_testing.h"

using namespace gat;
using gat::testing::expect_error;

TEST(Tensor, CreationAndMetadata) {
  Tensor t = Tensor::full({2, 3}, 1.5);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.device(), Device::cpu);
  for (float v : t.to_vector<float>()) EXPECT_EQ(v, 1.5f);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_THROW(t.size(2), Error);
}

TEST(Tensor, WrongDtypeAccessNamesTheTensor) {
  Tensor t = Tensor::zeros({4}, DType::i32);
  expect_error([&] { t.data<float>(); }, {"i32 cpu (4,)"});
}

TEST(Tensor, ViewSharesStorageAndInfersOneDimension) {
  Tensor t = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = t.view({3, -1});
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  v.data<double>()[5] = 42;
  EXPECT_EQ(t.to_vector<double>()[5], 42);
  EXPECT_THROW(t.view({4, -1}), Error);
  EXPECT_THROW(t.view({-1, -1}), Error);
}

TEST(Tensor, RowsShareStorage) {
  Tensor t = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor middle = t.rows(1, 3);
  EXPECT_EQ(middle.shape(), (Shape{2, 2}));
  EXPECT_EQ(middle.to_vector<double>(), (std::vector<double>{3, 4, 5, 6}));
  middle.rows(1, 2).data<double>()[0] = 42;
  EXPECT_EQ(t.to_vector<double>()[4], 42);
  EXPECT_EQ(t.rows(3, 3).numel(), 0);
  expect_error([&] { t.rows(2, 4); }, {"rows", "[2, 4)", "(3, 2)"});
  expect_error([&] { Tensor::zeros({}).rows(0, 0); }, {"rows", "()"});
}

TEST(Tensor, CastAndClone) {
  Tensor t = Tensor::from_vector<float>({1.25f, -2.5f}, {2});
  Tensor d = t.to(DType::f64);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{1.25, -2.5}));
  Tensor c = t.clone();
  c.data<float>()[0] = 7;
  EXPECT_EQ(t.to_vector<float>()[0], 1.25f);
}

TEST(Tensor, CudaUnavailableIsAnErrorNotACrash) {
  if (cuda::available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(Tensor::zeros({2}, DType::f32, Device::cuda), Error);
}

TEST(Autograd, LeafGradientsAccumulateAcrossBackwardCalls) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad();
  // An identity "op" recorded by hand: d out / d x = 1.
  auto identity = [](const Tensor& in) {
    return autograd::record("identity", in.clone(), {in},
                            [](const Tensor& g) { return std::vector<Tensor>{g}; });
  };
  Tensor g = Tensor::from_vector<double>({3, 4}, {2});
  identity(x).backward(g);
  identity(x).backward(g);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 8}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, AnIntermediateNoClosureSavedIsFreedBeforeTheBackward) {
  // The tape holds edges to the producers of an op's inputs, not the inputs: y below is freed when
  // the forward lets it go, yet its gradient still reaches x through y's node.
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad();
  auto identity = [](const Tensor& in) {  // saves nothing
    return autograd::record("identity", in.clone(), {in},
                            [](const Tensor& g) { return std::vector<Tensor>{g}; });
  };
  Tensor y = identity(x);
  const std::weak_ptr<Storage> y_storage = y.impl().storage;
  Tensor z = identity(y);
  y = Tensor();
  EXPECT_TRUE(y_storage.expired());
  z.backward(Tensor::from_vector<double>({3, 4}, {2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 4}));
}

TEST(Autograd, AHandedOverRootGradientIsFreedOnceTheRootsNodeUsedIt) {
  // The trainer hands backward the logits' gradient (N, C): it must not stay alive through the
  // rest of the pass. A gradient the caller keeps is left as it was.
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad();
  std::weak_ptr<Storage> root_grad;
  bool freed_when_x_node_ran = false;
  Tensor y = autograd::record("first", x.clone(), {x}, [&](const Tensor& g) {
    freed_when_x_node_ran = root_grad.expired();
    return std::vector<Tensor>{ops::scale(g, 2.0)};
  });
  auto times_three = [](const Tensor& g) { return std::vector<Tensor>{ops::scale(g, 3.0)}; };
  Tensor z = autograd::record("root", y.clone(), {y}, times_three);
  Tensor g = Tensor::from_vector<double>({1, 10}, {2});
  root_grad = g.impl().storage;
  z.backward(std::move(g));
  EXPECT_TRUE(freed_when_x_node_ran);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 60}));
  const Tensor kept = Tensor::from_vector<double>({1, 1}, {2});
  x.zero_grad();
  autograd::record("root", x.clone(), {x}, times_three).backward(kept);
  EXPECT_EQ(kept.to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(Autograd, LeavesHandedOneGradientTensorOwnSeparateCopies) {
  // add's backward hands its incoming gradient, here the caller's tensor, to both inputs: each
  // leaf must keep a copy, or accumulating into one leaf's gradient would change the other's and
  // the caller's tensor.
  Tensor a = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad();
  Tensor b = Tensor::from_vector<double>({3, 4}, {2}).set_requires_grad();
  const Tensor g = Tensor::from_vector<double>({1, 2}, {2});
  ops::add(a, b).backward(g);
  ops::add(a, b).backward(g);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{2, 4}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{2, 4}));
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 2}));
}

TEST(Autograd, FreshGradientsAreKeptWithoutACopy) {
  // A gradient that only the backward closure made is the leaf's gradient and the running sum
  // of a tensor used twice as it is (no copy per parameter and step); the sums stay right.
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad();
  const void* fresh = nullptr;
  auto twice = [&](const Tensor& in) {  // d out / d in = 2, in a tensor made by the closure
    return autograd::record("twice", ops::scale(in.detach(), 2.0), {in}, [&fresh](const Tensor& g) {
      Tensor grad = Tensor::empty(g.shape(), g.dtype(), g.device());
      for (int64_t i = 0; i < g.numel(); ++i) grad.data<double>()[i] = 2 * g.data<double>()[i];
      fresh = grad.raw_data();
      return std::vector<Tensor>{grad};
    });
  };
  twice(x).backward(Tensor::from_vector<double>({1, 10}, {2}));
  EXPECT_EQ(x.grad().raw_data(), fresh);
  Tensor y = twice(x);  // y used by two ops: its two fresh gradients are summed
  ops::add(twice(y), twice(y)).backward(Tensor::from_vector<double>({1, 1}, {2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2 + 8, 20 + 8}));
  // add hands the caller's gradient to both uses of z: their sum must not be formed in it.
  x.zero_grad();
  Tensor z = twice(x);
  const Tensor g = Tensor::from_vector<double>({1, 3}, {2});
  ops::add(z, z).backward(g);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 12}));
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 3}));
}

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor x = Tensor::from_vector<double>({1}, {1}).set_requires_grad();
  autograd::NoGradGuard guard;
  Tensor y =
      autograd::record("identity", x.clone(), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  EXPECT_FALSE(y.requires_grad());
}

TEST(Autograd, SecondBackwardThroughFreedGraphThrows) {
  Tensor x = Tensor::from_vector<double>({1}, {1}).set_requires_grad();
  Tensor y =
      autograd::record("identity", x.clone(), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  y.backward();
  EXPECT_THROW(y.backward(), Error);
}

// loss = sum(x W) for x (1, 1) = 2 and a weight W (1, 1): d W = x = 2.
struct SavedInputCase {
  Tensor x = Tensor::from_vector<double>({2}, {1, 1});
  Tensor w = Tensor::from_vector<double>({3}, {1, 1}).set_requires_grad();
  Tensor forward() const { return ops::sum(ops::matmul(x, w)); }
};

TEST(AutogradVersions, ModifyingASavedInputAfterTheForwardPassThrowsNamingTheOp) {
  // The case: without the check, d W came out as the new x (10), not 2.
  SavedInputCase c;
  Tensor loss = c.forward();
  c.x.copy_(Tensor::from_vector<double>({10}, {1, 1}));
  expect_error(
      [&] { loss.backward(); },
      {"backward of matmul: its input 1 of 2 (f64 cpu (1, 1)) was modified in place after the forward "
       "pass (version 1, saved at 0)"});
  EXPECT_FALSE(c.w.grad().defined());
}

TEST(AutogradVersions, EveryInPlaceWriteCounts) {
  const std::vector<std::function<void(Tensor&)>> writes = {
      [](Tensor& x) { x.zero_(); }, [](Tensor& x) { ops::fill_(x, 4.0); },
      [](Tensor& x) {
        ops::add_into(x, Tensor::full({1, 1}, 1.0, DType::f64));
      },
      [](Tensor& x) { x.copy_(x.clone()); },  // the same values: still a write, as in PyTorch
  };
  for (const auto& write : writes) {
    SavedInputCase c;
    Tensor loss = c.forward();
    const uint64_t before = c.x.impl().storage->version();
    write(c.x);
    EXPECT_EQ(c.x.impl().storage->version(), before + 1);
    expect_error([&] { loss.backward(); }, {"backward of matmul: its input 1 of 2", "saved at 0"});
  }
}

TEST(AutogradVersions, ViewsAndDetachedHandlesShareTheCounter) {
  // x (2, 1) is saved by matmul; a write through any handle to its storage is seen.
  for (int handle = 0; handle < 3; ++handle) {
    Tensor x = Tensor::from_vector<double>({1, 2}, {2, 1});
    Tensor w = Tensor::from_vector<double>({3}, {1, 1}).set_requires_grad();
    Tensor loss = ops::sum(ops::matmul(x, w));
    Tensor alias = handle == 0 ? x.view({2}) : handle == 1 ? x.rows(1, 2) : x.detach();
    alias.zero_();
    EXPECT_EQ(x.impl().storage->version(), alias.impl().storage->version());
    expect_error([&] { loss.backward(); }, {"backward of matmul: its input 1 of 2 (f64 cpu (2, 1))"});
  }
}

TEST(AutogradVersions, AParameterChangedBetweenForwardAndBackwardThrows) {
  // d x = g W^T reads W, which an optimiser step (or fill_) changed after the forward pass.
  Tensor x = Tensor::from_vector<double>({2}, {1, 1}).set_requires_grad();
  Tensor w = Tensor::from_vector<double>({3}, {1, 1}).set_requires_grad();
  Tensor loss = ops::sum(ops::matmul(x, w));
  w.mark_modified();
  expect_error([&] { loss.backward(); }, {"backward of matmul: its input 2 of 2", "(version 1, saved at 0)"});
}

TEST(AutogradVersions, AModifiedOutputThatTheOpSavedIsNamedAsItsOutput) {
  // div saves its output for d b = -(g / b) * out.
  Tensor a = Tensor::from_vector<double>({1}, {1});
  Tensor b = Tensor::from_vector<double>({2}, {1}).set_requires_grad();
  Tensor out = ops::div(a, b);
  Tensor loss = ops::sum(out);
  out.zero_();
  expect_error([&] { loss.backward(); }, {"backward of div: its output (f64 cpu (1,))"});
}

TEST(AutogradVersions, WritesBeforeTheForwardPassOrIntoUnsavedInputsAreFine) {
  SavedInputCase c;
  c.x.copy_(Tensor::from_vector<double>({5}, {1, 1}));  // before the forward pass
  Tensor loss = c.forward();
  loss.backward();
  EXPECT_EQ(c.w.grad().item(), 5.0);

  // add saves neither input: changing one after the forward pass leaves its gradient right.
  Tensor a = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad();
  Tensor b = Tensor::from_vector<double>({3, 4}, {2});
  Tensor sum = ops::sum(ops::add(a, b));
  b.zero_();
  a.zero_();
  sum.backward(Tensor::scalar(2.0, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(AutogradVersions, ASecondForwardPassAfterAChangeSavesTheNewValues) {
  SavedInputCase c;
  Tensor stale = c.forward();
  c.x.copy_(Tensor::from_vector<double>({10}, {1, 1}));
  Tensor loss = c.forward();
  loss.backward();
  EXPECT_EQ(c.w.grad().item(), 10.0);
  EXPECT_THROW(stale.backward(), Error);  // the first graph still saw x = 2
}

TEST(AutogradVersions, ATrainingLoopOfStepsAndAccumulationRaisesNothing) {
  // Two backward passes accumulate into .grad (add_into on the leaf's gradient), the parameter is
  // updated in place, and the next forward pass saves the new version.
  Tensor x = Tensor::from_vector<double>({1, 2}, {1, 2});
  Tensor w = Tensor::from_vector<double>({3, 4}, {2, 1}).set_requires_grad();
  for (int step = 0; step < 3; ++step) {
    for (int micro = 0; micro < 2; ++micro) ops::sum(ops::matmul(x, w)).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{2, 4}));
    ops::add_into(w, ops::scale(w.grad(), -0.1));  // the update
    w.zero_grad();
  }
  EXPECT_EQ(w.impl().storage->version(), 3u);
}

TEST(Tensor, FullOnTheDeviceMatchesTheHost) {
  GAT_SKIP_WITHOUT_CUDA();
  EXPECT_EQ(Tensor::full({3, 5}, 2.5, DType::f32, Device::cuda).to_vector<float>(),
            std::vector<float>(15, 2.5f));
  EXPECT_EQ(Tensor::full({4}, -1.25, DType::f64, Device::cuda).to_vector<double>(),
            std::vector<double>(4, -1.25));
  EXPECT_EQ(Tensor::full({2, 2}, 7, DType::i32, Device::cuda).to_vector<int32_t>(),
            std::vector<int32_t>(4, 7));
  EXPECT_EQ(Tensor::full({0}, 1.0, DType::f32, Device::cuda).numel(), 0);
}

TEST(Tensor, DeviceOutOfMemoryIsAnErrorNamingTheSizeAndTheOp) {
  GAT_SKIP_WITHOUT_CUDA();
  const int64_t elements = int64_t{1} << 48;  // 1 PiB of f32: more than any GPU has
  expect_error([&] { Tensor::empty({elements}, DType::f32, Device::cuda, "huge activation"); },
               {"huge activation", "out of memory", std::to_string(elements * 4)});
  // The device is still usable afterwards.
  EXPECT_EQ(Tensor::full({3}, 1.5, DType::f32, Device::cuda).to_vector<float>(), std::vector<float>(3, 1.5f));
}

TEST(Tensor, FromBlobViewsTheCallersMemoryAndKeepsItsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor t = Tensor::from_blob(owner->data(), {2, 3}, DType::f32, Device::cpu, owner);
  float* data = owner->data();
  owner.reset();
  ASSERT_FALSE(watch.expired());  // the view holds it
  EXPECT_EQ(t.data<float>(), data);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  t.data<float>()[4] = 50;  // writes go to the caller's memory
  EXPECT_EQ(watch.lock()->at(4), 50);
  Tensor alias = t.view({3, 2});
  t = Tensor();
  EXPECT_FALSE(watch.expired());  // a handle to the same storage still holds it
  alias = Tensor();
  EXPECT_TRUE(watch.expired());  // released with the last handle, never freed by gat
}

TEST(Tensor, FromBlobWithoutAnOwnerAndItsChecks) {
  double values[3] = {1.5, 2.5, 3.5};
  {
    Tensor t = Tensor::from_blob(values, {3}, DType::f64, Device::cpu);
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1.5, 2.5, 3.5}));
  }
  EXPECT_EQ(values[2], 3.5);  // still ours after the tensor went
  EXPECT_NO_THROW(Tensor::from_blob(nullptr, {0, 4}, DType::f32, Device::cpu));
  expect_error([] { Tensor::from_blob(nullptr, {2}, DType::f32, Device::cpu); }, {"null pointer"});
}
