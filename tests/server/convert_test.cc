#include "server/convert.h"

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/grpc_status.h"
#include "server/store_codec.h"

namespace gangsched::server {
namespace {

v1::WorkloadSpec ValidSpec() {
  v1::WorkloadSpec w;
  w.set_id("ns/ray");
  w.set_queue("default");
  auto* head = w.add_groups();
  head->set_name("head");
  (*head->mutable_resources())["cpu"] = "2";
  head->set_min_count(1);
  head->set_desired_count(1);
  auto* workers = w.add_groups();
  workers->set_name("workers");
  (*workers->mutable_resources())["nvidia.com/gpu"] = "4";
  (*workers->mutable_resources())["memory"] = "64Gi";
  workers->set_min_count(2);
  workers->set_desired_count(4);
  workers->set_pods_per_replica(2);
  return w;
}

// The error's code and that its message names `field`.
void ExpectInvalid(const v1::WorkloadSpec& spec, absl::string_view field) {
  auto parsed = ParseWorkloadSpec(spec);
  ASSERT_FALSE(parsed.ok()) << field;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(field), absl::string_view::npos)
      << parsed.status().message();
}

TEST(ConvertTest, NormalisesAValidSpec) {
  auto parsed = ParseWorkloadSpec(ValidSpec());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->groups.size(), 2u);
  const GroupSpec& workers = parsed->groups[1];
  EXPECT_EQ(workers.max_count, 4);  // 0 means desired
  EXPECT_EQ(workers.pods_per_replica, 2);
  EXPECT_EQ(parsed->groups[0].pods_per_replica, 1);  // 0 means 1
  ASSERT_EQ(workers.resources.size(), 2u);
  EXPECT_EQ(workers.resources[0],
            (std::pair<std::string, int64_t>{"memory", int64_t{64} << 30}));
  EXPECT_EQ(workers.resources[1],
            (std::pair<std::string, int64_t>{"nvidia.com/gpu", 4000}));
}

TEST(ConvertTest, RejectsBadWorkloadsNamingTheField) {
  v1::WorkloadSpec spec = ValidSpec();
  spec.set_id("");
  ExpectInvalid(spec, "workload.id");

  spec = ValidSpec();
  spec.set_queue("");
  ExpectInvalid(spec, "workload.queue");

  spec = ValidSpec();
  (*spec.mutable_groups(0)->mutable_resources())["cpu"] = "-1";
  ExpectInvalid(spec, "workload.groups[0].resources[\"cpu\"]");

  spec = ValidSpec();
  (*spec.mutable_groups(1)->mutable_resources())["memory"] = "lots";
  ExpectInvalid(spec, "workload.groups[1].resources[\"memory\"]");

  spec = ValidSpec();
  spec.mutable_groups(1)->set_min_count(6);
  ExpectInvalid(spec, "workload.groups[1].min_count");

  spec = ValidSpec();
  spec.mutable_groups(1)->set_name("head");
  ExpectInvalid(spec, "workload.groups[1].name");

  spec = ValidSpec();
  spec.clear_groups();
  ExpectInvalid(spec, "workload.groups");

  spec = ValidSpec();
  spec.mutable_groups(1)->set_desired_count(3);
  spec.mutable_groups(1)->set_max_count(4);
  ExpectInvalid(spec, "workload.groups[1].pods_per_replica");

  spec = ValidSpec();
  spec.mutable_groups(0)->set_min_count(0);
  spec.mutable_groups(1)->set_min_count(0);
  ExpectInvalid(spec, "gang minimum");

  spec = ValidSpec();
  spec.mutable_groups(1)->set_max_count(2);
  ExpectInvalid(spec, "workload.groups[1].desired_count");

  spec = ValidSpec();
  spec.mutable_groups(1)->set_max_count(1000000);
  ExpectInvalid(spec, "workload.groups[1].max_count");

  spec = ValidSpec();
  spec.mutable_placement()->set_required(true);
  ExpectInvalid(spec, "workload.placement.required");

  spec = ValidSpec();
  spec.set_id("has space");
  ExpectInvalid(spec, "workload.id");

  // A group's nested fields: the whole path leads the message.
  spec = ValidSpec();
  spec.mutable_groups(1)->set_name("");
  ExpectInvalid(spec, "workload.groups[1].name: must not be empty");

  spec = ValidSpec();
  spec.mutable_groups(1)->mutable_placement()->set_strategy(
      static_cast<v1::PlacementStrategy>(99));
  ExpectInvalid(spec, "workload.groups[1].placement.strategy: unknown");

  spec = ValidSpec();
  (*spec.mutable_groups(0)->mutable_node_selector())["bad key"] = "x";
  ExpectInvalid(spec, "workload.groups[0].node_selector[\"bad key\"]: label");

  spec = ValidSpec();
  (*spec.mutable_groups(0)->mutable_resources())["cpu"] = "-1";
  ExpectInvalid(spec, "workload.groups[0].resources[\"cpu\"]: ");
}

