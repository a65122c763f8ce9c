// Early returns for absl::Status and absl::StatusOr, so a function that calls
// several fallible steps reads as the steps, not as their error plumbing.
//
//   HVDD_RETURN_IF_ERROR(WriteHeader(fd));
//   HVDD_ASSIGN_OR_RETURN(HostSet hosts, ParseHosts(text));
//   HVDD_ASSIGN_OR_RETURN(auto fd, OpenSocket(address), _.WithPrefix("listen"));
//
// The prefix keeps them clear of protobuf's own RETURN_IF_ERROR and
// ASSIGN_OR_RETURN (google/protobuf/stubs/status_macros.h), which some of
// its headers pull in.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace horovodd {

// What the optional third argument of HVDD_ASSIGN_OR_RETURN (and the second
// of HVDD_RETURN_IF_ERROR_WITH) sees as `_`: the failed status, to return as
// it is or with context in front of its message.
class StatusContext {
 public:
  explicit StatusContext(absl::Status status) : status_(std::move(status)) {}
  // "prefix: message", same code.
  absl::Status WithPrefix(absl::string_view prefix) const {
    return absl::Status(status_.code(), absl::StrCat(prefix, ": ", status_.message()));
  }
  const absl::Status& status() const { return status_; }
  operator absl::Status() const { return status_; }  // NOLINT: returned as is

 private:
  absl::Status status_;
};

}  // namespace horovodd

#define HVDD_STATUS_CONCAT_INNER(a, b) a##b
#define HVDD_STATUS_CONCAT(a, b) HVDD_STATUS_CONCAT_INNER(a, b)

// Returns `expr` (an absl::Status) from the enclosing function unless it is OK.
#define HVDD_RETURN_IF_ERROR(expr)                                  \
  do {                                                              \
    if (::absl::Status hvdd_status_ = (expr); !hvdd_status_.ok()) { \
      return hvdd_status_;                                          \
    }                                                               \
  } while (0)

// Returns `on_error` (an expression of `_`, the failed status as a
// horovodd::StatusContext) unless `expr` is OK.
#define HVDD_RETURN_IF_ERROR_WITH(expr, on_error)                   \
  do {                                                              \
    if (::absl::Status hvdd_status_ = (expr); !hvdd_status_.ok()) { \
      const ::horovodd::StatusContext _(std::move(hvdd_status_));   \
      return (on_error);                                            \
    }                                                               \
  } while (0)

// HVDD_ASSIGN_OR_RETURN(lhs, expr) declares or assigns `lhs` from the value of
// `expr` (an absl::StatusOr<T>), or returns its status from the enclosing
// function. HVDD_ASSIGN_OR_RETURN(lhs, expr, on_error) returns `on_error`
// instead, an expression of `_` (see HVDD_RETURN_IF_ERROR_WITH).
#define HVDD_ASSIGN_OR_RETURN(...)                                                          \
  HVDD_ASSIGN_OR_RETURN_PICK(__VA_ARGS__, HVDD_ASSIGN_OR_RETURN_3, HVDD_ASSIGN_OR_RETURN_2) \
  (__VA_ARGS__)
#define HVDD_ASSIGN_OR_RETURN_PICK(a, b, c, name, ...) name
#define HVDD_ASSIGN_OR_RETURN_2(lhs, expr) \
  HVDD_ASSIGN_OR_RETURN_IMPL(HVDD_STATUS_CONCAT(hvdd_statusor_, __LINE__), lhs, expr, _.status())
#define HVDD_ASSIGN_OR_RETURN_3(lhs, expr, on_error) \
  HVDD_ASSIGN_OR_RETURN_IMPL(HVDD_STATUS_CONCAT(hvdd_statusor_, __LINE__), lhs, expr, on_error)
#define HVDD_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr, on_error)    \
  auto statusor = (expr);                                            \
  if (!statusor.ok()) {                                              \
    const ::horovodd::StatusContext _(std::move(statusor).status()); \
    return (on_error);                                               \
  }                                                                  \
  lhs = std::move(statusor).value()
