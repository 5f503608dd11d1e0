// An owning pointer that copies what it points to when it is copied: what
// lets the Scheduler be copied whole, so a dry run can decide on a copy of
// the state with the same code that commits (docs/SCHEDULING.md, "Dry runs
// and what-if").
#pragma once

#include <memory>
#include <utility>

namespace gangsched {

template <typename T>
class ClonePtr {
 public:
  ClonePtr() = default;
  ClonePtr(std::unique_ptr<T> owned) : p_(std::move(owned)) {}  // NOLINT
  ClonePtr(const ClonePtr& other)
      : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  ClonePtr& operator=(const ClonePtr& other) {
    if (this != &other)
      p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  ClonePtr(ClonePtr&&) noexcept = default;
  ClonePtr& operator=(ClonePtr&&) noexcept = default;

  T* get() const { return p_.get(); }
  T& operator*() const { return *p_; }
  T* operator->() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace gangsched
