// The YAML config file (server/config.h) from bytes, then what the server
// does with a file at start and on SIGHUP (server/main.cc): CheckConfig
// (Reconfigure on an empty Scheduler, refusing), then ApplyConfig (the
// file's queues and classes, its static nodes), and a reload of the same
// file, which must be accepted. The state must stay consistent throughout.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "core/scheduler.h"
#include "server/config.h"
#include "tests/fuzz/fuzz_util.h"

namespace gangsched::server {
namespace {

int Run(const uint8_t* data, size_t size) {
  absl::StatusOr<Config> config =
      ParseConfig(std::string(reinterpret_cast<const char*>(data), size));
  if (!config.ok()) return 0;

  // main.cc's CheckConfig: an error here keeps the server from starting.
  Scheduler empty;
  absl::Status checked = empty.Reconfigure(
      config->priority_classes, config->default_priority_class, config->queues,
      ClassRemoval::kRefuse);
  if (!checked.ok()) return 0;
  fuzz::Require(empty.CheckConsistency().ok(), "consistent after CheckConfig");

  // main.cc's ApplyConfig at start, from a file.
  Scheduler scheduler;
  absl::Status applied = scheduler.Reconfigure(
      config->priority_classes, config->default_priority_class, config->queues,
      ClassRemoval::kKeep, /*owns_queues=*/true);
  fuzz::Require(applied.ok(), "a config CheckConfig accepts applies at start");
  if (!config->nodes.empty()) {
    scheduler.UpsertNodes(config->nodes, absl::UnixEpoch());
  }
  fuzz::Require(scheduler.CheckConsistency().ok(),
                "consistent after ApplyConfig");

  // SIGHUP with the file unchanged.
  absl::Status reloaded = scheduler.Reconfigure(
      config->priority_classes, config->default_priority_class, config->queues,
      ClassRemoval::kRefuse, /*owns_queues=*/true);
  fuzz::Require(reloaded.ok(), "the same file reloads");
  fuzz::Require(scheduler.CheckConsistency().ok(), "consistent after reload");
  return 0;
}

}  // namespace
}  // namespace gangsched::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return gangsched::server::Run(data, size);
}
