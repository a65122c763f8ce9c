# The journal (SQLite records of jobs) and the daemon's archived jobs.
hvdd_add_test(journal_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_journal.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_archived_jobs.cc
  LIBS hvdd_daemon hvdd_journal)
