#include "server/config.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gangsched::server {
namespace {

TEST(ConfigTest, ParsesQueuesClassesAndNodes) {
  auto config = ParseConfig(R"(
priority_classes:
  - {name: low, value: 10, preemptible: true}
  - {name: high, value: 200, preemptible: false}
default_priority_class: low
queues:
  - name: team-a
    parent: org
    resources:
      nvidia.com/gpu: {quota: 4, limit: 8, over_quota_weight: 2}
    preempt_min_runtime: 5m
  - name: org
    priority: 120
    resources:
      nvidia.com/gpu: {quota: -1}
nodes:
  - name: gpu-0
    allocatable: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}
    labels: {topology.kubernetes.io/zone: a}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->priority_classes.size(), 2u);
  EXPECT_EQ(config->default_priority_class, "low");
  ASSERT_EQ(config->queues.size(), 2u);
  EXPECT_EQ(config->queues[0].name, "org");  // parents first
  EXPECT_EQ(config->queues[0].priority, 120);
  EXPECT_EQ(config->queues[1].resources[0].second.quota, 4000);
  EXPECT_EQ(config->queues[1].resources[0].second.limit, 8000);
  EXPECT_EQ(config->queues[1].resources[0].second.over_quota_weight, 2.0);
  EXPECT_EQ(config->queues[1].preempt_min_runtime, absl::Minutes(5));
  ASSERT_EQ(config->nodes.size(), 1u);
  EXPECT_EQ(config->nodes[0].allocatable.size(), 3u);
}

TEST(ConfigTest, ErrorsNameTheKey) {
  auto unknown = ParseConfig("queues:\n  - name: a\n    quota: 3\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("queues[0].quota"),
            absl::string_view::npos)
      << unknown.status().message();
  auto orphan = ParseConfig("queues:\n  - {name: a, parent: ghost}\n");
  ASSERT_FALSE(orphan.ok());
  EXPECT_NE(orphan.status().message().find("ghost"), absl::string_view::npos);
  auto negative =
      ParseConfig("queues:\n  - name: a\n    resources: {cpu: {quota: -3}}\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("quota"), absl::string_view::npos);
  EXPECT_FALSE(ParseConfig("queues: [").ok());
  // A min runtime past 100 years is refused, not saturated (int64
  // nanoseconds end near 292 years).
  for (const char* value : {"1000000h", "inf", "1e12", ".nan"}) {
    auto too_long = ParseConfig(absl::StrCat(
        "queues:\n  - name: a\n    reclaim_min_runtime: ", value, "\n"));
    ASSERT_FALSE(too_long.ok()) << value;
    EXPECT_NE(too_long.status().message().find("queues[0].reclaim_min_runtime"),
              absl::string_view::npos)
        << too_long.status().message();
  }
  auto century =
      ParseConfig("queues:\n  - name: a\n    reclaim_min_runtime: 876000h\n");
  ASSERT_TRUE(century.ok()) << century.status();
  EXPECT_EQ(century->queues[0].reclaim_min_runtime, absl::Hours(876000));
}

// docs/SCHEDULING.md, "Preemption with notice": a class and a queue may
// give one, from 0 to 24h; anything else is refused with the field named.
TEST(ConfigTest, PreemptionNotice) {
  auto config = ParseConfig(R"(
priority_classes:
  - {name: train, value: 50, preemption_notice: 2m}
  - {name: inference, value: 125, preemptible: false}
default_priority_class: train
queues:
  - {name: a, preemption_notice: 90s}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->priority_classes[0].preemption_notice, absl::Minutes(2));
  EXPECT_EQ(config->priority_classes[1].preemption_notice,
            absl::ZeroDuration());
  EXPECT_EQ(config->queues[0].preemption_notice, absl::Seconds(90));
  // Days as time_based_fair_share writes them; the longest is 24h.
  auto day = ParseConfig("queues:\n  - {name: a, preemption_notice: 1d}\n");
  ASSERT_TRUE(day.ok()) << day.status();
  EXPECT_EQ(day->queues[0].preemption_notice, absl::Hours(24));
  for (const char* value :
       {"25h", "-1s", "forever", "[1, 2]", "{a: 1}", ".nan", "2d"}) {
    auto bad_class = ParseConfig(absl::StrCat(
        "priority_classes:\n  - {name: train, value: 1, preemption_notice: ",
        value, "}\ndefault_priority_class: train\n"));
    ASSERT_FALSE(bad_class.ok()) << value;
    EXPECT_NE(bad_class.status().message().find(
                  "priority_classes[0].preemption_notice"),
              absl::string_view::npos)
        << bad_class.status().message();
    auto bad_queue = ParseConfig(absl::StrCat(
        "queues:\n  - {name: a, preemption_notice: ", value, "}\n"));
    ASSERT_FALSE(bad_queue.ok()) << value;
    EXPECT_NE(bad_queue.status().message().find("preemption_notice"),
              absl::string_view::npos)
        << bad_queue.status().message();
  }
}

TEST(ConfigTest, TimeBasedFairShare) {
  auto config = ParseConfig(R"(
time_based_fair_share:
  enabled: true
  half_life: 3d
  window: 672h
  strength: 0.25
  refresh: 30s
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->usage.enabled);
  EXPECT_EQ(config->usage.half_life, absl::Hours(72));
  EXPECT_EQ(config->usage.window, absl::Hours(672));
  EXPECT_EQ(config->usage.strength, 0.25);
  EXPECT_EQ(config->usage.refresh, absl::Seconds(30));
  // Absent: off, with the documented defaults.
  auto none = ParseConfig("queues: []\n");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->usage.enabled);
  EXPECT_EQ(none->usage.half_life, absl::Hours(24 * 7));
  // Bare seconds, with a fraction, are a duration too.
  auto seconds = ParseConfig("time_based_fair_share:\n  refresh: 90.5\n");
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_EQ(seconds->usage.refresh, absl::Milliseconds(90500));
  for (const auto& [bad, field] :
       std::vector<std::pair<std::string, std::string>>{
           {"enabled: yes", "time_based_fair_share.enabled"},
           {"half_life: 0s", "time_based_fair_share.half_life"},
           {"half_life: soon", "time_based_fair_share.half_life"},
           {"window: 5s", "time_based_fair_share.window"},
           {"strength: -1", "time_based_fair_share.strength"},
           {"strength: 11", "time_based_fair_share.strength"},
           {"strength: .nan", "time_based_fair_share.strength"},
           {"refresh: 0s", "time_based_fair_share.refresh"},
           {"halflife: 7d", "time_based_fair_share.halflife"},
           // Lists and maps name their field (not "bad conversion").
           {"window: [1, 2]", "time_based_fair_share.window"},
           {"strength: {a: 1}", "time_based_fair_share.strength"},
           {"enabled: [true]", "time_based_fair_share.enabled"},
           // A key twice would keep only one of them.
           {"window: 7d\n  window: 8d", "time_based_fair_share.window"},
           // Durations are plain: no sign, hex or exponent.
           {"half_life: 0x10", "time_based_fair_share.half_life"},
           {"half_life: +1h", "time_based_fair_share.half_life"},
           {"refresh: 1e3", "time_based_fair_share.refresh"}}) {
    auto refused =
        ParseConfig(absl::StrCat("time_based_fair_share:\n  ", bad, "\n"));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find(field), absl::string_view::npos)
        << bad << ": " << refused.status().message();
  }
}

