#include "worker_runtime/gpu/unique_id_exchange.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::internal {

absl::StatusOr<std::string> ExchangeUniqueId(KvStore& store, const UniqueIdExchange& exchange) {
  std::string id;
  if (exchange.rank == 0) {
    if (!exchange.make_id) {
      return absl::InvalidArgumentError("rank 0 needs make_id to create the NCCL unique id");
    }
    HVDD_ASSIGN_OR_RETURN(id, exchange.make_id(),
                          _.WithPrefix("rank 0 could not create the NCCL unique id"));
  } else {
    HVDD_ASSIGN_OR_RETURN(id, GetKey(store, kNcclUniqueIdKey, exchange.timeout),
                          _.WithPrefix(absl::StrCat("rank ", exchange.rank,
                                                    " waiting for rank 0's '",
                                                    kNcclUniqueIdKey, "'")));
  }
  if (id.size() != exchange.id_bytes) {
    return absl::InternalError(absl::StrCat("the NCCL unique id ('", kNcclUniqueIdKey, "') has ",
                                            id.size(), " bytes, expected ", exchange.id_bytes));
  }
  if (exchange.rank == 0) {
    HVDD_RETURN_IF_ERROR_WITH(
        store.Set(kNcclUniqueIdKey, id),
        _.WithPrefix(absl::StrCat("rank 0 publishing '", kNcclUniqueIdKey, "'")));
  }
  return id;
}

}  // namespace horovodd::internal
