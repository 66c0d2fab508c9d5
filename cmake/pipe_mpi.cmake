# The pipeline runtime's MPI variant (tools/pipe_mpi): included by CMakeLists.txt; builds only where
# an MPI with a C binding is found (Debian: openmpi-bin + libopenmpi-dev). Builds tessera-pipe-mpi
# and the CTest cli_pipe_mpi, which runs tests/pipe_mpi_check.sh under mpirun (2 and 3 ranks, every
# app, --check). The script is named outside the tests/cli_*.sh glob on purpose: that glob passes
# the tessera CLI, this test needs the MPI program.
find_package(MPI COMPONENTS C QUIET)
if(NOT MPI_C_FOUND)
  message(STATUS "tessera: no MPI (C) found; tessera-pipe-mpi not built")
  return()
endif()

add_executable(tessera-pipe-mpi ${PROJECT_SOURCE_DIR}/tools/pipe_mpi/pipe_mpi.c)
set_target_properties(tessera-pipe-mpi PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
target_link_libraries(tessera-pipe-mpi PRIVATE tessera MPI::MPI_C)

# mpiexec as FindMPI found it (mpirun on Debian); the script skips (77) when it cannot start ranks
set(ts_mpiexec ${MPIEXEC_EXECUTABLE})
if(NOT ts_mpiexec)
  set(ts_mpiexec mpirun)
endif()
add_test(NAME cli_pipe_mpi
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/pipe_mpi_check.sh $<TARGET_FILE:tessera-pipe-mpi> ${ts_mpiexec}
         WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(cli_pipe_mpi PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                                             ENVIRONMENT "TESSERA_CACHE=${PROJECT_BINARY_DIR}/test-cache")
