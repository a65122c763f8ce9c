# Rendezvous on the Attach stream: the runtime's DaemonClient against
# horovodd's own WorkerService (a launcher that records) and against the
# in-test fake daemon, which can break the stream mid-rendezvous.
hvdd_add_test(test_stream_rendezvous
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stream_rendezvous.cc
  LIBS hvdd_daemon horovodd_runtime)
