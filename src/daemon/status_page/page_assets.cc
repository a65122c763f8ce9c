#include "daemon/status_page/page_assets.h"

#include "absl/strings/match.h"

namespace horovodd::daemon {

const PageAsset* FindPageAsset(absl::string_view name) {
  for (size_t i = 0; i < kPageAssetCount; ++i) {
    if (kPageAssets[i].name == name) return &kPageAssets[i];
  }
  return nullptr;
}

const char* ContentTypeOf(absl::string_view name) {
  if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

}  // namespace horovodd::daemon
