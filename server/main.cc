// The gangsched binary: parses flags, loads the config, starts the core
// loop, the gRPC services (with health and reflection) and the HTTP side
// (/metrics and the status page), and shuts down cleanly on SIGINT /
// SIGTERM. SIGHUP reloads the config.
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/access.h"
#include "server/auth.h"
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
#include "server/test_clock.h"
#include "server/tls.h"

namespace gangsched::server {
namespace {

// Logs what the scheduler let pass with a warning (a restore keeping a
// workload whose class is gone, released history dropped...).
void LogWarnings(Scheduler& scheduler) {
  for (const std::string& warning : scheduler.TakeWarnings()) {
    LogLine(spdlog::level::warn, "state").Add("warning", warning);
  }
}

// Applies a config on the core thread, all or nothing, and waits until it
// is in effect (or refused: then nothing of it is). `removal`: whether
// removing a class live workloads use refuses the config (a reload) or is
// let pass with a warning (a start, over a stored state).
// A file's queues are the file's (the admin calls may not change them, or a
// restart would undo the change); the built-in default only seeds its
// queue into a state that has none, so an admin may change or delete it.
absl::Status ApplyConfig(CoreLoop& core, const Config& config,
                         ClassRemoval removal, bool from_file) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  auto result = done->get_future();
  bool posted = core.Post(
      [&config, done, removal, from_file](CoreLoop::Context& c) {
        bool empty = std::none_of(c.scheduler.queues().begin(),
                                  c.scheduler.queues().end(),
                                  [](const Queue& q) { return q.live; });
        static const std::vector<QueueSpec> kNone;
        // Checked with the rest by CheckConfig: set first, as a stored
        // state's workloads may name them.
        const std::vector<Topology> old_topologies = c.scheduler.topologies();
        absl::Status status = c.scheduler.SetTopologies(config.topologies);
        if (status.ok())
          status = c.scheduler.Reconfigure(
              config.priority_classes, config.default_priority_class,
              from_file || empty ? config.queues : kNone, removal, from_file);
        if (!status.ok()) {
          c.scheduler.SetTopologies(old_topologies).IgnoreError();
        } else {
          c.scheduler.SetUsageOptions(config.usage);
          c.scheduler.SetConsolidationOptions(config.consolidation);
        }
        if (status.ok() && !config.nodes.empty())
          c.scheduler.UpsertNodes(config.nodes, c.now);
        LogWarnings(c.scheduler);
        done->set_value(status);
      },
      nullptr);
  if (!posted) return absl::UnavailableError("core inbox full");
  return result.get();
}

// Whether a config holds together on its own (the tree's depth included),
// checked on an empty scheduler: an error here is the file's, not the
// state's, and the server does not start with it.
absl::Status CheckConfig(const Config& config,
                         const SchedulerOptions& options) {
  Scheduler empty(options);
  if (absl::Status s = empty.SetTopologies(config.topologies); !s.ok())
    return s;
  return empty.Reconfigure(config.priority_classes,
                           config.default_priority_class, config.queues,
                           ClassRemoval::kRefuse);
}

// Why `address` cannot be listened on, for the log: gRPC only says that it
// failed. Binds a throwaway TCP socket the same way (no SO_REUSEPORT).
std::string ListenError(const std::string& address) {
  if (address.starts_with("unix:")) return "cannot listen";
  size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc));
  std::string why = "cannot listen";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = std::strerror(errno);
      if (errno == EADDRINUSE) {
        why = "address already in use (is another gangsched serving it?)";
      }
    }
    close(fd);
  }
  freeaddrinfo(found);
  return why;
}

// Builds and starts a gRPC server on `address` that refuses to share the
// port: gRPC sets SO_REUSEPORT by default, and two schedulers with
// different state would then split the connections between them.
std::unique_ptr<grpc::Server> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    std::shared_ptr<grpc::ServerCredentials> credentials, int max_message_bytes,
    int* bound_port_out = nullptr) {
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A request larger than this is refused (RESOURCE_EXHAUSTED) before it
  // is read into memory.
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.AddListeningPort(address, std::move(credentials), &bound_port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    LogLine(spdlog::level::err, "cannot listen")
        .Add("address", address)
        .Add("error", ListenError(address));
    return nullptr;
  }
  if (bound_port_out != nullptr) *bound_port_out = bound_port;
  return server;
}

// The address as listened on: port 0 becomes the one the system chose.
std::string BoundAddress(const std::string& address, int port) {
  if (address.starts_with("unix:") || port <= 0) return address;
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
}

