# Every test runs the way a deployment does: its processes share a group secret through the
# environment (WSYNC_GROUP_SECRET, see docs/SECURITY.md). Tests of what happens without it, or
# with another one, unset or override it themselves.
#
# add_test is wrapped so that, at the end of the directory that adds the test (after its own
# set_tests_properties(... ENVIRONMENT ...), which would replace the list), the variable is
# appended to the test's ENVIRONMENT. Only the NAME signature is used in this project.
set(WSYNC_TEST_SECRET "wsync-test-suite-group-secret-7f3a9c" CACHE STRING "the tests' WSYNC_GROUP_SECRET")

function(_wsync_test_secret_env name)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT "WSYNC_GROUP_SECRET=${WSYNC_TEST_SECRET}")
endfunction()

function(add_test)
  _add_test(${ARGV})
  if(ARGV0 STREQUAL "NAME")
    # EVAL: a deferred call's arguments are expanded when it runs, where ARGV1 no longer exists.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _wsync_test_secret_env [[${ARGV1}]])")
  endif()
endfunction()