TEST(ConvertTest, QueueQuotaUsesMinusOneForUnlimited) {
  v1::Queue q;
  q.set_name("team");
  (*q.mutable_resources())["nvidia.com/gpu"].set_quota("-1");
  (*q.mutable_resources())["cpu"].set_quota("10");
  (*q.mutable_resources())["cpu"].set_limit("20");
  (*q.mutable_resources())["cpu"].set_over_quota_weight(0);
  auto parsed = ParseQueue(q);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->priority, 100);
  ASSERT_EQ(parsed->resources.size(), 2u);
  EXPECT_EQ(parsed->resources[0].first, "cpu");
  EXPECT_EQ(parsed->resources[0].second.quota, 10000);
  EXPECT_EQ(parsed->resources[0].second.limit, 20000);
  EXPECT_EQ(parsed->resources[0].second.over_quota_weight, 0.0);
  EXPECT_EQ(parsed->resources[1].second.quota, kUnlimited);
  EXPECT_EQ(parsed->resources[1].second.limit, kUnlimited);  // missing: no cap
  EXPECT_EQ(parsed->resources[1].second.over_quota_weight, 1.0);  // unset: 1

  (*q.mutable_resources())["cpu"].set_quota("-5");
  auto bad = ParseQueue(q);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("queue.resources[\"cpu\"].quota"),
            absl::string_view::npos)
      << bad.status().message();
  (*q.mutable_resources())["cpu"].set_quota("30");
  auto below = ParseQueue(q);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.status().message().find(".limit"), absl::string_view::npos);
}

// Min runtimes: up to 100 years, kept exactly; past that (where the store's
// int64 nanoseconds would saturate near 292 years) or with a nanos field
// out of range, refused with the field named.
// docs/SCHEDULING.md, "Preemption with notice": a queue's notice is 0 to
// 24h; an eviction with a notice says when its pods go and when it was
// told, one without says neither.
TEST(ConvertTest, PreemptionNoticeIsBoundedAndSent) {
  v1::Queue q;
  q.set_name("team");
  q.mutable_preemption_notice()->set_seconds(24 * 3600);
  auto parsed = ParseQueue(q);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->preemption_notice, absl::Hours(24));
  v1::Queue back;
  ToProto(*parsed, &back);
  EXPECT_EQ(back.preemption_notice().seconds(), 24 * 3600);
  for (auto [seconds, nanos] :
       {std::pair<int64_t, int32_t>{24 * 3600, 1}, {-1, 0}, {0, 1000000000}}) {
    v1::Queue bad = q;
    bad.mutable_preemption_notice()->set_seconds(seconds);
    bad.mutable_preemption_notice()->set_nanos(nanos);
    auto refused = ParseQueue(bad);
    ASSERT_FALSE(refused.ok()) << seconds << "s " << nanos << "ns";
    EXPECT_NE(refused.status().message().find("queue.preemption_notice"),
              absl::string_view::npos)
        << refused.status().message();
  }
  Eviction e{"ns/train", {{"worker", 0}}, EvictionReason::kPreempt, "ns/inf"};
  v1::Eviction none;
  ToProto(e, &none);
  EXPECT_FALSE(none.has_evict_at());
  EXPECT_FALSE(none.has_noticed_time());
  e.noticed = absl::FromUnixSeconds(1000);
  e.evict_at = absl::FromUnixSeconds(1300);
  v1::Eviction told;
  ToProto(e, &told);
  EXPECT_EQ(told.evict_at().seconds(), 1300);
  EXPECT_EQ(told.noticed_time().seconds(), 1000);
}