// The health of the services (grpc.health.v1 per service name, as
// Kubernetes gRPC probes and grpc_health_probe ask for them) and of the
// server as a whole ("").
void SetHealth(grpc::Server* server, bool serving) {
  if (server == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  for (const char* name : {"", "gangsched.v1.Scheduler", "gangsched.v1.Admin"})
    health->SetServingStatus(name, serving);
}

// The security of a process (docs/SECURITY.md): TLS files checked, the
// token file loaded, and what answers health probes in plaintext.
struct Security {
  ServerTls tls;
  std::shared_ptr<const TokenTable> tokens;  // null: no authentication
  std::shared_ptr<grpc::ServerCredentials> credentials;
  unsigned refresh_seconds = 2;
};

absl::StatusOr<Security> LoadSecurity(const ServerFlags& flags) {
  Security security;
  security.tls = {.cert = flags.tls_cert,
                  .key = flags.tls_key,
                  .client_ca = flags.tls_client_ca};
  if (absl::Status s = CheckServerTls(security.tls); !s.ok()) return s;
  if (!flags.auth_tokens.empty()) {
    auto table = TokenTable::Load(flags.auth_tokens);
    if (!table.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-tokens: ", table.status().message()));
    }
    security.tokens = std::make_shared<const TokenTable>(*std::move(table));
  }
  // 0 turns polling off; gRPC's file watcher then looks once a day.
  security.refresh_seconds =
      flags.reload_poll_seconds > 0
          ? std::max(1u, static_cast<unsigned>(flags.reload_poll_seconds))
          : 86400;
  security.credentials =
      GrpcServerCredentials(security.tls, security.refresh_seconds);
  return security;
}

// The plaintext health-only server of --health-listen (kubelet's gRPC
// probes cannot do TLS or send tokens). Built before the reflection plugin
// is registered, so it serves grpc.health.v1 and nothing else.
std::unique_ptr<grpc::Server> StartHealthServer(const ServerFlags& flags) {
  if (flags.health_listen.empty()) return nullptr;
  return StartServer(flags.health_listen, {}, grpc::InsecureServerCredentials(),
                     1024);
}

// A file's content, or nothing when it cannot be read.
std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Re-reads files whose content changed (the config and token files; a
// ConfigMap or Secret volume update swaps them), every `every`.
class FilePoller {
 public:
  using OnChange = std::function<void()>;
  FilePoller(absl::Duration every) : every_(every) {}
  ~FilePoller() { Stop(); }

  // `seen`: the content already in effect (by default, what is there
  // now); a change from it runs `on_change`.
  void Watch(const std::string& path, OnChange on_change,
             std::optional<std::optional<std::string>> seen = std::nullopt) {
    if (path.empty()) return;
    files_.push_back(
        {path, seen ? *std::move(seen) : Read(path), std::move(on_change)});
  }
  void Start() {
    if (files_.empty() || every_ <= absl::ZeroDuration()) return;
    thread_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, absl::ToChronoNanoseconds(every_),
                           [this] { return stop_; })) {
        for (File& f : files_) {
          std::optional<std::string> now = Read(f.path);
          if (now && now != f.content) {
            f.content = std::move(now);
            lock.unlock();
            f.on_change();
            lock.lock();
          }
        }
      }
    });
  }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct File {
    std::string path;
    std::optional<std::string> content;
    OnChange on_change;
  };
  static std::optional<std::string> Read(const std::string& path) {
    return ReadWholeFile(path);
  }

  absl::Duration every_;
  std::vector<File> files_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// SIGHUP or a changed file: the token file again, all or nothing.
void ReloadTokens(const ServerFlags& flags, AccessControl& access) {
  if (flags.auth_tokens.empty()) return;
  auto table = TokenTable::Load(flags.auth_tokens);
  if (!table.ok()) {
    LogLine(spdlog::level::err,
            "auth tokens not reloaded; the previous ones stay in effect")
        .Add("file", flags.auth_tokens)
        .Add("error", table.status().message());
    return;
  }
  size_t entries = table->size();
  access.Replace(std::make_shared<const TokenTable>(*std::move(table)));
  LogLine(spdlog::level::info, "auth tokens reloaded")
      .Add("file", flags.auth_tokens)
      .Add("entries", static_cast<int64_t>(entries));
}

