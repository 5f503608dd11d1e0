#include "core/taints.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gangsched {

bool Tolerates(const Toleration& toleration, const Taint& taint) {
  if (toleration.effect != TaintEffect::kAny &&
      toleration.effect != taint.effect) {
    return false;
  }
  if (toleration.op == TolerationOperator::kExists) {
    return toleration.key.empty() || toleration.key == taint.key;
  }
  return toleration.key == taint.key && toleration.value == taint.value;
}

const Taint* BlockingTaint(const std::vector<Taint>& taints,
                           const std::vector<Toleration>& tolerations,
                           bool* avoid) {
  *avoid = false;
  for (const Taint& taint : taints) {
    const bool prefer = taint.effect == TaintEffect::kPreferNoSchedule;
    if (prefer && *avoid) continue;
    const bool tolerated =
        std::any_of(tolerations.begin(), tolerations.end(),
                    [&](const Toleration& t) { return Tolerates(t, taint); });
    if (tolerated) continue;
    if (!prefer) return &taint;
    *avoid = true;
  }
  return nullptr;
}

std::string TaintText(const Taint& taint) {
  const char* effect = taint.effect == TaintEffect::kNoExecute ? "NoExecute"
                       : taint.effect == TaintEffect::kPreferNoSchedule
                           ? "PreferNoSchedule"
                           : "NoSchedule";
  return taint.value.empty()
             ? absl::StrCat(taint.key, ":", effect)
             : absl::StrCat(taint.key, "=", taint.value, ":", effect);
}

}  // namespace gangsched
