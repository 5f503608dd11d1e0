#include "core/taints.h"

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

namespace {

bool Tolerated(const Taint& taint, const std::vector<Toleration>& tolerations) {
  for (const Toleration& t : tolerations) {
    if (Tolerates(t, taint)) return true;
  }
  return false;
}

}  // namespace

const Taint* FirstBlockingTaint(const std::vector<Taint>& taints,
                                const std::vector<Toleration>& tolerations) {
  for (const Taint& taint : taints) {
    if (taint.effect == TaintEffect::kPreferNoSchedule) continue;
    if (!Tolerated(taint, tolerations)) return &taint;
  }
  return nullptr;
}

bool AvoidsNode(const std::vector<Taint>& taints,
                const std::vector<Toleration>& tolerations) {
  for (const Taint& taint : taints) {
    if (taint.effect == TaintEffect::kPreferNoSchedule &&
        !Tolerated(taint, tolerations)) {
      return true;
    }
  }
  return false;
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
