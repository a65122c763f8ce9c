#include "worker_runtime/gpu/unique_id_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace horovodd::internal {
namespace {

absl::Status WithContext(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::string> ExchangeUniqueId(UniqueIdStore& store,
                                             const UniqueIdExchange& exchange) {
  std::string id;
  if (exchange.rank == 0) {
    if (!exchange.make_id) {
      return absl::InvalidArgumentError("rank 0 needs make_id to create the NCCL unique id");
    }
    absl::StatusOr<std::string> made = exchange.make_id();
    if (!made.ok()) return WithContext(made.status(), "rank 0 could not create the NCCL unique id");
    id = *std::move(made);
  } else {
    absl::StatusOr<std::string> fetched = store.Get(kNcclUniqueIdKey, exchange.timeout);
    if (!fetched.ok()) {
      return WithContext(fetched.status(),
                         absl::StrCat("rank ", exchange.rank, " waiting for rank 0's '",
                                      kNcclUniqueIdKey, "'"));
    }
    id = *std::move(fetched);
  }
  if (id.size() != exchange.id_bytes) {
    return absl::InternalError(absl::StrCat("the NCCL unique id ('", kNcclUniqueIdKey, "') has ",
                                            id.size(), " bytes, expected ", exchange.id_bytes));
  }
  if (exchange.rank == 0) {
    if (absl::Status set = store.Set(kNcclUniqueIdKey, id); !set.ok()) {
      return WithContext(set, absl::StrCat("rank 0 publishing '", kNcclUniqueIdKey, "'"));
    }
  }
  return id;
}

}  // namespace horovodd::internal
