#include "daemon/rpc/client_stream_limiter.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace horovodd::daemon {

ClientStreamLimiter::Slot& ClientStreamLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    counts_ = std::move(other.counts_);
    client_ = std::move(other.client_);
    gauge_ = std::move(other.gauge_);
  }
  return *this;
}

void ClientStreamLimiter::Slot::CountIn(std::shared_ptr<std::atomic<int64_t>> gauge) {
  if (gauge_) gauge_->fetch_sub(1);
  gauge_ = std::move(gauge);
  if (gauge_) gauge_->fetch_add(1);
}

void ClientStreamLimiter::Slot::Release() {
  if (gauge_) {
    gauge_->fetch_sub(1);
    gauge_.reset();
  }
  if (!counts_) return;
  absl::MutexLock lock(&counts_->mu);
  auto it = counts_->open.find(client_);
  if (it != counts_->open.end() && --it->second <= 0) counts_->open.erase(it);
  counts_.reset();
}

std::string ClientStreamLimiter::ClientOf(absl::string_view peer) {
  // "ipv4:1.2.3.4:PORT", "ipv6:[::1]:PORT": drop ":PORT" when what follows
  // the last ':' is a number and something other than the scheme precedes it.
  const size_t colon = peer.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == peer.size()) return std::string(peer);
  for (char c : peer.substr(colon + 1)) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::string(peer);
  }
  const absl::string_view host = peer.substr(0, colon);
  if (host.find(':') == absl::string_view::npos) return std::string(peer);  // "unix:123"
  return std::string(host);
}

absl::StatusOr<ClientStreamLimiter::Slot> ClientStreamLimiter::Acquire(absl::string_view peer) {
  std::string client = ClientOf(peer);
  absl::MutexLock lock(&counts_->mu);
  int& open = counts_->open[client];
  if (open >= max_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client ", client, " already holds ", open, " ", what_, " streams open, the limit (",
        config_key_, "); close one before opening another"));
  }
  ++open;
  return Slot(counts_, std::move(client));
}

int ClientStreamLimiter::OpenStreams(absl::string_view peer) const {
  absl::MutexLock lock(&counts_->mu);
  auto it = counts_->open.find(ClientOf(peer));
  return it == counts_->open.end() ? 0 : it->second;
}

}  // namespace horovodd::daemon
