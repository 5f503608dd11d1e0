#include "core/resources.h"

#include <string>

#include "gtest/gtest.h"

namespace gangsched {
namespace {

TEST(ResourcesTest, FixedIdsForCpuMemoryGpuGpuMemory) {
  ResourceTable table;
  EXPECT_EQ(table.Intern("cpu"), kCpu);
  EXPECT_EQ(table.Intern("memory"), kMemory);
  EXPECT_EQ(table.Intern("nvidia.com/gpu"), kGpu);
  EXPECT_EQ(table.Intern("nvidia.com/gpu-memory"), kGpuMemory);
  EXPECT_EQ(table.Scale(kGpuMemory), QuantityScale::kBytes);
  ResourceId custom = table.Intern("example.com/fpga");
  EXPECT_EQ(custom.value(), 4u);
  EXPECT_EQ(table.Intern("example.com/fpga"), custom);
  EXPECT_FALSE(table.Find("never-seen").valid());
}

TEST(ResourcesTest, ArithmeticAndFit) {
  ResourceTable table;
  ResourceVector node =
      table.FromNamed({{"cpu", 8000}, {"nvidia.com/gpu", 8000}});
  ResourceVector pod = table.FromNamed({{"nvidia.com/gpu", 4000}});
  EXPECT_TRUE(pod.FitsIn(node));
  EXPECT_TRUE((pod * 2).FitsIn(node));
  EXPECT_FALSE((pod * 3).FitsIn(node));
  ResourceVector fpga = table.FromNamed({{"example.com/fpga", 1000}});
  EXPECT_FALSE(fpga.FitsIn(node));  // a resource the node lacks never fits
  ResourceVector left = node - pod;
  EXPECT_EQ(left.Get(kGpu), 4000);
  EXPECT_EQ(left.Get(kCpu), 8000);
  EXPECT_TRUE((left + pod) == node);
  EXPECT_TRUE((node - node).IsZero());
}

TEST(ResourcesTest, AddScaledIsAddingTheProduct) {
  ResourceTable table;
  ResourceVector total = table.FromNamed({{"cpu", 1000}});
  ResourceVector pod =
      table.FromNamed({{"cpu", 500}, {"nvidia.com/gpu", 1000}});
  total.AddScaled(pod, 3);  // grows to cover the gpu slot
  EXPECT_EQ(total.Get(kCpu), 2500);
  EXPECT_EQ(total.Get(kGpu), 3000);
  EXPECT_TRUE(total == table.FromNamed({{"cpu", 1000}}) + pod * 3);
  total.AddScaled(pod, -3);
  EXPECT_TRUE(total == table.FromNamed({{"cpu", 1000}}));
}

TEST(ResourcesTest, AddScaledPastTheInlineAmounts) {
  // Six resources: more than a vector keeps inline, so the sum runs over
  // heap storage, and the shorter side grows into it.
  ResourceTable table;
  NamedResources named = {{"cpu", 1}, {"memory", 2}, {"nvidia.com/gpu", 3}};
  for (int i = 0; i < 3; ++i)
    named.emplace_back("example.com/r" + std::to_string(i), 10 + i);
  ResourceVector wide = table.FromNamed(named);
  ResourceVector total = table.FromNamed({{"memory", 100}});
  total.AddScaled(wide, 2);
  total += wide;
  for (const auto& [name, amount] : named) {
    EXPECT_EQ(total.Get(table.Find(name)),
              3 * amount + (name == "memory" ? 100 : 0))
        << name;
  }
}

TEST(ResourcesTest, ViewReadsLikeTheVector) {
  ResourceTable table;
  ResourceVector v = table.FromNamed({{"cpu", 4000}, {"memory", 7}});
  ResourceVector::View view = v.view();
  EXPECT_EQ(view.size(), v.size());
  EXPECT_EQ(view.Get(kCpu), 4000);
  EXPECT_EQ(view.Get(kMemory), 7);
  EXPECT_EQ(view.Get(kGpu), 0);  // past the end reads as zero
  EXPECT_EQ(ResourceVector::View().Get(kCpu), 0);
}

TEST(ResourcesTest, KnownNamesResolveByNameOnly) {
  ResourceTable table;
  ResourceId fpga = table.Intern("example.com/fpga");
  EXPECT_EQ(table.Find("cpu"), kCpu);
  EXPECT_EQ(table.Find("memory"), kMemory);
  EXPECT_EQ(table.Find("nvidia.com/gpu"), kGpu);
  EXPECT_EQ(table.Find("example.com/fpga"), fpga);
  // Near misses of the built-in names are other names.
  for (const char* name : {"cp", "cpux", "Memory", "nvidia.com/gpus", ""}) {
    EXPECT_FALSE(table.Find(name).valid()) << name;
    EXPECT_FALSE(table.Knows({{name, 1}})) << name;
  }
  NamedResources known = {{"memory", 2},
                          {"nvidia.com/gpu", 3},
                          {"example.com/fpga", 4},
                          {"cpu", 1}};
  EXPECT_TRUE(table.Knows(known));
  ResourceVector v = table.FromKnown(known);
  EXPECT_EQ(v.Get(kCpu), 1);
  EXPECT_EQ(v.Get(kMemory), 2);
  EXPECT_EQ(v.Get(kGpu), 3);
  EXPECT_EQ(v.Get(fpga), 4);
  EXPECT_TRUE(v == table.FromNamed(known));
}

TEST(ResourcesTest, MemoryDoesNotOverflowAtClusterScale) {
  // 100,000 nodes of 2 TiB each must sum exactly.
  ResourceVector one;
  one.Set(kMemory, int64_t{2} << 40);
  ResourceVector total;
  for (int i = 0; i < 100000; ++i) total += one;
  EXPECT_EQ(total.Get(kMemory), (int64_t{2} << 40) * 100000);
}

TEST(ResourcesTest, DescribeUsesQuantities) {
  ResourceTable table;
  ResourceVector v =
      table.FromNamed({{"cpu", 2500}, {"memory", int64_t{16} << 30}});
  EXPECT_EQ(table.Describe(v), "cpu=2500m, memory=16Gi");
  EXPECT_EQ(table.Describe(ResourceVector()), "nothing");
}

}  // namespace
}  // namespace gangsched
