// A slow disk for load tests: preloaded into the server
// (LD_PRELOAD=build/bench/libslow_sync.so), it delays every fsync and
// fdatasync by SLOW_SYNC_MS milliseconds (default 5) before doing it, as a
// network-attached cloud disk might. This machine's disk syncs in ~0.3 ms,
// which hides what a store's syncs cost where they are slow: SQLite's
// checkpoints (`normal`) and every commit (`full`). See bench/load/README.md.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

namespace {

void Pause() {
  const char* env = std::getenv("SLOW_SYNC_MS");
  long ms = env != nullptr ? std::atol(env) : 5;
  if (ms <= 0) return;
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fdatasync(int fd) {
  static auto real = Next<int (*)(int)>("fdatasync");
  Pause();
  return real(fd);
}

extern "C" int fsync(int fd) {
  static auto real = Next<int (*)(int)>("fsync");
  Pause();
  return real(fd);
}
