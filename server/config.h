// The YAML configuration file: queues, priority classes, scheduler settings
// and (for demos) static nodes. Loaded at start and on SIGHUP. Queues and
// nodes go through the same validation as their admin RPCs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/scheduler.h"
#include "core/spec.h"
#include "core/usage.h"

namespace gangsched::server {

struct Config {
  std::vector<PriorityClass> priority_classes = DefaultPriorityClasses();
  std::string default_priority_class = std::string(kDefaultPriorityClass);
  std::vector<QueueSpec> queues;  // parents before children
  std::vector<NodeSpec> nodes;
  // `topologies:` (docs/SCHEDULING.md, "Topologies").
  std::vector<Topology> topologies;
  // `time_based_fair_share:` (docs/SCHEDULING.md, "Time-based fair share").
  UsageOptions usage;
  // `consolidation:` (docs/SCHEDULING.md, "Consolidation").
  ConsolidationOptions consolidation;
};

// Built-in defaults when no file is given: the four priority classes and
// one unconstrained leaf queue named "default".
Config EmbeddedDefaultConfig();

absl::StatusOr<Config> LoadConfigFile(const std::string& path);
absl::StatusOr<Config> ParseConfig(const std::string& yaml_text);

}  // namespace gangsched::server
