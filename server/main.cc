// The gangsched binary: parses flags, loads the config, starts the core
// loop, the gRPC services (with health and reflection) and the HTTP side
// (/metrics and the status page), and shuts down cleanly on SIGINT /
// SIGTERM. SIGHUP reloads the config.
#include <csignal>
#include <cstdio>
#include <future>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/config.h"
#include "server/convert.h"
#include "server/core_loop.h"
#include "server/etcd_store.h"
#include "server/event_log.h"
#include "server/flags.h"
#include "server/frontend.h"
#include "server/http_server.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/services.h"
#include "server/sqlite_store.h"
#include "server/status.h"

namespace gangsched::server {
namespace {

// Applies a config on the core thread and waits until it is in effect.
absl::Status ApplyConfig(CoreLoop& core, const Config& config) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  auto result = done->get_future();
  bool posted = core.Post(
      [&config, done](CoreLoop::Context& c) {
        absl::Status status = c.scheduler.SetPriorityClasses(
            config.priority_classes, config.default_priority_class);
        for (const auto& q : config.queues) {
          if (!status.ok()) break;
          status = c.scheduler.UpsertQueue(q).status();
        }
        if (status.ok() && !config.nodes.empty())
          c.scheduler.UpsertNodes(config.nodes, c.now);
        done->set_value(status);
      },
      nullptr);
  if (!posted) return absl::UnavailableError("core inbox full");
  return result.get();
}

// Asks the core for a workload's Explain text (HTTP thread; waits briefly).
absl::StatusOr<std::string> ExplainText(CoreLoop& core, const std::string& id) {
  auto done = std::make_shared<std::promise<absl::StatusOr<std::string>>>();
  auto result = done->get_future();
  bool posted = core.Post(nullptr, [id, done](CoreLoop::Context& c) {
    auto answer = c.scheduler.Explain(id, c.now);
    done->set_value(answer.ok() ? absl::StatusOr<std::string>(answer->text)
                                : absl::StatusOr<std::string>(answer.status()));
  });
  if (!posted) return absl::UnavailableError("the scheduler is busy; retry");
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    return absl::DeadlineExceededError("the scheduler did not answer in time");
  }
  return result.get();
}

// One log line per decision: what the cycle did to a workload.
void LogEvents(const std::vector<Event>& events, const Scheduler& scheduler,
               uint64_t cycle) {
  for (const Event& e : events) {
    const Workload* w = scheduler.FindWorkload(e.workload);
    std::string queue = w != nullptr ? w->spec.queue : "";
    if (e.type == EventType::kEvicted) {
      for (const Eviction& eviction : e.evictions) {
        LogLine(spdlog::level::info, "eviction")
            .Add("cycle", static_cast<int64_t>(cycle))
            .Add("revision", e.revision)
            .Add("workload", e.workload)
            .Add("queue", queue)
            .Add("reason", ToString(eviction.reason))
            .Add("pods", static_cast<int64_t>(eviction.slots.size()))
            .Add("preemptor", eviction.preemptor);
      }
      continue;
    }
    absl::string_view outcome = e.type == EventType::kBound      ? "bound"
                                : e.type == EventType::kReleased ? "released"
                                                                 : "state";
    LogLine line(spdlog::level::info, "decision");
    line.Add("cycle", static_cast<int64_t>(cycle))
        .Add("revision", e.revision)
        .Add("workload", e.workload)
        .Add("queue", queue)
        .Add("outcome", outcome)
        .Add("state", ToString(e.state));
    if (e.pending.code != PendingCode::kNone) {
      line.Add("reason", ToString(e.pending.code))
          .Add("message", e.pending.message);
    }
    if (!e.bindings.empty())
      line.Add("pods", static_cast<int64_t>(e.bindings.size()));
    if (!e.released.empty())
      line.Add("pods", static_cast<int64_t>(e.released.size()));
    if (e.waited) line.Add("waited_seconds", absl::ToDoubleSeconds(*e.waited));
  }
}

// Serves gRPC until SIGINT / SIGTERM (SIGHUP runs `on_hup`).
void WaitForSignals(const sigset_t& signals,
                    const std::function<void()>& on_hup) {
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGHUP) {
      on_hup();
      continue;
    }
    LogLine(spdlog::level::info, "shutting down")
        .Add("signal", static_cast<int64_t>(sig));
    return;
  }
}