TEST(ConfigTest, Consolidation) {
  auto config = ParseConfig(R"(
consolidation:
  enabled: false
  max_pods_per_gang: 3
  max_pods_per_cycle: 12
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->consolidation.enabled);
  EXPECT_EQ(config->consolidation.max_pods_per_gang, 3);
  EXPECT_EQ(config->consolidation.max_pods_per_cycle, 12);
  // Absent: on, with the documented bounds.
  auto none = ParseConfig("queues: []\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->consolidation.enabled);
  EXPECT_EQ(none->consolidation.max_pods_per_gang, 8);
  EXPECT_EQ(none->consolidation.max_pods_per_cycle, 32);
  for (const std::string bad :
       {"enabled: yes", "max_pods_per_gang: 0", "max_pods_per_gang: -2",
        "max_pods_per_gang: 1.5", "max_pods_per_cycle: 10001",
        "max_pods_per_cycle: [1]", "max_pods: 4",
        "max_pods_per_gang: 2\n  max_pods_per_gang: 3"}) {
    auto refused = ParseConfig(absl::StrCat("consolidation:\n  ", bad, "\n"));
    ASSERT_FALSE(refused.ok()) << bad;
    std::string field =
        absl::StrCat("consolidation.", bad.substr(0, bad.find(':')));
    EXPECT_NE(refused.status().message().find(field), absl::string_view::npos)
        << bad << ": " << refused.status().message();
  }
  EXPECT_FALSE(ParseConfig("consolidation: true\n").ok());
}

TEST(ConfigTest, ClassEntriesAreAsStrictAsQueues) {
  // Each of these used to load: the typo as preemptible, the others as 0.
  for (const char* bad :
       {"  - {name: b, value: 100, preemtible: false}\n",
        "  - {name: b, value: high}\n", "  - {name: b, value: 99.9}\n",
        "  - {name: b, value: 99999999999}\n",
        "  - {name: b, value: 1, preemptible: nope}\n", "  - {name: b}\n"}) {
    auto config = ParseConfig(absl::StrCat("priority_classes:\n", bad,
                                           "default_priority_class: b\n"));
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.status().message().find("priority_classes[0]"),
              absl::string_view::npos)
        << config.status().message();
  }
}

