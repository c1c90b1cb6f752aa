# `cmake --install`: the libraries, the public headers under
# include/optpipe/<layer>/, the command line, and the package files:
# find_package(optpipe) (optpipeConfig.cmake, imported targets optpipe::optpipe
# and one per layer) and pkg-config (optpipe.pc).
include(CMakePackageConfigHelpers)

set(OPTPIPE_LIBRARIES optpipe_core optpipe_planner optpipe_heuristics optpipe_exact optpipe_solve
                      optpipe_online optpipe_runtime)
install(TARGETS ${OPTPIPE_LIBRARIES} optpipe_all EXPORT optpipeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET optpipe)
  install(TARGETS optpipe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Every header but the internal ones, which include third-party headers or
# expose a library's insides.
set(internal core/json_parse.h heuristics/scorer.h exact/model_internal.h exact/sat_encoding.h
             exact/solve_internal.h exact/solve_log.h
             online/sqlite_db.h online/cache_impl.h runtime/executor_internal.h
             runtime/copy_pieces.h runtime/cuda_spin.h)
foreach(dir core core/planner heuristics exact online runtime)
  file(GLOB headers RELATIVE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/${dir}/*.h)
  list(REMOVE_ITEM headers ${internal})
  foreach(h ${headers})
    get_filename_component(sub ${h} DIRECTORY)
    install(FILES ${PROJECT_SOURCE_DIR}/${h}
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/optpipe/${sub})
  endforeach()
endforeach()

set(OPTPIPE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/optpipe)
install(EXPORT optpipeTargets NAMESPACE optpipe:: DESTINATION ${OPTPIPE_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/optpipeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/optpipeConfig.cmake
                              INSTALL_DESTINATION ${OPTPIPE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/optpipeConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/optpipeConfig.cmake
              ${PROJECT_BINARY_DIR}/optpipeConfigVersion.cmake
        DESTINATION ${OPTPIPE_CMAKE_DIR})

# pkg-config: static archives, so Libs lists what they need in link order.
set(OPTPIPE_PC_LIBS "-loptpipe_online -loptpipe_solve -loptpipe_planner -loptpipe_heuristics")
string(APPEND OPTPIPE_PC_LIBS " -loptpipe_exact -loptpipe_runtime -loptpipe_core -ltbb -lsqlite3")
if(OPTPIPE_WITH_EXACT)
  string(APPEND OPTPIPE_PC_LIBS " -llpsolve55 -lcolamd -lcadical -ldl")
endif()
if(OPTPIPE_RUNTIME_CUDA)
  string(APPEND OPTPIPE_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lnccl")
endif()
if(OPTPIPE_RUNTIME_MPI)
  find_package(MPI COMPONENTS CXX)
  list(JOIN MPI_CXX_LIBRARIES " " mpi_libraries)
  string(APPEND OPTPIPE_PC_LIBS " ${mpi_libraries}")
endif()
string(APPEND OPTPIPE_PC_LIBS " -lpthread -lm")
configure_file(${CMAKE_CURRENT_LIST_DIR}/optpipe.pc.in ${PROJECT_BINARY_DIR}/optpipe.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/optpipe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
