# How other builds find this shmoe: shmoe.pc for pkg-config, and the CMake package, where
# find_package(shmoe) gives shmoe::shmoe and shmoe::shmoe_static. The installed files find their
# prefix from where they lie, so an installed prefix can move. shmoe.pc also has a build-tree
# variant (SHMOE_BUILD_PKGCONFIGDIR), for the build tree's compiler wrappers (tools/wrappers).
include(CMakePackageConfigHelpers)

set(SHMOE_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
set(SHMOE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/shmoe)
set(SHMOE_BUILD_PKGCONFIGDIR ${PROJECT_BINARY_DIR}/pkgconfig)

# The path from <prefix>/<dir> up to <prefix> ("../.."). Where <dir> is absolute, a file placed
# there cannot find the prefix from its own place: the prefix configured now stands in.
function(shmoe_path_up_to_prefix out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${CMAKE_INSTALL_PREFIX}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH up "/prefix/${dir}" "/prefix")
    string(REGEX REPLACE "/$" "" up "${up}")
    set(${out} "${up}" PARENT_SCOPE)
  endif()
endfunction()

# An install directory as a generated file names it: under `prefix_expr`, that file's expression
# for <prefix>, unless the directory is absolute.
function(shmoe_path_in_prefix out prefix_expr dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${prefix_expr}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

# Writes shmoe.pc into `out_dir`. The values may hold generator expressions (the build tree's
# library directory), hence configure_file and then file(GENERATE).
function(shmoe_write_pc variant out_dir prefix includedir libdir)
  string(REPLACE "_" " " SHMOE_PC_VARIANT ${variant})
  set(SHMOE_PC_PREFIX ${prefix})
  set(SHMOE_PC_INCLUDEDIR ${includedir})
  set(SHMOE_PC_LIBDIR ${libdir})
  # The packages the top-level CMakeLists.txt finds for the library's private dependencies.
  set(SHMOE_PC_REQUIRES_PRIVATE "fmt ucx pmix libcrypto")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/shmoe.pc.in
                 ${PROJECT_BINARY_DIR}/cmake/${variant}/shmoe.pc.in @ONLY)
  file(GENERATE OUTPUT ${out_dir}/shmoe.pc INPUT ${PROJECT_BINARY_DIR}/cmake/${variant}/shmoe.pc.in)
endfunction()

shmoe_path_up_to_prefix(pc_up ${SHMOE_INSTALL_PKGCONFIGDIR})
if(IS_ABSOLUTE "${SHMOE_INSTALL_PKGCONFIGDIR}")
  set(pc_prefix "${pc_up}")
else()
  set(pc_prefix "\${pcfiledir}/${pc_up}")
endif()
shmoe_path_in_prefix(pc_includedir "\${prefix}" ${CMAKE_INSTALL_INCLUDEDIR})
shmoe_path_in_prefix(pc_libdir "\${prefix}" ${CMAKE_INSTALL_LIBDIR})
shmoe_write_pc(installed ${PROJECT_BINARY_DIR}/cmake/installed ${pc_prefix} ${pc_includedir}
               ${pc_libdir})
shmoe_write_pc(build_tree ${SHMOE_BUILD_PKGCONFIGDIR} ${PROJECT_BINARY_DIR}
               ${SHMOE_API_INCLUDE_DIR} $<TARGET_LINKER_FILE_DIR:shmoe>)
install(FILES ${PROJECT_BINARY_DIR}/cmake/installed/shmoe.pc
        DESTINATION ${SHMOE_INSTALL_PKGCONFIGDIR})

# The shared library's targets and the archive's go to separate files, so that a consumer that
# lacks the archive's dependencies still gets shmoe::shmoe (see shmoeConfig.cmake.in).
install(EXPORT shmoeTargets NAMESPACE shmoe:: DESTINATION ${SHMOE_INSTALL_CMAKEDIR})
install(EXPORT shmoeStaticTargets NAMESPACE shmoe:: DESTINATION ${SHMOE_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/shmoeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/shmoeConfig.cmake INSTALL_DESTINATION ${SHMOE_INSTALL_CMAKEDIR})
# Until 1.0, a minor version may break what the previous one offered.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/shmoeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/shmoeConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/shmoeConfigVersion.cmake
        DESTINATION ${SHMOE_INSTALL_CMAKEDIR})
