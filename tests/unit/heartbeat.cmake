# The heartbeat interval horovodd announces on Attach streams (scaled with the
# job's size) and the runtime's DaemonClient following it; the daemon side is
# horovodd's own JobManager and WorkerService with a launcher that records.
hvdd_add_test(test_heartbeat_interval
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_heartbeat_interval.cc
  LIBS hvdd_daemon horovodd_runtime)
