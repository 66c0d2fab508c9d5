# CUDA attention kernels (src/cuda): included by CMakeLists.txt only when TS_CUDA is ON, nvcc exists
# and src/cuda/*.cu exist. Builds the static library ts_cuda (kernels + C host API), the test
# tests/cuda/test_attn_cuda.c (skips at run time without a device) and bench/cuda/bench_attn_cuda.c.
# The directory-wide C warning flags are not nvcc flags: ts_cuda applies them to its C sources only
# and passes the host-compiler equivalents to nvcc through -Xcompiler.
if(NOT DEFINED CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER ${NVCC})
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100, H100/H200
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "tessera: nvcc found but CUDA is not usable by CMake; CUDA kernels not built")
  return()
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

enable_language(CXX)  # the test runs the kernels' device code on CPU fibers (tests/cuda/emu_kernels.cpp)

# Keeps the directory-wide options (C flags) for C sources only; nvcc and g++ get their own.
function(ts_cuda_c_only_options target)
  get_target_property(dir_opts ${target} COMPILE_OPTIONS)
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "")
  foreach(o IN LISTS dir_opts)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${o}>)
  endforeach()
  set(cxx_warn -Wall -Wextra -Wshadow -Wno-unused-parameter)
  if(TS_WERROR)
    list(APPEND cxx_warn -Werror)
  endif()
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${cxx_warn}>")
endfunction()

file(GLOB ts_cuda_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu ${PROJECT_SOURCE_DIR}/src/cuda/*.c)
add_library(ts_cuda STATIC ${ts_cuda_srcs})
ts_cuda_c_only_options(ts_cuda)
set(ts_cuda_host_warn "-Wall,-Wextra,-Wshadow,-Wno-unused-parameter")
if(TS_WERROR)
  string(APPEND ts_cuda_host_warn ",-Werror")
  target_compile_options(ts_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
endif()
target_compile_options(ts_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${ts_cuda_host_warn}>
                                       $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<CONFIG:Release>>:-O3>)
target_include_directories(ts_cuda PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(ts_cuda PUBLIC ts_attn CUDA::cudart_static)
set_target_properties(ts_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON)

# Test (kept out of the tests/test_*.c glob: it exists only in CUDA builds).
add_executable(test_attn_cuda ${PROJECT_SOURCE_DIR}/tests/cuda/test_attn_cuda.c ${PROJECT_SOURCE_DIR}/tests/cuda/emu_kernels.cpp)
ts_cuda_c_only_options(test_attn_cuda)
set_target_properties(test_attn_cuda PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_include_directories(test_attn_cuda PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(test_attn_cuda PRIVATE ts_cuda tessera)
set_target_properties(test_attn_cuda PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
add_test(NAME test_attn_cuda COMMAND test_attn_cuda WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(test_attn_cuda PROPERTIES ENVIRONMENT "TESSERA_CACHE=${PROJECT_BINARY_DIR}/test-cache" SKIP_RETURN_CODE 77)

# Benchmark.
add_executable(bench_attn_cuda ${PROJECT_SOURCE_DIR}/bench/cuda/bench_attn_cuda.c)
target_include_directories(bench_attn_cuda PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/bench)
target_link_libraries(bench_attn_cuda PRIVATE ts_cuda tessera ts_bench)
set_target_properties(bench_attn_cuda PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
include(${PROJECT_SOURCE_DIR}/cmake/pipe_cuda.cmake OPTIONAL)
include(${PROJECT_SOURCE_DIR}/cmake/hybrid_cuda.cmake OPTIONAL)