// A workload's Explain text (HTTP thread; waits briefly): the core makes a
// fork of the state in its turn, and this thread decides on it (Explain
// runs the next cycle on it), so the core spends only the fork on a page.
absl::StatusOr<std::string> ExplainText(CoreLoop& core, const std::string& id) {
  // The id is held to the Explain RPC's rules (a 400 with the field named).
  v1::ExplainRequest request;
  request.set_workload_id(id);
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  auto done = std::make_shared<std::promise<std::shared_ptr<Scheduler>>>();
  auto result = done->get_future();
  bool posted = core.Post(
      nullptr,
      [done](CoreLoop::Context& c) {
        done->set_value(std::as_const(c.scheduler).Fork());
      },
      /*read_only=*/true);
  if (!posted) return absl::UnavailableError("the scheduler is busy; retry");
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    return absl::DeadlineExceededError("the scheduler did not answer in time");
  }
  std::shared_ptr<Scheduler> fork = result.get();
  auto answer = fork->DecideExplain(id, core.Now());
  if (!answer.ok()) return answer.status();
  return answer->text;
}

// One log line per decision: what the cycle did to a workload.
void LogEvents(const std::vector<Event>& events, const Scheduler& scheduler,
               uint64_t cycle) {
  for (const Event& e : events) {
    const Workload* w = scheduler.FindWorkload(e.workload);
    std::string queue = w != nullptr ? w->spec.queue : "";
    if (e.type == EventType::kEvicted) {
      for (const Eviction& eviction : e.evictions) {
        LogLine line(spdlog::level::info, "eviction");
        line.Add("cycle", static_cast<int64_t>(cycle))
            .Add("revision", e.revision)
            .Add("workload", e.workload)
            .Add("queue", queue)
            .Add("reason", ToString(eviction.reason))
            .Add("pods", static_cast<int64_t>(eviction.slots.size()))
            .Add("preemptor", eviction.preemptor);
        // docs/SCHEDULING.md, "Preemption with notice".
        if (eviction.HasNotice()) {
          line.Add("evict_at",
                   absl::FormatTime(absl::RFC3339_sec, eviction.evict_at,
                                    absl::UTCTimeZone()));
        }
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
int RunFrontend(const ServerFlags& flags, const Security& security,
                const sigset_t& signals) {
  if (flags.core_addresses.empty()) {
    LogLine(spdlog::level::err, "--role=frontend needs --core=ADDR[,ADDR...]");
    return 2;
  }
  ClientTls core_tls{.ca = flags.core_tls_ca,
                     .cert = flags.core_tls_cert,
                     .key = flags.core_tls_key};
  if (absl::Status s = CheckClientTls(core_tls, "--core-tls-"); !s.ok()) {
    LogLine(spdlog::level::err, "bad TLS files").Add("error", s.message());
    return 1;
  }
  Metrics metrics("frontend");
  AccessControl access(&metrics, security.tokens);
  CoreClient core(flags.core_addresses,
                  GrpcChannelCredentials(core_tls, security.refresh_seconds));
  // With a read cache the frontend shows the status pages from it; /explain
  // asks the core.
  HttpServer::ExplainFn explain;
  if (flags.read_cache) {
    explain = [&core](const std::string& id) -> absl::StatusOr<std::string> {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      v1::ExplainRequest request;
      request.set_workload_id(id);
      v1::ExplainResponse response;
      grpc::Status status =
          core.Current().scheduler->Explain(&ctx, request, &response);
      if (!status.ok()) {
        return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                            status.error_message());
      }
      return response.text();
    };
  }
  HttpServer http(metrics.registry(), explain, &access, security.tls);
  std::string core_authorization;
  if (!flags.core_token_file.empty()) {
    std::ifstream in(flags.core_token_file);
    std::string token;
    if (!in || !std::getline(in, token) ||
        absl::StripAsciiWhitespace(token).empty()) {
      LogLine(spdlog::level::err, "cannot read --core-token-file")
          .Add("file", flags.core_token_file);
      return 1;
    }
    core_authorization =
        absl::StrCat("Bearer ", absl::StripAsciiWhitespace(token));
  }
  std::unique_ptr<ReadCache> cache;
  if (flags.read_cache) {
    cache = std::make_unique<ReadCache>(
        &core, &metrics,
        ReadCache::Options{
            .authorization = core_authorization,
            .publish_status =
                [&http](std::shared_ptr<const StatusSnapshot> status) {
                  http.Publish(status);
                }});
  }
  if (!flags.metrics_listen.empty()) {
    if (absl::Status s = http.Start(flags.metrics_listen); !s.ok()) {
      LogLine(spdlog::level::err, "cannot serve HTTP")
          .Add("address", flags.metrics_listen)
          .Add("error", ListenError(flags.metrics_listen));
      return 1;
    }
  }
  ForwardingScheduler scheduler_service(&core, &metrics, &access,
                                        flags.max_watch_streams, cache.get());
  ForwardingAdmin admin_service(&core, &metrics, &access, cache.get());
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<grpc::Server> health = StartHealthServer(flags);
  if (!flags.health_listen.empty() && !health) return 1;
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<grpc::Server> server = StartServer(
      flags.listen, {&scheduler_service, &admin_service}, security.credentials,
      static_cast<int>(flags.max_message_bytes));
  if (!server) return 1;
  // NOT_SERVING until a core answers its health check: a frontend with no
  // core behind it could only answer UNAVAILABLE.
  SetHealth(server.get(), false);
  SetHealth(health.get(), false);
  FilePoller poller(absl::Seconds(flags.reload_poll_seconds));
  poller.Watch(flags.auth_tokens, [&] { ReloadTokens(flags, access); });
  poller.Start();
  std::mutex health_mu;
  std::condition_variable health_cv;
  bool stopping = false;
  std::thread health_watch([&] {
    std::optional<bool> last;
    std::unique_lock lock(health_mu);
    do {
      lock.unlock();
      bool serving = core.AnyCoreServing(absl::Seconds(1));
      // A stream to a core that stopped answering may never end by itself.
      if (!serving && cache) cache->Invalidate();
      if (cache) cache->RefreshStatus();
      if (last != serving) {
        SetHealth(server.get(), serving);
        SetHealth(health.get(), serving);
        LogLine(serving ? spdlog::level::info : spdlog::level::warn,
                serving ? "a core answers: serving"
                        : "no core answers: not serving")
            .Add("cores", absl::StrJoin(flags.core_addresses, ","));
        last = serving;
      }
      lock.lock();
    } while (!health_cv.wait_for(lock, std::chrono::seconds(1),
                                 [&] { return stopping; }));
  });
  if (cache) cache->Start();
  LogLine(spdlog::level::info, "serving as frontend")
      .Add("version", GANGSCHED_VERSION)
      .Add("grpc", flags.listen)
      .Add("cores", absl::StrJoin(flags.core_addresses, ","));
  WaitForSignals(signals, [&] { ReloadTokens(flags, access); });
  poller.Stop();
  {
    std::lock_guard lock(health_mu);
    stopping = true;
  }
  health_cv.notify_all();
  health_watch.join();
  if (cache) cache->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (health) health->Shutdown(std::chrono::system_clock::now());
  http.Stop();
  return 0;
}

int Run(int argc, char** argv) {
  // Debian builds abseil with its debug checks on, which makes every
  // absl::Mutex (gRPC's locks) maintain a lock-order graph: a few percent of
  // every RPC (seen in perf). Production builds of abseil skip it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Signals are taken by one thread with sigwait; block them everywhere
  // else, from the first instruction: a SIGHUP during start-up (a config
  // management tool reloading early) must not kill the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Every connection is a descriptor: take the hard limit (often 1,048,576
  // under systemd and containerd) rather than the soft 1,024, so a flood of
  // idle connections does not leave gRPC unable to open its certificate
  // files (docs/SECURITY.md).
  if (rlimit files; getrlimit(RLIMIT_NOFILE, &files) == 0 &&
                    files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
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
  // The test clock talks over standard input and output. Closed at start,
  // their numbers go to gRPC's own descriptors (its static set-up runs
  // before main), which are neither pipes, files, terminals nor sockets.
  auto usable = [](int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 &&
           (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) ||
            S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode));
  };
  if (flags->test_clock >= 0 &&
      !(usable(STDIN_FILENO) && usable(STDOUT_FILENO))) {
    std::fprintf(stderr,
                 "gangsched: --test-clock needs standard input and output "
                 "open (its lines and answers)\n");
    return 2;
  }
  ConfigureLogging(
      flags->log_format == "json" ? LogFormat::kJson : LogFormat::kText,
      spdlog::level::from_str(flags->log_level));

  auto security = LoadSecurity(*flags);
  if (!security.ok()) {
    LogLine(spdlog::level::err, "security settings not loaded")
        .Add("error", security.status().message());
    return 1;
  }
  if (flags->role == "frontend") return RunFrontend(*flags, *security, signals);

  SchedulerOptions scheduler_options{
      .stale_gang_grace = absl::Seconds(flags->stale_gang_grace_seconds),
      .max_queue_depth = flags->max_queue_depth};
  Config config = EmbeddedDefaultConfig();
  // What the file held when it was loaded: a change made while a standby
  // waits to be elected is picked up by the poller once it leads.
  std::optional<std::string> config_text = ReadWholeFile(flags->config);
  if (!flags->config.empty()) {
    auto loaded = LoadConfigFile(flags->config);
    if (!loaded.ok()) {
      LogLine(spdlog::level::err, "config not loaded")
          .Add("error", loaded.status().message());
      return 1;
    }
    config = *std::move(loaded);
  }
  // Before the store is read: the window numbers the stored buckets.
  scheduler_options.usage = config.usage;
  scheduler_options.consolidation = config.consolidation;
  if (absl::Status s = CheckConfig(config, scheduler_options); !s.ok()) {
    LogLine(spdlog::level::err, "config not loaded")
        .Add("file", flags->config)
        .Add("error", s.message());
    return 1;
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
    // A standby waits here, serving nothing, until it holds the leader key;
    // SIGTERM or SIGINT meanwhile ends it at once (it holds no state), so a
    // rollout does not wait out the kubelet's grace period.
    std::atomic<bool> campaigning = true;
    std::thread standby_signals([&] {
      timespec every{0, 200'000'000};
      while (campaigning) {
        int sig = sigtimedwait(&signals, nullptr, &every);
        if (sig == SIGTERM || sig == SIGINT) {
          LogLine(spdlog::level::info, "shutting down while standby")
              .Add("signal", static_cast<int64_t>(sig));
          spdlog::default_logger()->flush();
          std::_Exit(0);
        }
      }
    });
    absl::Status elected = (*connected)->Campaign([] {
      spdlog::default_logger()->flush();
      std::_Exit(75);  // fenced: stop before a standby can take over
    });
    campaigning = false;
    standby_signals.join();
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
  AccessControl access(&metrics, security->tokens);
  EventLog events(flags->event_window);
  SpecCache specs;  // shared by the services' answers
  std::optional<absl::Time> test_clock;
  if (flags->test_clock >= 0)
    test_clock = absl::FromUnixSeconds(flags->test_clock);
  CoreLoop core({.inbox_capacity = flags->inbox_capacity,
                 .tick = absl::Seconds(flags->tick_seconds),
                 .test_clock = test_clock},
                std::make_unique<Scheduler>(scheduler_options), &events,
                store.get());
  // Frontends' read caches follow the committed state from here.
  ReplicationHub replicas;
  core.SetReplication(&replicas);
  if (store != nullptr) {
    // Recovery: the config's classes and topologies first (a stored
    // workload whose class the file no longer has keeps the values it was
    // admitted with; one that names a topology finds it from the first
    // cycle on), then everything stored, whose queues include every queue a
    // config ever added; the config is applied over it below.
    absl::Time started = absl::Now();
    Scheduler& scheduler = core.scheduler();
    absl::Status status = scheduler.SetTopologies(config.topologies);
    if (status.ok()) {
      status = scheduler.SetPriorityClasses(config.priority_classes,
                                            config.default_priority_class,
                                            ClassRemoval::kKeep);
    }
    absl::StatusOr<Store::Loaded> loaded =
        status.ok() ? store->Load(scheduler, core.idempotency()) : status;
    LogWarnings(scheduler);
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
  HttpServer http(
      metrics.registry(),
      [&core](const std::string& id) { return ExplainText(core, id); }, &access,
      security->tls);
  absl::Time last_status = absl::InfinitePast();
  core.SetCycleObserver([&](const CycleStats& stats, const Scheduler& scheduler,
                            const std::vector<Event>& cycle_events) {
    if (stats.skipped) {
      metrics.RecordSkippedTick();
    } else {
      metrics.RecordCycle(stats, scheduler, cycle_events);
      LogEvents(cycle_events, scheduler, stats.cycle);
    }
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
  // The config holds together (CheckConfig); if the stored state refuses
  // it (a queue the file puts under one that holds workloads now), the
  // server still starts, on the stored state: it must never be kept from
  // its own data dir.
  if (absl::Status s = ApplyConfig(core, config, ClassRemoval::kKeep,
                                   !flags->config.empty());
      !s.ok()) {
    // Classes are not stored: those of the file (set before the restore)
    // are the only ones there are.
    LogLine(spdlog::level::err,
            "config's queues not applied over the stored state; serving the "
            "stored queues with the file's priority classes")
        .Add("file", flags->config)
        .Add("error", s.message());
    metrics.RecordConfigLoad(false);
  } else {
    metrics.RecordConfigLoad(true);
  }
  if (!flags->metrics_listen.empty()) {
    if (absl::Status s = http.Start(flags->metrics_listen); !s.ok()) {
      LogLine(spdlog::level::err, "cannot serve HTTP")
          .Add("address", flags->metrics_listen)
          .Add("error", ListenError(flags->metrics_listen));
      return 1;
    }
  }

  SchedulerService scheduler_service(
      &core, &events, &metrics, &specs, &access,
      absl::Seconds(flags->watch_heartbeat_seconds),
      {.max_streams = flags->max_watch_streams,
       .max_lag_events = flags->watch_max_lag_events},
      {.max_queued = flags->max_dry_runs});
  AdminService admin_service(&core, &metrics, &specs, &access);
  ReplicationService replication_service(&core, &replicas, &metrics, &access,
                                         flags->max_follow_streams);
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<grpc::Server> health = StartHealthServer(*flags);
  if (!flags->health_listen.empty() && !health) return 1;
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  int bound_port = 0;
  std::unique_ptr<grpc::Server> server = StartServer(
      flags->listen, {&scheduler_service, &admin_service, &replication_service},
      security->credentials, static_cast<int>(flags->max_message_bytes),
      &bound_port);
  if (!server) return 1;
  SetHealth(server.get(), true);
  SetHealth(health.get(), true);
  LogLine(spdlog::level::info, "serving")
      .Add("version", GANGSCHED_VERSION)
      .Add("grpc", BoundAddress(flags->listen, bound_port))
      .Add("http",
           flags->metrics_listen.empty() ? "off" : flags->metrics_listen)
      .Add("queues", static_cast<int64_t>(config.queues.size()));

  // SIGHUP and the poller reload one at a time.
  std::mutex reload_mu;
  auto reload_config = [&] {
    std::lock_guard lock(reload_mu);
    // All or nothing: a file that does not parse, or that the state
    // refuses (a class a live workload uses is gone, a queue cannot move),
    // changes nothing, and the previous config stays in effect.
    auto reloaded = LoadConfigFile(flags->config);
    absl::Status s = reloaded.status();
    if (s.ok()) s = CheckConfig(*reloaded, scheduler_options);
    if (s.ok()) {
      s = ApplyConfig(core, *reloaded, ClassRemoval::kRefuse,
                      /*from_file=*/true);
    }
    metrics.RecordConfigLoad(s.ok());
    if (s.ok()) {
      LogLine(spdlog::level::info, "config reloaded")
          .Add("file", flags->config);
    } else {
      LogLine(spdlog::level::err,
              "config not reloaded; the previous config stays in effect")
          .Add("file", flags->config)
          .Add("error", s.message());
    }
  };
  std::unique_ptr<TestClockInput> clock_input;
  if (test_clock) {
    LogLine(spdlog::level::warn,
            "--test-clock: time moves only when standard input says so");
    clock_input = std::make_unique<TestClockInput>(&core, *test_clock,
                                                   STDIN_FILENO, STDOUT_FILENO);
    clock_input->Start();
  }
  FilePoller poller(absl::Seconds(flags->reload_poll_seconds));
  poller.Watch(flags->config, reload_config, config_text);
  poller.Watch(flags->auth_tokens, [&] {
    std::lock_guard lock(reload_mu);
    ReloadTokens(*flags, access);
  });
  poller.Start();
  WaitForSignals(signals, [&] {
    if (flags->config.empty()) {
      LogLine(spdlog::level::info, "SIGHUP: no config file to reload");
    } else {
      reload_config();
    }
    std::lock_guard lock(reload_mu);
    ReloadTokens(*flags, access);
  });
  poller.Stop();
  if (clock_input) clock_input->Stop();
  // In-flight calls get a second to be answered by the core (which keeps
  // running until after the server stops); gRPC 1.51 waits out the whole
  // deadline while any client connection is open, so it is kept short.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (health) health->Shutdown(std::chrono::system_clock::now());
  http.Stop();
  return 0;  // stop_core stops the core
}

}  // namespace
}  // namespace gangsched::server

int main(int argc, char** argv) { return gangsched::server::Run(argc, argv); }
