# Credentials and TLS: tokens, token files, settings (test_auth.cc), and an
# in-process daemon refusing calls without the right token (test_auth_server.cc).
hvdd_add_test(test_auth
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_auth.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_auth_server.cc
  LIBS hvdd_daemon hvdd_service hvdd_client_credentials)
