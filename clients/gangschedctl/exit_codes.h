// Process exit codes of gangschedctl, shared by every command.
#pragma once

namespace gangschedctl {

inline constexpr int kExitOk = 0;
// The call or the local work failed (RPC error, unreadable file, rejected
// nodes, a health check that is not SERVING).
inline constexpr int kExitFailure = 1;
// The command line was wrong; usage went to stderr.
inline constexpr int kExitUsage = 2;

}  // namespace gangschedctl
