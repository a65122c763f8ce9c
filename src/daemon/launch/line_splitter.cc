#include "daemon/launch/line_splitter.h"

namespace horovodd::daemon {

void LineSplitter::Feed(std::string_view data, const Emit& emit) {
  while (!data.empty()) {
    if (partial_.size() == max_line_) {
      // A full piece is handed out only once the next byte is known, so a line
      // of exactly max_line_ bytes comes out whole and not followed by "".
      emit(partial_);
      partial_.clear();
      if (data.front() == '\n') data.remove_prefix(1);
      continue;
    }
    const std::string_view window = data.substr(0, max_line_ - partial_.size());
    const size_t newline = window.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(window);
      data.remove_prefix(window.size());
      continue;
    }
    if (partial_.empty()) {
      emit(window.substr(0, newline));  // the common case: no copy
    } else {
      partial_.append(window.substr(0, newline));
      emit(partial_);
      partial_.clear();
    }
    data.remove_prefix(newline + 1);
  }
}

void LineSplitter::Flush(const Emit& emit) {
  if (partial_.empty()) return;
  emit(partial_);
  partial_.clear();
}

}  // namespace horovodd::daemon
