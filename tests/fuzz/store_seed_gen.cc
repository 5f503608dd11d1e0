// Writes seed inputs for the store fuzzers (tests/fuzz/make_corpus.py runs
// it): a small cluster driven through the states a store holds (running
// gangs, an elastic gang, a pipelined one with evicting victims, a
// RELEASING and a RELEASED workload), encoded by the server's own
// EncodeChanges after each step, so the seeds are records the server
// writes and not guesses of their shape.
//
//   store_seed_gen OUT_DIR
// writes OUT_DIR/store_restore_fuzzer/step-N (one StoredCommit holding
// every row so far) and OUT_DIR/store_codec_fuzzer/* (one record each,
// after the byte that picks its kind).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "gangsched/internal/store.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/core_loop.h"
#include "server/store_codec.h"

namespace gangsched::server {
namespace {

// The store_codec_fuzzer's first byte (its Record enum).
constexpr char kWorkload = 0, kQueue = 1, kNode = 2, kAnswer = 3, kCommit = 4;

void Write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// `message` with its map entries in key order: protobuf writes maps in
// hash order otherwise, and the seeds would change with every run.
std::string Deterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

// A stored record (the bytes the server's encoder wrote), deterministic.
template <typename Record>
std::string Deterministic(const std::string& bytes) {
  Record record;
  record.ParseFromString(bytes);
  return Deterministic(record);
}

std::string DeterministicRow(StoreRows::Table table, const std::string& bytes) {
  switch (table) {
    case StoreRows::Table::kWorkload:
      return Deterministic<internal::StoredWorkload>(bytes);
    case StoreRows::Table::kNode:
      return Deterministic<v1::Node>(bytes);
    case StoreRows::Table::kQueue:
      return Deterministic<internal::StoredQueue>(bytes);
  }
  return bytes;
}

QueueSpec MakeQueue(std::string name, std::string parent, int64_t gpu_quota) {
  QueueSpec q;
  q.name = std::move(name);
  q.parent = std::move(parent);
  q.resources.push_back({"nvidia.com/gpu", {gpu_quota * 1000, kUnlimited, 1}});
  q.preempt_min_runtime = absl::Minutes(5);
  return q;
}

NodeSpec MakeNode(std::string name, std::string zone, bool with_pods) {
  NodeSpec n;
  n.name = std::move(name);
  n.allocatable = {
      {"cpu", 64000}, {"memory", int64_t{512} << 30}, {"nvidia.com/gpu", 4000}};
  if (with_pods) n.allocatable.push_back({"pods", 110000});
  std::sort(n.allocatable.begin(), n.allocatable.end());
  n.labels = {{"topology.kubernetes.io/zone", std::move(zone)}};
  return n;
}

GroupSpec MakeGroup(std::string name, int64_t gpus, int32_t min,
                    int32_t desired, int32_t max) {
  GroupSpec g;
  g.name = std::move(name);
  g.resources = {{"cpu", 2000}, {"memory", int64_t{8} << 30}};
  if (gpus > 0) g.resources.push_back({"nvidia.com/gpu", gpus * 1000});
  g.min_count = min;
  g.desired_count = desired;
  g.max_count = max;
  return g;
}

WorkloadSpec MakeWorkload(std::string id, std::string queue, std::string klass,
                          std::vector<GroupSpec> groups) {
  WorkloadSpec w;
  w.id = std::move(id);
  w.queue = std::move(queue);
  w.priority_class = std::move(klass);
  w.groups = std::move(groups);
  w.labels = {{"ray.io/cluster", w.id}};
  return w;
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::path out(argv[1]);
  std::filesystem::path restore = out / "store_restore_fuzzer";
  std::filesystem::path codec = out / "store_codec_fuzzer";
  std::filesystem::create_directories(restore);
  std::filesystem::create_directories(codec);

  Scheduler s;
  absl::Time now = absl::FromUnixSeconds(1767225600);
  internal::StoredCommit log;  // every row so far, in order
  // A request-id answer, as Allocate leaves one.
  internal::StoredAnswer answer;
  answer.set_key("id:req-1");
  answer.set_seq(0);
  answer.set_code(0);
  answer.set_response("\n\x07ns/train\x10\x03");
  answer.set_digest(std::string(32, '\x5a'));
  *log.add_answers() = answer;

  int step = 0;
  auto commit = [&] {
    StoreRows rows = EncodeChanges(s, s.TakeChanges(), {});
    for (const StoreRows::Row& row : rows.rows) {
      internal::StoredCommit::Row* r = log.add_rows();
      r->set_table(static_cast<int>(row.table));
      r->set_key(row.key);
      if (row.value) {
        r->set_value(DeterministicRow(row.table, *row.value));
      } else {
        r->set_deleted(true);
      }
      r->set_seq(row.seq);
    }
    log.set_revision(rows.revision);
    log.set_submit_seq(rows.submit_seq);
    Write(restore / absl::StrCat("step-", ++step), Deterministic(log));
    now += absl::Minutes(10);
  };
  auto must = [](const absl::Status& status) {
    if (!status.ok()) {
      std::fprintf(stderr, "store_seed_gen: %s\n",
                   std::string(status.message()).c_str());
      std::exit(1);
    }
  };

  // A department with two teams, four 4-GPU nodes in two zones.
  must(s.UpsertQueue(MakeQueue("research", "", 16)).status());
  must(s.UpsertQueue(MakeQueue("team-a", "research", 8)).status());
  must(s.UpsertQueue(MakeQueue("team-b", "research", 8)).status());
  s.UpsertNodes({MakeNode("gpu-0", "a", true), MakeNode("gpu-1", "a", false),
                 MakeNode("gpu-2", "b", false), MakeNode("gpu-3", "b", false)},
                now);
  commit();

  // A Ray cluster spread over a zone, and an elastic one that grows.
  WorkloadSpec train = MakeWorkload(
      "ns/train", "team-a", "train",
      {MakeGroup("head", 0, 1, 1, 1), MakeGroup("worker", 1, 2, 4, 8)});
  train.placement.topology_key = "topology.kubernetes.io/zone";
  must(s.Submit(train, now));
  must(s.Submit(MakeWorkload("ns/elastic", "team-b", "train",
                             {MakeGroup("worker", 2, 1, 3, 4)}),
                now));
  s.RunCycle(now);
  commit();

  // Inference at a higher priority in a full team: it preempts, and is
  // PIPELINED on the room of evicting slots.
  must(s.Submit(MakeWorkload("ns/infer", "team-a", "inference",
                             {MakeGroup("server", 4, 2, 2, 2)}),
                now));
  s.RunCycle(now);
  commit();

  // An operator evicts the elastic gang whole (RELEASING), then releases
  // the trainer (RELEASED).
  auto evicted = s.Preempt("ns/elastic", PreemptScope::kWhole,
                           /*requeue=*/true, /*dry_run=*/false, now);
  must(evicted.status());
  s.RunCycle(now);
  commit();
  must(s.Release("ns/train", {}, /*shrink=*/false, now).status());
  s.RunCycle(now);
  commit();

  // One record of each kind, as the store keeps them now.
  int n = 0;
  auto record = [&](char kind, const std::string& bytes) {
    Write(codec / absl::StrCat("record-", ++n), std::string(1, kind) + bytes);
  };
  for (const auto& w : s.workloads()) {
    if (w) {
      record(kWorkload, DeterministicRow(StoreRows::Table::kWorkload,
                                         EncodeWorkload(s.RecordOf(*w))));
    }
  }
  for (const auto& q : s.queues()) {
    if (q.live) {
      record(kQueue, DeterministicRow(StoreRows::Table::kQueue,
                                      EncodeQueue(q.spec, q.created_seq)));
    }
  }
  for (const auto& node : s.nodes()) {
    if (node.live) {
      record(kNode,
             DeterministicRow(StoreRows::Table::kNode, EncodeNode(s, node)));
    }
  }
  record(kAnswer, Deterministic(answer));
  internal::StoredCommit small;
  for (int i = 0; i < log.rows_size() && i < 4; ++i)
    *small.add_rows() = log.rows(i);
  *small.add_answers() = answer;
  record(kCommit, Deterministic(small));
  std::printf("store_seed_gen: %d restore seeds, %d record seeds\n", step, n);
  return 0;
}

}  // namespace
}  // namespace gangsched::server

int main(int argc, char** argv) { return gangsched::server::Main(argc, argv); }
