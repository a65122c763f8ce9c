# The daemon's JobService over real gRPC: codes and messages of bad requests.
hvdd_add_test(test_job_service
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_job_service.cc
  LIBS hvdd_daemon hvdd_client_credentials)
