// The page's own files (assets/: index.html, app.js, app.css), built into the
// binary by embed_assets.cmake, so that the daemon serves everything the page
// needs and nothing is fetched from anywhere else.
#pragma once

#include <cstddef>

#include "absl/strings/string_view.h"

namespace horovodd::daemon {

struct PageAsset {
  const char* name;  // "app.js"
  absl::string_view content;
};

// The asset named `name`; nullptr if there is none.
const PageAsset* FindPageAsset(absl::string_view name);

// The Content-Type of a file named `name`, by its extension.
const char* ContentTypeOf(absl::string_view name);

// Defined by the generated page_assets_data.cc.
extern const PageAsset kPageAssets[];
extern const size_t kPageAssetCount;

}  // namespace horovodd::daemon