TEST(ConvertTest, QueueMinRuntimesAreBounded) {
  v1::Queue q;
  q.set_name("team");
  q.mutable_preempt_min_runtime()->set_seconds(kMaxMinRuntimeSeconds);
  q.mutable_reclaim_min_runtime()->set_seconds(kMaxMinRuntimeSeconds - 1);
  q.mutable_reclaim_min_runtime()->set_nanos(999999999);
  auto parsed = ParseQueue(q);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->preempt_min_runtime, absl::Hours(24 * 365 * 100));
  EXPECT_EQ(parsed->reclaim_min_runtime,
            absl::Seconds(kMaxMinRuntimeSeconds) - absl::Nanoseconds(1));
  struct Case {
    int64_t seconds;
    int32_t nanos;
    const char* field;
  };
  for (const Case& c : {Case{kMaxMinRuntimeSeconds, 1, "preempt_min_runtime"},
                        Case{100000000000, 0, "preempt_min_runtime"},
                        Case{1, 1000000000, "preempt_min_runtime.nanos"},
                        Case{0, -1, "preempt_min_runtime"}}) {
    v1::Queue bad = q;
    bad.mutable_preempt_min_runtime()->set_seconds(c.seconds);
    bad.mutable_preempt_min_runtime()->set_nanos(c.nanos);
    auto refused = ParseQueue(bad);
    ASSERT_FALSE(refused.ok()) << c.seconds << " " << c.nanos;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(
        refused.status().message().find(absl::StrCat("queue.", c.field, ":")),
        absl::string_view::npos)
        << refused.status().message();
  }
}

// One mapping of pending codes to the wire: every code goes there and back,
// and a number no code has (5, once UNKNOWN_QUEUE) maps to none.
TEST(ConvertTest, PendingCodesGoToTheWireAndBack) {
  for (PendingCode code : kPendingCodes) {
    EXPECT_EQ(FromProto(ToProto(code)), code) << ToString(code);
    EXPECT_EQ(PendingCodeNamed(ToString(code)), code);
  }
  EXPECT_EQ(FromProto(v1::PENDING_CODE_UNSPECIFIED), PendingCode::kNone);
  EXPECT_EQ(FromProto(static_cast<v1::PendingCode>(5)), std::nullopt);
  EXPECT_EQ(PendingCodeNamed("UNKNOWN_QUEUE"), std::nullopt);
}

TEST(ConvertTest, NodesDefaultToSchedulable) {
  v1::Node n;
  n.set_name("gpu-1");
  (*n.mutable_allocatable())["nvidia.com/gpu"] = "8";
  auto parsed = ParseNode(n, "nodes[0]");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->schedulable);
  n.set_schedulable(false);
  EXPECT_FALSE(ParseNode(n, "nodes[0]")->schedulable);
  (*n.mutable_allocatable())["cpu"] = "1.2.3";
  auto bad = ParseNode(n, "nodes[3]");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nodes[3].allocatable[\"cpu\"]"),
            absl::string_view::npos);
}

TEST(ConvertTest, TaintsAndTolerationsAreCheckedAndGoBackAsTheyCame) {
  v1::Node n;
  n.set_name("gpu-1");
  (*n.mutable_allocatable())["nvidia.com/gpu"] = "8";
  v1::Taint* taint = n.add_taints();
  taint->set_key("nvidia.com/gpu");
  taint->set_value("present");
  taint->set_effect(v1::TAINT_EFFECT_NO_SCHEDULE);
  auto parsed = ParseNode(n, "nodes[0]");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->taints.size(), 1u);
  EXPECT_EQ(parsed->taints[0],
            (Taint{"nvidia.com/gpu", "present", TaintEffect::kNoSchedule}));
  // A taint says what it does, and has a key.
  taint->set_effect(v1::TAINT_EFFECT_UNSPECIFIED);
  auto no_effect = ParseNode(n, "nodes[2]");
  ASSERT_FALSE(no_effect.ok());
  EXPECT_NE(no_effect.status().message().find("nodes[2].taints[0].effect"),
            absl::string_view::npos)
      << no_effect.status();
  taint->set_effect(v1::TAINT_EFFECT_NO_EXECUTE);
  taint->set_key("");
  EXPECT_FALSE(ParseNode(n, "nodes[0]").ok());

  v1::WorkloadSpec spec = ValidSpec();
  v1::Toleration* tol = spec.mutable_groups(1)->add_tolerations();
  tol->set_key("nvidia.com/gpu");
  tol->set_operator_(v1::TOLERATION_OPERATOR_EXISTS);
  auto ok = ParseWorkloadSpec(spec);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->groups[1].tolerations.size(), 1u);
  EXPECT_EQ(ok->groups[1].tolerations[0].effect, TaintEffect::kAny);
  // Back to the wire as it came (an unspecified effect stays every effect).
  v1::WorkloadSpec back;
  ToProto(*ok, &back);
  ASSERT_EQ(back.groups(1).tolerations_size(), 1);
  EXPECT_EQ(back.groups(1).tolerations(0).operator_(),
            v1::TOLERATION_OPERATOR_EXISTS);
  EXPECT_EQ(back.groups(1).tolerations(0).effect(),
            v1::TAINT_EFFECT_UNSPECIFIED);
  // Exists takes no value; Equal needs a key.
  tol->set_value("x");
  ExpectInvalid(spec, "workload.groups[1].tolerations[0].value");
  tol->set_value("");
  tol->set_key("");
  tol->set_operator_(v1::TOLERATION_OPERATOR_EQUAL);
  ExpectInvalid(spec, "workload.groups[1].tolerations[0].key");
  tol->set_key("bad key");
  ExpectInvalid(spec, "workload.groups[1].tolerations[0].key");
}

