# WSYNC_SANITIZE: build every C and C++ target of this project (core, plugins, tests, samples,
# tools) with the compiler's sanitizers. Included from the top-level CMakeLists.txt before any
# target is defined, so the flags reach all of them. See docs/TESTING-SANITIZERS.md.
#
#   -DWSYNC_SANITIZE=address,undefined   ASan + UBSan (what scripts/test.sh runs in build-asan)
#   -DWSYNC_SANITIZE=thread              TSan (the threaded parts; not together with ASan)
#
# UBSan findings abort (-fno-sanitize-recover), so a finding fails its test instead of printing a
# line nobody reads. Runtime options for ctest (ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS,
# TSAN_OPTIONS, with the suppressions in tests/sanitizers/) come from a file ctest includes before
# it runs anything: running `ctest` in such a build needs no environment of its own. A value
# already set in the environment wins.
set(WSYNC_SANITIZE "" CACHE STRING
    "Build everything with sanitizers: empty (none), address,undefined (ASan+UBSan) or thread (TSan)")
set_property(CACHE WSYNC_SANITIZE PROPERTY STRINGS "" "address,undefined" "address" "undefined" "thread")

if(WSYNC_SANITIZE STREQUAL "")
  list(APPEND WSYNC_SUMMARY "sanitizers: off (-DWSYNC_SANITIZE=address,undefined or thread)")
  return()
endif()

string(REPLACE "," ";" _wsync_san_list "${WSYNC_SANITIZE}")
foreach(_s IN LISTS _wsync_san_list)
  if(NOT _s MATCHES "^(address|undefined|thread)$")
    message(FATAL_ERROR "WSYNC_SANITIZE='${WSYNC_SANITIZE}': '${_s}' is not one of address, undefined, thread")
  endif()
endforeach()
if("thread" IN_LIST _wsync_san_list AND "address" IN_LIST _wsync_san_list)
  message(FATAL_ERROR "WSYNC_SANITIZE='${WSYNC_SANITIZE}': thread and address cannot be combined; use two build dirs")
endif()

set(_wsync_san_flags -fsanitize=${WSYNC_SANITIZE} -fno-omit-frame-pointer)
if("undefined" IN_LIST _wsync_san_list)
  # GCC leaves float-cast-overflow out of -fsanitize=undefined (clang has it): a double cast to an
  # integer it does not fit is exactly the kind of bug a hostile JSON number causes.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND _wsync_san_flags -fsanitize=float-cast-overflow)
  endif()
  list(APPEND _wsync_san_flags -fno-sanitize-recover=undefined)
endif()

if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC's instrumentation makes -Wmaybe-uninitialized fire inside libstdc++ (std::regex through
  # cpp-httplib): noise, not findings. The normal build keeps the warning.
  list(APPEND _wsync_san_flags -Wno-maybe-uninitialized)
endif()

include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "${_wsync_san_flags}")
string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS}")
set(CMAKE_REQUIRED_LINK_OPTIONS -fsanitize=${WSYNC_SANITIZE})
string(MAKE_C_IDENTIFIER "WSYNC_SANITIZE_WORKS_${WSYNC_SANITIZE}" _wsync_san_var)
check_cxx_source_compiles("int main() { return 0; }" ${_wsync_san_var})
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT ${_wsync_san_var})
  message(FATAL_ERROR "WSYNC_SANITIZE='${WSYNC_SANITIZE}': ${CMAKE_CXX_COMPILER} cannot build and link with "
                      "-fsanitize=${WSYNC_SANITIZE} (install its sanitizer runtimes, e.g. libasan8 libubsan1 libtsan2)")
endif()

add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_wsync_san_flags}>")
add_link_options(-fsanitize=${WSYNC_SANITIZE})

# The environment ctest gives every test of this build.
set(_wsync_supp ${PROJECT_SOURCE_DIR}/tests/sanitizers)
set(_wsync_san_env ${CMAKE_BINARY_DIR}/wsync-sanitizer-env.cmake)
file(WRITE ${_wsync_san_env}
"# Written by cmake/Sanitizers.cmake (WSYNC_SANITIZE=${WSYNC_SANITIZE}); included by ctest before any test runs.
# A variable already set in the environment is left alone.
macro(wsync_default_env name value)
  if(NOT DEFINED ENV{\${name}})
    set(ENV{\${name}} \"\${value}\")
  endif()
endmacro()
# abort_on_error: a finding ends the process with SIGABRT, as a crash: the tests that expect a
# broken plugin to crash (tests/conformance's 'crashy') see one, and no finding passes for exit(1).
# intercept_tls_get_addr=0: up to GCC 13, the runtime's __tls_get_addr interceptor takes a dynamic
# TLS block (the dlopened plugins' and UCX's __thread data) that malloc happens to place 16 bytes
# into a page for a pre-2.25 glibc header, and reads the two words before it as an address and a
# length; LeakSanitizer's tracer then dies at exit ('Tracer caught signal 11', then SIGABRT) after
# a test passed. It failed unit.test_transport_ucx in CI three times, one child in hundreds.
# Without the interceptor those blocks are plain heap chunks, which the leak scan still follows.
wsync_default_env(ASAN_OPTIONS \"detect_leaks=1:abort_on_error=1:halt_on_error=1:strict_string_checks=1:check_initialization_order=1:intercept_tls_get_addr=0\")
wsync_default_env(LSAN_OPTIONS \"suppressions=${_wsync_supp}/lsan.supp:print_suppressions=0\")
wsync_default_env(UBSAN_OPTIONS \"print_stacktrace=1:halt_on_error=1:abort_on_error=1:suppressions=${_wsync_supp}/ubsan.supp\")
wsync_default_env(TSAN_OPTIONS \"halt_on_error=0:second_deadlock_stack=1:suppressions=${_wsync_supp}/tsan.supp:exitcode=66\")
")
if("thread" IN_LIST _wsync_san_list)
  # UCX's memory hooks (libucm) intercept madvise/mmap, also while a thread exits, after TSan has
  # torn down that thread's state: TSan crashes in ucm_event_enter. The hooks only keep UCX's
  # registration cache fresh when memory is unmapped behind its back, which loopback tests never
  # need, so TSan runs turn them off.
  file(APPEND ${_wsync_san_env} "wsync_default_env(UCX_MEM_MMAP_HOOK_MODE none)\nwsync_default_env(UCX_MEM_MALLOC_HOOKS n)\n")
endif()
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES ${_wsync_san_env})

list(APPEND WSYNC_SUMMARY "sanitizers: ${WSYNC_SANITIZE} (every target, with the test environment of wsync-sanitizer-env.cmake)")
