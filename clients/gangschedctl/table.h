// Column-aligned plain-text tables, the -o table rendering of lists.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gangschedctl {

class Table {
 public:
  // No headers: a borderless key/value style block.
  Table() = default;
  explicit Table(std::vector<std::string> headers);

  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Columns are separated by at least three spaces. Empty cells print as "-"
  // so every line splits into the same number of whitespace-separated
  // fields (awk-friendly). `indent` prefixes every line.
  void Print(std::ostream& out, absl::string_view indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace gangschedctl