// Kubernetes' syntax for taint keys and values, and one taint per key and
// effect (docs/SCHEDULING.md, "Taints and tolerations").
TEST(ConvertTest, TaintWordsFollowKubernetesSyntax) {
  auto parse = [](const std::string& key, const std::string& value) {
    v1::Node n;
    n.set_name("n");
    v1::Taint* t = n.add_taints();
    t->set_key(key);
    t->set_value(value);
    t->set_effect(v1::TAINT_EFFECT_NO_SCHEDULE);
    return ParseNode(n, "nodes[0]");
  };
  EXPECT_TRUE(parse("nvidia.com/gpu", "present").ok());
  EXPECT_TRUE(parse("dedicated", "").ok());
  EXPECT_TRUE(parse("team", "ml-infra_v1.2").ok());
  for (const auto& [key, value, field] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"team", std::string(64, 'v'), "taints[0].value"},
           {"team", "-ml", "taints[0].value"},
           {"team", "a b", "taints[0].value"},
           {"team", "a/b", "taints[0].value"},
           {std::string(64, 'k'), "", "taints[0].key"},
           {"/gpu", "", "taints[0].key"},
           {"nvidia.com/", "", "taints[0].key"},
           {"a_b.com/gpu", "", "taints[0].key"},
           {"gpu-", "", "taints[0].key"},
           // The prefix is a DNS subdomain: lowercase, alphanumeric ends.
           {"Example.COM/gpu", "", "taints[0].key"},
           {"-a./gpu", "", "taints[0].key"}}) {
    auto bad = parse(key, value);
    ASSERT_FALSE(bad.ok()) << key << "=" << value;
    EXPECT_NE(bad.status().message().find(field), absl::string_view::npos)
        << bad.status();
  }
  v1::Node n;
  n.set_name("n");
  for (int i = 0; i < 2; ++i) {
    v1::Taint* t = n.add_taints();
    t->set_key("team");
    t->set_value(i == 0 ? "a" : "b");
    t->set_effect(v1::TAINT_EFFECT_NO_SCHEDULE);
  }
  auto twice = ParseNode(n, "nodes[0]");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("nodes[0].taints[1]"),
            absl::string_view::npos)
      << twice.status();
  n.mutable_taints(1)->set_effect(v1::TAINT_EFFECT_NO_EXECUTE);
  EXPECT_TRUE(ParseNode(n, "nodes[0]").ok());  // another effect: allowed
}

