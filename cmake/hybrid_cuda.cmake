# The hybrid room's device probe (bench/cuda/hybrid_probe.cu): measures the device model's curves on a
# real GPU for scripts/gpu-check.sh; built wherever the CUDA kernels are (cmake/cuda.cmake includes
# this file), run only on a machine with a GPU.
add_executable(hybrid_probe ${PROJECT_SOURCE_DIR}/bench/cuda/hybrid_probe.cu)
ts_cuda_c_only_options(hybrid_probe)
target_link_libraries(hybrid_probe PRIVATE CUDA::cudart_static)
set_target_properties(hybrid_probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
set(ts_hybrid_probe_warn "-Wall,-Wextra,-Wshadow")
if(TS_WERROR)
  string(APPEND ts_hybrid_probe_warn ",-Werror")
  target_compile_options(hybrid_probe PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
endif()
target_compile_options(hybrid_probe PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${ts_hybrid_probe_warn}> $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<CONFIG:Release>>:-O3>)
