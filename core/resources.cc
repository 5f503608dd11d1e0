#include "core/resources.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gangsched {

void ResourceVector::Set(ResourceId id, int64_t amount) {
  if (id.value() >= amounts_.size()) {
    if (amount == 0) return;
    amounts_.resize(id.value() + 1, 0);
  }
  amounts_[id.value()] = amount;
}

ResourceVector& ResourceVector::operator+=(const ResourceVector& other) {
  return AddScaled(other, 1);
}

ResourceVector& ResourceVector::operator-=(const ResourceVector& other) {
  return AddScaled(other, -1);
}

ResourceVector& ResourceVector::AddScaled(const ResourceVector& other,
                                          int64_t factor) {
  const size_t n = other.amounts_.size();
  if (n > amounts_.size()) amounts_.resize(n, 0);
  // Through plain pointers: a store to amounts_[i] may alias the inlined
  // vector's size word (both are 64-bit integers), which would make the
  // compiler reload it, and where the data is, on every step.
  int64_t* to = amounts_.data();
  const int64_t* from = other.amounts_.data();
  for (size_t i = 0; i < n; ++i) to[i] += from[i] * factor;
  return *this;
}

ResourceVector ResourceVector::operator*(int64_t factor) const {
  ResourceVector out = *this;
  for (auto& amount : out.amounts_) amount *= factor;
  return out;
}

bool operator==(const ResourceVector& a, const ResourceVector& b) {
  size_t n = std::max(a.amounts_.size(), b.amounts_.size());
  for (size_t i = 0; i < n; ++i) {
    ResourceId id(static_cast<uint32_t>(i));
    if (a.Get(id) != b.Get(id)) return false;
  }
  return true;
}

bool ResourceVector::FitsIn(const ResourceVector& capacity) const {
  for (size_t i = 0; i < amounts_.size(); ++i) {
    if (amounts_[i] > 0 &&
        amounts_[i] > capacity.Get(ResourceId(static_cast<uint32_t>(i)))) {
      return false;
    }
  }
  return true;
}

ResourceVector ResourceVector::AtLeastZero() const {
  ResourceVector out = *this;
  for (int64_t& amount : out.amounts_) amount = std::max<int64_t>(amount, 0);
  return out;
}

bool ResourceVector::IsZero() const {
  return std::all_of(amounts_.begin(), amounts_.end(),
                     [](int64_t a) { return a == 0; });
}

ResourceTable::ResourceTable() {
  Intern("cpu");
  Intern("memory");
  Intern(kGpuName);
  Intern(kGpuMemoryName);
}

ResourceId ResourceTable::Intern(absl::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  ResourceId id(static_cast<uint32_t>(names_.size()));
  names_.emplace_back(name);
  scales_.push_back(ScaleFor(name));
  ids_.emplace(std::string(name), id);
  return id;
}

namespace {

// The three resources every table starts with, by compare: nearly every
// pod names only these, and comparing a short name is cheaper than hashing
// it. Invalid for any other name.
ResourceId BuiltIn(absl::string_view name) {
  if (name == "cpu") return kCpu;
  if (name == "memory") return kMemory;
  if (name == kGpuName) return kGpu;
  return ResourceId();
}

}  // namespace

ResourceId ResourceTable::Find(absl::string_view name) const {
  if (ResourceId id = BuiltIn(name); id.valid()) return id;
  auto it = ids_.find(name);
  return it == ids_.end() ? ResourceId() : it->second;
}

ResourceVector ResourceTable::FromNamed(const NamedResources& named) {
  ResourceVector vec;
  for (const auto& [name, amount] : named) vec.Add(Intern(name), amount);
  return vec;
}

ResourceVector ResourceTable::FromKnown(const NamedResources& named) const {
  ResourceVector vec;
  for (const auto& [name, amount] : named) {
    ResourceId id = BuiltIn(name);
    vec.Add(id.valid() ? id : ids_.at(name), amount);
  }
  return vec;
}

bool ResourceTable::Knows(const NamedResources& named) const {
  return std::all_of(named.begin(), named.end(), [&](const auto& entry) {
    return Find(entry.first).valid();
  });
}

NamedResources ResourceTable::ToNamed(const ResourceVector& vec) const {
  NamedResources out;
  for (size_t i = 0; i < vec.size(); ++i) {
    ResourceId id(static_cast<uint32_t>(i));
    if (vec.Get(id) != 0) out.emplace_back(Name(id), vec.Get(id));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ResourceTable::Describe(const ResourceVector& vec) const {
  std::string out;
  for (const auto& [name, amount] : ToNamed(vec)) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", name, "=",
                    FormatQuantity(amount, ScaleFor(name)));
  }
  return out.empty() ? "nothing" : out;
}

}  // namespace gangsched
