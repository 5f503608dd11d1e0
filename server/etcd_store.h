// --store=etcd: state in etcd v3 (over its gRPC API) under a key prefix,
// and leader election on an etcd lease so that one core schedules while
// standbys wait.
//
// Election: every core grants itself a lease (--etcd-lease-seconds) and
// keeps it alive; the leader is the core whose transaction created
// <prefix>/leader (compare create_revision == 0) with its id, attached to
// its lease. Standbys retry every second; when the leader dies its lease
// expires, the key goes with it, and a standby wins. Every write is one
// transaction guarded by "<prefix>/leader holds my id", so a deposed leader
// can never write. A core that cannot renew its lease for half the TTL
// stops the process before any standby can take over.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "server/store.h"

namespace gangsched::server {

class EtcdStore final : public Store {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // host:port
    std::string prefix = "/gangsched";
    absl::Duration lease_ttl = absl::Seconds(5);
    std::string id;  // this core, e.g. its listen address
  };
  static absl::StatusOr<std::unique_ptr<EtcdStore>> Connect(
      const Options& options);
  ~EtcdStore() override;

  // Blocks until this core is the leader. Afterwards the lease is kept
  // alive in the background; if that fails, `on_lost` runs (it must stop
  // the process).
  absl::Status Campaign(std::function<void()> on_lost);
  // Who holds the leader key now ("" if nobody).
  std::string Leader();

  absl::StatusOr<Loaded> Load(Scheduler& scheduler,
                              IdempotencyCache& requests) override;
  absl::Status Write(const std::vector<const StoreRows*>& batches) override;

 private:
  explicit EtcdStore(const Options& options);
  void KeepAlive();
  absl::StatusOr<etcdserverpb::RangeResponse> RangePrefix(
      const std::string& prefix);
  std::string Key(absl::string_view kind, absl::string_view name) const;

  Options options_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  int64_t lease_id_ = 0;
  std::thread keepalive_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> last_renewed_us_{0};
  std::function<void()> on_lost_;
};

}  // namespace gangsched::server
