// Column-aligned plain-text tables (see table.h).
#include "clients/gangschedctl/table.h"

#include <algorithm>
#include <utility>

namespace gangschedctl {
namespace {

constexpr size_t kGap = 3;

void PrintRow(std::ostream& out, absl::string_view indent,
              const std::vector<std::string>& cells,
              const std::vector<size_t>& widths) {
  std::string line(indent);
  for (size_t i = 0; i < cells.size(); ++i) {
    absl::string_view cell =
        cells[i].empty() ? absl::string_view("-") : absl::string_view(cells[i]);
    line.append(cell.data(), cell.size());
    // No padding after the last column: no trailing blanks.
    if (i + 1 < cells.size()) line.append(widths[i] - cell.size() + kGap, ' ');
  }
  out << line << '\n';
}

}  // namespace

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::AddRow(std::vector<std::string> cells) {
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out, absl::string_view indent) const {
  size_t columns = headers_.size();
  for (const auto& row : rows_) columns = std::max(columns, row.size());
  std::vector<size_t> widths(columns, 1);
  auto measure = [&widths](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      widths[i] = std::max(widths[i], cells[i].size());
    }
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);

  if (!headers_.empty()) PrintRow(out, indent, headers_, widths);
  for (const auto& row : rows_) PrintRow(out, indent, row, widths);
}

}  // namespace gangschedctl