// What an older release stored (taint words and affinity keys of
// [A-Za-z0-9._/-], a Gt value with spaces, a taint key listed twice, more
// affinity than the overall bound) still loads: only requests are held to
// Kubernetes' syntax, so the next start can load any stored record.
TEST(ConvertTest, StoredRecordsOfAnOlderReleaseStillLoad) {
  v1::Node n;
  n.set_name("old");
  for (int i = 0; i < 2; ++i) {
    v1::Taint* t = n.add_taints();
    t->set_key("Example.COM/team");
    t->set_value(std::string(100, 'v'));
    t->set_effect(v1::TAINT_EFFECT_NO_SCHEDULE);
  }
  EXPECT_FALSE(ParseNode(n, "nodes[0]").ok());
  auto node = ParseNode(n, "node", Checks::kRecord);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->taints.size(), 2u);
  auto decoded = DecodeNode(n.SerializeAsString());
  ASSERT_TRUE(decoded.ok()) << decoded.status();

  v1::WorkloadSpec spec = ValidSpec();
  v1::GroupSpec* g = spec.mutable_groups(1);
  v1::Toleration* tol = g->add_tolerations();
  tol->set_key("Team");
  tol->set_value("a b");
  v1::NodeSelectorTerm* term = g->mutable_node_affinity()->add_required();
  for (int r = 0; r < 32; ++r) {
    v1::NodeSelectorRequirement* e = term->add_match_expressions();
    e->set_key("Example.COM/gpus");
    e->set_operator_(v1::AFFINITY_OPERATOR_GT);
    e->add_values(" 4 ");
  }
  for (int t = 0; t < 2; ++t)
    *g->mutable_node_affinity()->add_required() = *term;
  EXPECT_FALSE(ParseWorkloadSpec(spec).ok());
  auto record = ParseWorkloadSpec(spec, Checks::kRecord);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->groups[1].node_affinity.required[0].expressions[0].number,
            4);
}

TEST(ConvertTest, NodeAffinityIsCheckedAndGoesBackAsItCame) {
  v1::WorkloadSpec spec = ValidSpec();
  v1::NodeAffinity* a = spec.mutable_groups(1)->mutable_node_affinity();
  v1::NodeSelectorTerm* term = a->add_required();
  v1::NodeSelectorRequirement* in = term->add_match_expressions();
  in->set_key("node.kubernetes.io/instance-type");
  in->set_operator_(v1::AFFINITY_OPERATOR_IN);
  in->add_values("p4d.24xlarge");
  in->add_values("g5.48xlarge");
  in->add_values("p4d.24xlarge");  // twice: kept once
  v1::NodeSelectorRequirement* gt = term->add_match_expressions();
  gt->set_key("gpu-count");
  gt->set_operator_(v1::AFFINITY_OPERATOR_GT);
  gt->add_values("4");
  v1::NodeSelectorRequirement* name = a->add_required()->add_match_fields();
  name->set_key("metadata.name");
  name->set_operator_(v1::AFFINITY_OPERATOR_NOT_IN);
  name->add_values("node-7");
  v1::PreferredSchedulingTerm* pref = a->add_preferred();
  pref->set_weight(30);
  v1::NodeSelectorRequirement* zone =
      pref->mutable_preference()->add_match_expressions();
  zone->set_key("topology.kubernetes.io/zone");
  zone->set_operator_(v1::AFFINITY_OPERATOR_EXISTS);
  auto ok = ParseWorkloadSpec(spec);
  ASSERT_TRUE(ok.ok()) << ok.status();
  const NodeAffinity& parsed = ok->groups[1].node_affinity;
  ASSERT_EQ(parsed.required.size(), 2u);
  ASSERT_EQ(parsed.required[0].expressions.size(), 2u);
  EXPECT_EQ(parsed.required[0].expressions[0].values,
            (std::vector<std::string>{"g5.48xlarge", "p4d.24xlarge"}));
  EXPECT_EQ(parsed.required[0].expressions[1].number, 4);
  EXPECT_TRUE(parsed.required[1].expressions[0].on_name);
  ASSERT_EQ(parsed.preferred.size(), 1u);
  EXPECT_EQ(parsed.preferred[0].weight, 30);
  // Back to the wire, and parsed again to the same.
  v1::WorkloadSpec back;
  ToProto(*ok, &back);
  EXPECT_EQ(back.groups(1).node_affinity().required(1).match_fields(0).key(),
            "metadata.name");
  auto again = ParseWorkloadSpec(back);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->groups[1].node_affinity, parsed);

  const std::string at = "workload.groups[1].node_affinity";
  auto expect_invalid = [&](auto change, const std::string& field) {
    v1::WorkloadSpec bad = spec;
    change(*bad.mutable_groups(1)->mutable_node_affinity());
    ExpectInvalid(bad, at + field);
  };
  expect_invalid([](v1::NodeAffinity& x) { x.add_required(); },
                 ".required[2]");  // an empty term matches nothing
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_required(0)->mutable_match_expressions(0)->clear_values();
      },
      ".required[0].match_expressions[0].values");
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_required(0)->mutable_match_expressions(1)->set_values(0,
                                                                        "four");
      },
      ".required[0].match_expressions[1].values");
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_required(0)->mutable_match_expressions(1)->set_operator_(
            v1::AFFINITY_OPERATOR_UNSPECIFIED);
      },
      ".required[0].match_expressions[1].operator");
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_required(0)->mutable_match_expressions(0)->set_key("a b");
      },
      ".required[0].match_expressions[0].key");
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_required(1)->mutable_match_fields(0)->set_key("metadata.uid");
      },
      ".required[1].match_fields[0].key");
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_required(1)->mutable_match_fields(0)->set_operator_(
            v1::AFFINITY_OPERATOR_EXISTS);
      },
      ".required[1].match_fields[0].operator");
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_preferred(0)
            ->mutable_preference()
            ->mutable_match_expressions(0)
            ->add_values("a");
      },
      ".preferred[0].preference.match_expressions[0].values");
  // Gt and Lt read the value as Go's ParseInt does: a sign, digits,
  // nothing else.
  expect_invalid(
      [](v1::NodeAffinity& x) {
        x.mutable_required(0)->mutable_match_expressions(1)->set_values(0,
                                                                        " 4 ");
      },
      ".required[0].match_expressions[1].values");
  {
    v1::WorkloadSpec plus = spec;
    plus.mutable_groups(1)
        ->mutable_node_affinity()
        ->mutable_required(0)
        ->mutable_match_expressions(1)
        ->set_values(0, "+4");
    auto parsed_plus = ParseWorkloadSpec(plus);
    ASSERT_TRUE(parsed_plus.ok()) << parsed_plus.status();
    EXPECT_EQ(
        parsed_plus->groups[1].node_affinity.required[0].expressions[1].number,
        4);
  }
  // Bounded in all, not only per term: every node is judged against it.
  {
    v1::WorkloadSpec many = spec;
    for (int t = 0; t < 3; ++t) {
      v1::NodeSelectorTerm* term =
          many.mutable_groups(1)->mutable_node_affinity()->add_required();
      for (int r = 0; r < 30; ++r) {
        v1::NodeSelectorRequirement* e = term->add_match_expressions();
        e->set_key("zone");
        e->set_operator_(v1::AFFINITY_OPERATOR_EXISTS);
      }
    }
    ExpectInvalid(many, "at most 64 requirements and 1024 values");
  }
  expect_invalid(
      [](v1::NodeAffinity& x) { x.mutable_preferred(0)->set_weight(0); },
      ".preferred[0].weight");
  expect_invalid(
      [](v1::NodeAffinity& x) { x.mutable_preferred(0)->set_weight(101); },
      ".preferred[0].weight");
}

