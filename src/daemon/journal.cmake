# The daemon's durable job records: an SQLite database under the state dir.
find_package(SQLite3 REQUIRED)
add_library(hvdd_journal STATIC
  ${CMAKE_CURRENT_LIST_DIR}/journal.cc
  ${CMAKE_CURRENT_LIST_DIR}/journal_sqlite.cc)
target_include_directories(hvdd_journal PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_journal
  PUBLIC hvdd_proto absl::status absl::statusor absl::strings absl::time
  PRIVATE SQLite::SQLite3 spdlog::spdlog)