TEST(ConfigTest, DuplicateQueueNamesAreAnError) {
  auto config = ParseConfig(
      "queues:\n  - {name: a}\n  - {name: b}\n"
      "  - {name: a}\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("queues[2].name: duplicate"),
            absl::string_view::npos)
      << config.status().message();
}

// topologies: (docs/SCHEDULING.md, "Topologies"): named lists of labels,
// coarsest first; every wrong entry named.
TEST(ConfigTest, Topologies) {
  auto config = ParseConfig(
      "topologies:\n"
      "  - name: cluster-topology\n"
      "    levels: [topology.kubernetes.io/zone, gangsched.io/rack,\n"
      "             kubernetes.io/hostname]\n"
      "  - {name: zones, levels: [topology.kubernetes.io/zone]}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->topologies.size(), 2u);
  EXPECT_EQ(config->topologies[0],
            (Topology{"cluster-topology",
                      {"topology.kubernetes.io/zone", "gangsched.io/rack",
                       "kubernetes.io/hostname"}}));
  EXPECT_TRUE(ParseConfig("").value().topologies.empty());
  for (auto [bad, field] : std::vector<std::pair<const char*, const char*>>{
           {"topologies: {name: a}\n", "topologies: must be a list"},
           {"topologies:\n  - {name: a, levels: zone}\n",
            "topologies[0].levels"},
           {"topologies:\n  - {name: a, levels: [zone, 'no spaces']}\n",
            "topologies[0].levels[1]"},
           {"topologies:\n  - {name: a, level: [zone]}\n",
            "topologies[0].level"},
           {"topologies:\n  - {levels: [zone]}\n", "topologies[0]"},
           {"topologies:\n  - {name: a, levels: []}\n",
            "topologies[0].levels: empty"},
           {"topologies:\n  - {name: a, levels: [zone, rack, zone]}\n",
            "topologies[0].levels[2]: a label listed twice"},
           {"topologies:\n  - {name: a, levels: [zone]}\n"
            "  - {name: a, levels: [rack]}\n",
            "topologies[1].name: a is listed twice"},
           {"topologies:\n  - {name: a, levels: [~]}\n",
            "topologies[0].levels[0]"},
           {"topologies:\n  - {name: a, levels: [l0, l1, l2, l3, l4, l5, l6, "
            "l7, l8, l9, l10, l11, l12, l13, l14, l15, l16]}\n",
            "topologies[0].levels: at most 16"},
           {"topologies:\n  - {name: ' a', levels: [zone]}\n",
            "config: topologies[0].name"}}) {
    auto parsed = ParseConfig(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find(field), absl::string_view::npos)
        << parsed.status().message();
    // The field once, not twice.
    EXPECT_EQ(parsed.status().message().find(field),
              parsed.status().message().rfind(field))
        << parsed.status().message();
  }
  // 65 topologies are too many.
  std::string many = "topologies:\n";
  for (int i = 0; i < 65; ++i)
    absl::StrAppend(&many, "  - {name: t", i, ", levels: [zone]}\n");
  auto refused = ParseConfig(many);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("topologies: at most 64"),
            absl::string_view::npos)
      << refused.status().message();
  // A key given twice: the second list, as for priority_classes.
  auto twice = ParseConfig(
      "topologies:\n  - {name: a, levels: [zone]}\n"
      "topologies:\n  - {name: b, levels: [rack]}\n");
  ASSERT_TRUE(twice.ok()) << twice.status();
  ASSERT_EQ(twice->topologies.size(), 1u);
  EXPECT_EQ(twice->topologies[0].name, "b");
}

TEST(ConfigTest, EmbeddedDefaultHasOneOpenQueue) {
  Config config = EmbeddedDefaultConfig();
  ASSERT_EQ(config.queues.size(), 1u);
  EXPECT_EQ(config.queues[0].name, "default");
  EXPECT_TRUE(config.queues[0].resources.empty());
  EXPECT_EQ(config.priority_classes.size(), 4u);
  EXPECT_EQ(config.default_priority_class, "train");
}

}  // namespace
}  // namespace gangsched::server