// Topologies (docs/SCHEDULING.md, "Topologies"): a placement names a
// topology and its levels, a group its segments; each wrong field is named,
// and what is right goes back as it came.
TEST(ConvertTest, TopologyLevelsAndSegmentsAreCheckedAndGoBackAsTheyCame) {
  v1::WorkloadSpec spec = ValidSpec();
  spec.mutable_placement()->set_topology("cluster");
  spec.mutable_placement()->set_required_level("topology.kubernetes.io/zone");
  spec.mutable_placement()->set_preferred_level("gangsched.io/rack");
  v1::GroupSpec* workers = spec.mutable_groups(1);
  workers->set_segment_size(4);
  workers->set_segment_level("gangsched.io/rack");
  auto parsed = ParseWorkloadSpec(spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->placement.topology, "cluster");
  EXPECT_EQ(parsed->placement.required_level, "topology.kubernetes.io/zone");
  EXPECT_EQ(parsed->placement.preferred_level, "gangsched.io/rack");
  EXPECT_EQ(parsed->groups[1].segment_size, 4);
  EXPECT_EQ(parsed->groups[1].segment_level, "gangsched.io/rack");
  v1::WorkloadSpec back;
  ToProto(*parsed, &back);
  EXPECT_EQ(back.placement().topology(), "cluster");
  EXPECT_EQ(back.placement().preferred_level(), "gangsched.io/rack");
  EXPECT_EQ(back.groups(1).segment_size(), 4);
  EXPECT_EQ(back.groups(1).segment_level(), "gangsched.io/rack");

  struct Case {
    std::function<void(v1::WorkloadSpec&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](v1::WorkloadSpec& w) {
         w.mutable_placement()->set_topology_key("zone");
       },
       "workload.placement.topology"},
      {[](v1::WorkloadSpec& w) { w.mutable_placement()->set_required(true); },
       "workload.placement.required"},
      {[](v1::WorkloadSpec& w) { w.mutable_placement()->set_topology(""); },
       "workload.placement.required_level"},
      {[](v1::WorkloadSpec& w) {
         w.mutable_placement()->set_preferred_level("not a label");
       },
       "workload.placement.preferred_level"},
      {[](v1::WorkloadSpec& w) {
         w.mutable_placement()->set_topology("bad name!");
       },
       "workload.placement.topology"},
      {[](v1::WorkloadSpec& w) { w.mutable_groups(1)->set_segment_size(-1); },
       "workload.groups[1].segment_size"},
      {[](v1::WorkloadSpec& w) { w.mutable_groups(1)->set_segment_size(3); },
       "workload.groups[1].segment_size"},  // not a multiple of 2
      {[](v1::WorkloadSpec& w) { w.mutable_groups(1)->set_segment_level(""); },
       "workload.groups[1].segment_level"},
      {[](v1::WorkloadSpec& w) { w.mutable_groups(1)->set_segment_size(0); },
       "workload.groups[1].segment_level"},  // a level with no size
      {[](v1::WorkloadSpec& w) {
         w.mutable_placement()->clear_topology();
         w.mutable_placement()->clear_required_level();
         w.mutable_placement()->clear_preferred_level();
       },
       "workload.groups[1].segment_level"},  // segments with no topology
  };
  for (const Case& c : cases) {
    v1::WorkloadSpec bad = spec;
    c.edit(bad);
    ExpectInvalid(bad, c.field);
  }
}

