// Status and StatusOr: how optpipe reports a call that did not work.
//
// g++ 12 has no std::expected under C++20, so the library carries its own
// small pair. A Status is "did the call work"; what a solve *found* (optimal,
// time limit, infeasible) is a separate, ordinary result field.
//
//   StatusOr<Problem> p = LoadProblem("case.json");
//   if (!p.ok()) { std::cerr << p.status().message() << "\n"; return 2; }
//   Use(*p);
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace optpipe {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // malformed or out-of-range input; the message names the field
  kNotFound,         // a file or named thing does not exist
  kNotApplicable,    // a method's precondition does not hold for this problem
  kInfeasible,       // the problem or schedule cannot satisfy its constraints
  kInternal,         // a broken invariant inside optpipe
  kCancelled,        // stopped (a stop token, Ctrl-C) before it had a result
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return {}; }
inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status NotApplicable(std::string m) { return {StatusCode::kNotApplicable, std::move(m)}; }
inline Status Infeasible(std::string m) { return {StatusCode::kInfeasible, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "StatusOr needs a value or an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace optpipe
