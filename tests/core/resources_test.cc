#include "core/resources.h"

#include "gtest/gtest.h"

namespace gangsched {
namespace {

TEST(ResourcesTest, FixedIdsForCpuMemoryGpu) {
  ResourceTable table;
  EXPECT_EQ(table.Intern("cpu"), kCpu);
  EXPECT_EQ(table.Intern("memory"), kMemory);
  EXPECT_EQ(table.Intern("nvidia.com/gpu"), kGpu);
  ResourceId custom = table.Intern("example.com/fpga");
  EXPECT_EQ(custom.value(), 3u);
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
