# The pipeline runtime's CUDA executor (src/cuda/pipe_*.c, pipe_cuda.cu, pipe_exec.cuh): its sources
# join ts_cuda through cuda.cmake's glob; this file adds what only it needs, and is included at the
# end of cuda.cmake (after ts_cuda and ts_cuda_c_only_options exist).
#   - --fmad=false for pipe_cuda.cu only: its stage kernels must round like the C kernels (ISO C,
#     no FP contraction) to be bit-identical; the attention kernels keep their FMAs.
#   - the test tests/cuda/test_pipe_cuda.c with tests/cuda/pipe_emu.cpp, which runs the device
#     executor on CPU threads and fibers (no GPU needed); -ffp-contract=off there for the same reason.
if(NOT TARGET ts_cuda)
  return()
endif()

set_source_files_properties(${PROJECT_SOURCE_DIR}/src/cuda/pipe_cuda.cu PROPERTIES COMPILE_OPTIONS "--fmad=false")
target_link_libraries(ts_cuda PUBLIC ts_pipe)

add_executable(test_pipe_cuda ${PROJECT_SOURCE_DIR}/tests/cuda/test_pipe_cuda.c ${PROJECT_SOURCE_DIR}/tests/cuda/pipe_emu.cpp)
ts_cuda_c_only_options(test_pipe_cuda)
set_source_files_properties(${PROJECT_SOURCE_DIR}/tests/cuda/pipe_emu.cpp PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
set_target_properties(test_pipe_cuda PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_include_directories(test_pipe_cuda PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(test_pipe_cuda PRIVATE ts_cuda tessera Threads::Threads)
set_target_properties(test_pipe_cuda PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
add_test(NAME test_pipe_cuda COMMAND test_pipe_cuda WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(test_pipe_cuda PROPERTIES SKIP_RETURN_CODE 77)

# Benchmark: the GPU executor against the CPU runtime (prints {"skipped": ...} without a device).
add_executable(bench_pipe_cuda ${PROJECT_SOURCE_DIR}/bench/cuda/bench_pipe_cuda.c)
target_include_directories(bench_pipe_cuda PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/bench)
target_link_libraries(bench_pipe_cuda PRIVATE ts_cuda tessera ts_bench)
set_target_properties(bench_pipe_cuda PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
