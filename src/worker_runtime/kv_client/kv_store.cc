#include "worker_runtime/kv_client/kv_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::internal {

absl::StatusOr<std::string> GetKey(KvStore& store, const std::string& key, absl::Duration timeout) {
  HVDD_ASSIGN_OR_RETURN(std::vector<std::string> values, store.Get({key}, timeout));
  if (values.size() != 1) {
    return absl::InternalError(
        absl::StrCat("the store answered ", values.size(), " values for key '", key, "'"));
  }
  return std::move(values.front());
}

}  // namespace horovodd::internal