// A label value with a control character is refused (a topology's domain
// joins values with one: "a\x1fb" in zone and "c" in rack would be the
// same rack as "a" and "b\x1fc"); a stored record is read as written.
TEST(ConvertTest, LabelValuesHoldNoControlCharacters) {
  v1::Node n;
  n.set_name("gpu-1");
  (*n.mutable_allocatable())["nvidia.com/gpu"] = "8";
  (*n.mutable_labels())["zone"] = std::string(
      "a\x1f"
      "b");
  auto bad = ParseNode(n, "nodes[0]");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nodes[0].labels[\"zone\"]"),
            absl::string_view::npos)
      << bad.status().message();
  EXPECT_TRUE(ParseNode(n, "node", Checks::kRecord).ok());
  (*n.mutable_labels())["zone"] = "a-b.c_d";
  EXPECT_TRUE(ParseNode(n, "nodes[0]").ok());
  v1::WorkloadSpec spec = ValidSpec();
  (*spec.mutable_groups(1)->mutable_node_selector())["zone"] = "a\n";
  ExpectInvalid(spec, "workload.groups[1].node_selector");
}

// what_if.topologies reach the dry run as given; the scheduler checks them.
TEST(ConvertTest, WhatIfTakesTopologies) {
  v1::WhatIf in;
  v1::Topology* t = in.add_topologies();
  t->set_name("cluster");
  t->add_levels("zone");
  t->add_levels("rack");
  auto parsed = ParseWhatIf(in);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->topologies.size(), 1u);
  EXPECT_EQ(parsed->topologies[0], (Topology{"cluster", {"zone", "rack"}}));
  EXPECT_FALSE(parsed->empty());
}

TEST(ConvertTest, AbslCodesMapOneToOneToGrpc) {
  EXPECT_EQ(ToGrpc(absl::NotFoundError("x")).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpc(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpc(absl::FailedPreconditionError("m")).error_message(), "m");
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace gangsched::server

namespace gangsched::server {
namespace {

// Request ids are one namespace whatever the method.
TEST(RequestKeyTest, OneKeyPerIdWhateverTheMethod) {
  EXPECT_EQ(RequestKey(""), "");
  EXPECT_EQ(RequestKey("ns/a-1"), "id:ns/a-1");
  EXPECT_TRUE(CheckRequestId("").ok());
  EXPECT_FALSE(CheckRequestId(std::string(254, 'x')).ok());
  EXPECT_FALSE(CheckRequestId("a b").ok());
}

}  // namespace
}  // namespace gangsched::server
