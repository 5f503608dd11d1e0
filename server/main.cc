// The gangsched binary: parses flags, loads the config, starts the core
// loop, the gRPC services (with health and reflection) and /metrics, and
// shuts down cleanly on SIGINT / SIGTERM. SIGHUP reloads the config.
#include <csignal>
#include <cstdio>
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/config.h"
#include "server/convert.h"
#include "server/core_loop.h"
#include "server/event_log.h"
#include "server/flags.h"
#include "server/metrics.h"
#include "server/services.h"
#include "spdlog/spdlog.h"

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

int Run(int argc, char** argv) {
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
  spdlog::set_level(spdlog::level::from_str(flags->log_level));

  Config config = EmbeddedDefaultConfig();
  if (!flags->config.empty()) {
    auto loaded = LoadConfigFile(flags->config);
    if (!loaded.ok()) {
      spdlog::error("{}", std::string(loaded.status().message()));
      return 1;
    }
    config = *std::move(loaded);
  }

  // Signals are taken by one thread with sigwait; block them everywhere else.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<Metrics> metrics;
  try {
    metrics = std::make_unique<Metrics>(flags->metrics_listen);
  } catch (const std::exception& e) {
    spdlog::error("cannot serve metrics on {}: {}", flags->metrics_listen,
                  e.what());
    return 1;
  }
  EventLog events(flags->event_window);
  CoreLoop core(
      {.inbox_capacity = flags->inbox_capacity,
       .tick = absl::Seconds(flags->tick_seconds)},
      std::make_unique<Scheduler>(SchedulerOptions{
          .stale_gang_grace = absl::Seconds(flags->stale_gang_grace_seconds)}),
      &events);
  core.SetCycleObserver([&](const CycleStats& stats, const Scheduler& scheduler,
                            const std::vector<Event>& cycle_events) {
    metrics->RecordCycle(stats, scheduler, cycle_events);
  });
  core.Start();
  if (absl::Status s = ApplyConfig(core, config); !s.ok()) {
    spdlog::error("config: {}", std::string(s.message()));
    return 1;
  }

  SchedulerService scheduler_service(&core, &events, metrics.get());
  AdminService admin_service(&core, metrics.get());
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
    spdlog::error("cannot listen on {}", flags->listen);
    return 1;
  }
  spdlog::info(
      "gangsched {} serving gRPC on {} (port {}), metrics on {}, {} queues",
      GANGSCHED_VERSION, flags->listen, bound_port,
      flags->metrics_listen.empty() ? "(off)" : flags->metrics_listen,
      config.queues.size());

  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGHUP) {
      if (flags->config.empty()) {
        spdlog::info("SIGHUP: no config file to reload");
        continue;
      }
      auto reloaded = LoadConfigFile(flags->config);
      absl::Status s =
          reloaded.ok() ? ApplyConfig(core, *reloaded) : reloaded.status();
      if (s.ok()) {
        spdlog::info("SIGHUP: reloaded {}", flags->config);
      } else {
        spdlog::error("SIGHUP: config not reloaded: {}",
                      std::string(s.message()));
      }
      continue;
    }
    spdlog::info("signal {}: shutting down", sig);
    break;
  }
  // In-flight calls get a second to be answered by the core (which keeps
  // running until after the server stops); gRPC 1.51 waits out the whole
  // deadline while any client connection is open, so it is kept short.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  core.Stop();
  return 0;
}

}  // namespace
}  // namespace gangsched::server

int main(int argc, char** argv) { return gangsched::server::Run(argc, argv); }