// --role=frontend: validate, forward to the core, relay; no state here.
int RunFrontend(const ServerFlags& flags, const sigset_t& signals) {
  if (flags.core_addresses.empty()) {
    LogLine(spdlog::level::err, "--role=frontend needs --core=ADDR[,ADDR...]");
    return 2;
  }
  Metrics metrics("frontend");
  CoreClient core(flags.core_addresses);
  HttpServer http(metrics.registry(), nullptr);
  if (!flags.metrics_listen.empty()) {
    if (absl::Status s = http.Start(flags.metrics_listen); !s.ok()) {
      LogLine(spdlog::level::err, "cannot serve HTTP")
          .Add("address", flags.metrics_listen);
      return 1;
    }
  }
  ForwardingScheduler scheduler_service(&core, &metrics);
  ForwardingAdmin admin_service(&core, &metrics);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(flags.listen, grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.RegisterService(&scheduler_service);
  builder.RegisterService(&admin_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    LogLine(spdlog::level::err, "cannot listen").Add("address", flags.listen);
    return 1;
  }
  LogLine(spdlog::level::info, "serving as frontend")
      .Add("version", GANGSCHED_VERSION)
      .Add("grpc", flags.listen)
      .Add("cores", absl::StrJoin(flags.core_addresses, ","));
  WaitForSignals(signals, [] {});
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  http.Stop();
  return 0;
}

int Run(int argc, char** argv) {
  // Debian builds abseil with its debug checks on, which makes every
  // absl::Mutex (gRPC's locks) maintain a lock-order graph: a few percent of
  // every RPC (seen in perf). Production builds of abseil skip it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "gangsched: %s\n\n%s",
                 std::string(flags.status().message()).c_str(),
                 FlagsUsage().c_str());
    return 2;
  }
  if (flags->help) {
    std::printf("%s", FlagsUsage().c_str());
    return 0;
  }
  if (flags->version) {
    std::printf("gangsched %s\n", GANGSCHED_VERSION);
    return 0;
  }
  ConfigureLogging(
      flags->log_format == "json" ? LogFormat::kJson : LogFormat::kText,
      spdlog::level::from_str(flags->log_level));

  // Signals are taken by one thread with sigwait; block them everywhere else.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (flags->role == "frontend") return RunFrontend(*flags, signals);

  Config config = EmbeddedDefaultConfig();
  if (!flags->config.empty()) {
    auto loaded = LoadConfigFile(flags->config);
    if (!loaded.ok()) {
      LogLine(spdlog::level::err, "config not loaded")
          .Add("error", loaded.status().message());
      return 1;
    }
    config = *std::move(loaded);
  }

  std::unique_ptr<Store> store;
  const SqliteStore* sqlite = nullptr;  // `store`, when it is SQLite
  if (flags->store == "etcd") {
    auto connected = EtcdStore::Connect(
        {.endpoints = flags->etcd_endpoints,
         .prefix = flags->etcd_prefix,
         .lease_ttl = absl::Seconds(flags->etcd_lease_seconds),
         .id = flags->listen});
    if (!connected.ok()) {
      LogLine(spdlog::level::err, "cannot reach etcd")
          .Add("error", connected.status().message());
      return 1;
    }
    // A standby waits here, serving nothing, until it holds the leader key.
    absl::Status elected = (*connected)->Campaign([] {
      spdlog::default_logger()->flush();
      std::_Exit(75);  // fenced: stop before a standby can take over
    });
    if (!elected.ok()) {
      LogLine(spdlog::level::err, "election failed")
          .Add("error", elected.message());
      return 1;
    }
    store = *std::move(connected);
  } else if (!flags->ephemeral) {
    auto opened = SqliteStore::Open(
        {.dir = flags->data_dir, .full_sync = flags->sqlite_sync == "full"});
    if (!opened.ok()) {
      LogLine(spdlog::level::err, "cannot open the store")
          .Add("error", opened.status().message());
      return 1;
    }
    sqlite = opened->get();
    store = *std::move(opened);
  }
  Metrics metrics(flags->role);
  EventLog events(flags->event_window);
  SpecCache specs;  // shared by the services' answers
  CoreLoop core(
      {.inbox_capacity = flags->inbox_capacity,
       .tick = absl::Seconds(flags->tick_seconds)},
      std::make_unique<Scheduler>(SchedulerOptions{
          .stale_gang_grace = absl::Seconds(flags->stale_gang_grace_seconds)}),
      &events, store.get());
  if (store != nullptr) {
    // Recovery: classes and the config's queues first (stored workloads need
    // them), then everything stored; the config is applied again below.
    absl::Time started = absl::Now();
    Scheduler& scheduler = core.scheduler();
    absl::Status status = scheduler.SetPriorityClasses(
        config.priority_classes, config.default_priority_class);
    for (const auto& q : config.queues) {
      if (status.ok()) status = scheduler.UpsertQueue(q).status();
    }
    absl::StatusOr<Store::Loaded> loaded =
        status.ok() ? store->Load(scheduler, core.idempotency()) : status;
    if (!loaded.ok()) {
      LogLine(spdlog::level::err, "cannot recover the stored state")
          .Add("store", flags->store)
          .Add("error", loaded.status().message());
      return 1;
    }
    events.ResetTo(loaded->revision);
    LogLine(spdlog::level::info, "recovered")
        .Add("store", flags->store)
        .Add("queues", static_cast<int64_t>(loaded->queues))
        .Add("nodes", static_cast<int64_t>(loaded->nodes))
        .Add("workloads", static_cast<int64_t>(loaded->workloads))
        .Add("requests", static_cast<int64_t>(loaded->requests))
        .Add("revision", loaded->revision)
        .Add("seconds", absl::ToDoubleSeconds(absl::Now() - started));
  }
  HttpServer http(metrics.registry(), [&core](const std::string& id) {
    return ExplainText(core, id);
  });
  absl::Time last_status = absl::InfinitePast();
  core.SetCycleObserver([&](const CycleStats& stats, const Scheduler& scheduler,
                            const std::vector<Event>& cycle_events) {
    metrics.RecordCycle(stats, scheduler, cycle_events);
    LogEvents(cycle_events, scheduler, stats.cycle);
    // Gauges and the status page walk the whole state: at most 4 times a
    // second (the 1 s tick brings them up to date when requests stop).
    absl::Time now = absl::Now();
    if (now - last_status >= absl::Milliseconds(250)) {
      last_status = now;
      metrics.RefreshGauges(scheduler);
      metrics.RefreshSpecCache(specs);
      if (sqlite != nullptr) metrics.RefreshCheckpoints(sqlite->checkpoints());
      http.Publish(std::make_shared<StatusSnapshot>(
          BuildStatus(scheduler, now, stats.cycle)));
    }
  });
  core.Start();
  // The core thread uses `http` and `last_status` (declared after `core`)
  // until it stops: on every return, stop it before they go.
  absl::Cleanup stop_core = [&core] { core.Stop(); };
  if (absl::Status s = ApplyConfig(core, config); !s.ok()) {
    LogLine(spdlog::level::err, "config not applied").Add("error", s.message());
    return 1;
  }
  if (!flags->metrics_listen.empty()) {
    if (absl::Status s = http.Start(flags->metrics_listen); !s.ok()) {
      LogLine(spdlog::level::err, "cannot serve HTTP")
          .Add("address", flags->metrics_listen);
      return 1;
    }
  }

  SchedulerService scheduler_service(&core, &events, &metrics, &specs);
  AdminService admin_service(&core, &metrics, &specs);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(flags->listen, grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.RegisterService(&scheduler_service);
  builder.RegisterService(&admin_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    LogLine(spdlog::level::err, "cannot listen").Add("address", flags->listen);
    return 1;
  }
  LogLine(spdlog::level::info, "serving")
      .Add("version", GANGSCHED_VERSION)
      .Add("grpc", flags->listen)
      .Add("http",
           flags->metrics_listen.empty() ? "off" : flags->metrics_listen)
      .Add("queues", static_cast<int64_t>(config.queues.size()));

  WaitForSignals(signals, [&] {
    if (flags->config.empty()) {
      LogLine(spdlog::level::info, "SIGHUP: no config file to reload");
      return;
    }
    auto reloaded = LoadConfigFile(flags->config);
    absl::Status s =
        reloaded.ok() ? ApplyConfig(core, *reloaded) : reloaded.status();
    if (s.ok()) {
      LogLine(spdlog::level::info, "config reloaded")
          .Add("file", flags->config);
    } else {
      LogLine(spdlog::level::err, "config not reloaded")
          .Add("error", s.message());
    }
  });
  // In-flight calls get a second to be answered by the core (which keeps
  // running until after the server stops); gRPC 1.51 waits out the whole
  // deadline while any client connection is open, so it is kept short.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  http.Stop();
  return 0;  // stop_core stops the core
}

}  // namespace
}  // namespace gangsched::server

int main(int argc, char** argv) { return gangsched::server::Run(argc, argv); }
