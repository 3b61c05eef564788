# cmake --install lays down: the headers, libwsync.so.<abi major>, the plugins in <libdir>/wsync,
# a CMake package (find_package(wsync) -> wsync::wsync) and wsync.pc.
# The Python wheel (WSYNC_PYTHON_WHEEL, see pyproject.toml) takes only the library and the plugins.
include(CMakePackageConfigHelpers)

# The build tree's own wsync.pc (build/pkgconfig), for the Rust and Go bindings' tests and samples.
configure_file(${PROJECT_SOURCE_DIR}/cmake/wsync-build.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/wsync.pc @ONLY)

if(WSYNC_PYTHON_WHEEL)  # one file under its soname: a wheel holds no symlinks
  install(FILES $<TARGET_FILE:wsync> DESTINATION ${CMAKE_INSTALL_LIBDIR} RENAME libwsync.so.${WSYNC_ABI_MAJOR})
  return()
endif()

install(TARGETS wsync EXPORT wsyncTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/wsync.h ${PROJECT_SOURCE_DIR}/include/wsync_plugin.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT wsyncTargets NAMESPACE wsync:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wsync)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wsyncConfig.cmake.in
  ${CMAKE_BINARY_DIR}/wsyncConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wsync)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/wsyncConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/wsyncConfig.cmake ${CMAKE_BINARY_DIR}/wsyncConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wsync)

# wsync.pc finds its prefix relative to itself, whatever the libdir depth.
file(RELATIVE_PATH WSYNC_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/wsync.pc.in ${CMAKE_BINARY_DIR}/wsync.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/wsync.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
