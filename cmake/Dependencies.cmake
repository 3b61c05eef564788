# Finds the optional and required dependencies and records, for the configure summary, what
# will be built and why not.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
set(WSYNC_SUMMARY "")

# -Wl,--exclude-libs,ALL keeps the symbols of static archives out of a library's exports; the
# version scripts (src/libwsync.map, plugins/common/plugin.map) already do, and zig's linker (the
# portable wheel's, scripts/wheel.sh) has no such flag, so it is added only where the linker takes it.
set(WSYNC_EXCLUDE_LIBS -Wl,--exclude-libs,ALL)
if(NOT CMAKE_VERSION VERSION_LESS 3.18)
  include(CheckLinkerFlag)
  check_linker_flag(C "-Wl,--exclude-libs,ALL" WSYNC_LINKER_HAS_EXCLUDE_LIBS)
  if(NOT WSYNC_LINKER_HAS_EXCLUDE_LIBS)
    set(WSYNC_EXCLUDE_LIBS "")
  endif()
endif()

# xxHash: manifest and payload checksums (required).
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# libcrypto (OpenSSL 3 or 1.1, HMAC-SHA-256 for the group secret) and libcurl (the HTTP engine
# adapters' requests) are not linked: the core and the tcp plugin load the system's copy at run
# time (src/common/auth.cpp, src/http/curl_library.cpp), so nothing needs them to load and the
# portable wheel carries neither. Only curl's headers are needed to build (its types and options).

# resolve AUTO|ON|OFF: wsync_resolve(<var> <found> <what> <why-not>)
function(wsync_resolve var found what whynot)
  set(mode ${${var}})
  string(TOUPPER "${mode}" mode)
  if(mode STREQUAL "OFF")
    set(${var}_ENABLED OFF PARENT_SCOPE)
    list(APPEND WSYNC_SUMMARY "${what}: no (${var}=OFF)")
  elseif(found)
    set(${var}_ENABLED ON PARENT_SCOPE)
    list(APPEND WSYNC_SUMMARY "${what}: yes")
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "${var}=ON but ${whynot}")
  else()
    set(${var}_ENABLED OFF PARENT_SCOPE)
    list(APPEND WSYNC_SUMMARY "${what}: no (${whynot})")
  endif()
  set(WSYNC_SUMMARY "${WSYNC_SUMMARY}" PARENT_SCOPE)
endfunction()

list(APPEND WSYNC_SUMMARY "adapter native (plugins/adapter_native): yes (no dependency)")
pkg_check_modules(UCX IMPORTED_TARGET ucx)
wsync_resolve(WSYNC_WITH_UCX "${UCX_FOUND}" "transport ucx (plugins/transport_ucx)"
              "UCX was not found by pkg-config (Debian: apt-get install libucx-dev)")

find_package(CUDAToolkit QUIET)
wsync_resolve(WSYNC_WITH_CUDA "${CUDAToolkit_FOUND}" "transport cuda_ipc (plugins/transport_cuda_ipc)"
              "the CUDA toolkit was not found (set CUDAToolkit_ROOT)")

set(_nccl_found OFF)
if(CUDAToolkit_FOUND)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found ON)
  endif()
endif()
wsync_resolve(WSYNC_WITH_NCCL "${_nccl_found}" "transport nccl (plugins/transport_nccl)"
              "nccl.h/libnccl were not found beside the CUDA toolkit (set NCCL_INCLUDE_DIR and NCCL_LIBRARY)")
if(WSYNC_WITH_NCCL_ENABLED)
  get_filename_component(NCCL_LIBRARY_DIR "${NCCL_LIBRARY}" DIRECTORY)
endif()

# HTTP engines: libcurl's headers and cJSON in the core (required: the core sends the adapters'
# requests), cpp-httplib for the reference engine and the tests' HTTP servers (optional).
pkg_check_modules(CURL REQUIRED libcurl)
add_library(wsync_curl_headers INTERFACE)
target_include_directories(wsync_curl_headers INTERFACE ${CURL_INCLUDE_DIRS})
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
if(HTTPLIB_FOUND)
  list(APPEND WSYNC_SUMMARY "reference engine (tests/reference_engine, cpp-httplib): yes")
else()
  list(APPEND WSYNC_SUMMARY "reference engine (tests/reference_engine): no (Debian: apt-get install libcpp-httplib-dev)")
endif()

find_program(UCX_PERFTEST ucx_perftest)
if(UCX_PERFTEST)
  list(APPEND WSYNC_SUMMARY "bench baseline ucx_perftest: ${UCX_PERFTEST}")
else()
  list(APPEND WSYNC_SUMMARY "bench baseline ucx_perftest: not found (Debian: ucx-utils)")
endif()
