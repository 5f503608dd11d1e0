// Preemption inside a queue (docs/SCHEDULING.md, "Taking resources back"):
// a gang may take room from running, preemptible work of its own queue with
// a strictly lower priority. Non-preemptible work is never a victim, of
// preemption or of reclaim (docs/SCHEDULING.md, "Priority classes"). Which
// victims are chosen, and what min runtimes protect, is victims.cc's.
#include "core/scheduler.h"

namespace gangsched {

bool Scheduler::MayBeVictim(const Workload& w) {
  return w.state == WorkloadState::kRunning && w.preemptible;
}

bool Scheduler::MayPreempt(const Workload& preemptor, const Workload& victim) {
  return &victim != &preemptor && victim.queue == preemptor.queue &&
         MayBeVictim(victim) && victim.priority < preemptor.priority;
}

}  // namespace gangsched
