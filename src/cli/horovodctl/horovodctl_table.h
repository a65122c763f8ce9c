// A plain-text table for horovodctl's human output: a header row and left
// aligned columns two spaces apart, as kubectl and docker print them.
#pragma once

#include <string>
#include <vector>

namespace horovodd::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> headers);

  // A row shorter than the header is padded with empty cells; a longer one
  // keeps only the first header-count cells.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  // Every line ends in '\n'; the last column is not padded.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace horovodd::cli
