// The --auth-tokens file (server/auth.h, TokenTable::Parse) from bytes, and
// the look-ups a call makes with the table it gives: a bearer token by its
// digest and a client certificate's common name.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/auth.h"
#include "tests/fuzz/fuzz_util.h"

namespace gangsched::server {
namespace {

int Run(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text);
  if (!table.ok()) {
    fuzz::Require(!table.status().message().empty(), "an error says why");
    return 0;
  }
  // The input's halves as a token and a common name: whatever they find
  // is a listed principal with a subject.
  absl::string_view token = text.substr(0, size / 2);
  absl::string_view cn = text.substr(size / 2);
  for (const Principal* p :
       {table->FindToken(token), table->FindCommonName(cn)}) {
    if (p == nullptr) continue;
    fuzz::Require(!p->subject.empty(), "a principal has a subject");
    (void)Allows(p->role, Access::kRead);
    (void)RoleName(p->role);
  }
  return 0;
}

}  // namespace
}  // namespace gangsched::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return gangsched::server::Run(data, size);
}
