# The peers the pipeline runtime (src/pipe) is compared with, run side by side by
# bench/peers/pipe_peers.py: pipe_omp (OpenMP tasks with depend clauses) always, since OpenMP is
# required anyway, and pipe_tbb (a oneTBB flow graph) only where oneTBB is found (Debian:
# libtbb-dev), so a machine without it still builds everything else. Both go to bench/peers/ in
# the build tree. pipe_omp.c also holds the peers' shared driver: pipe_tbb compiles it again with
# TS_PIPE_PEER_DRIVER_ONLY (no OpenMP runner, no main).
set(ts_pipe_peers_dir ${PROJECT_BINARY_DIR}/bench/peers)

add_executable(pipe_omp ${PROJECT_SOURCE_DIR}/bench/peers/pipe_omp.c)
target_link_libraries(pipe_omp PRIVATE tessera OpenMP::OpenMP_C)
set_target_properties(pipe_omp PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${ts_pipe_peers_dir})

# oneTBB ships a CMake package (TBBConfig.cmake); pkg-config's tbb.pc is the fallback.
set(ts_tbb_lib "")
set(ts_tbb_version "")
find_package(TBB CONFIG QUIET)
if(TBB_FOUND AND TARGET TBB::tbb)
  set(ts_tbb_lib TBB::tbb)
  set(ts_tbb_version ${TBB_VERSION})
else()
  pkg_check_modules(TS_TBB QUIET IMPORTED_TARGET tbb)
  if(TS_TBB_FOUND)
    set(ts_tbb_lib PkgConfig::TS_TBB)
    set(ts_tbb_version ${TS_TBB_VERSION})
  endif()
endif()

if(NOT ts_tbb_lib)
  message(STATUS "tessera: oneTBB not found; pipe_tbb (the flow-graph peer) not built")
  return()
endif()
message(STATUS "tessera: oneTBB ${ts_tbb_version}: building pipe_tbb")

enable_language(CXX)
add_executable(pipe_tbb ${PROJECT_SOURCE_DIR}/bench/peers/pipe_tbb.cpp ${PROJECT_SOURCE_DIR}/bench/peers/pipe_omp.c)
target_compile_definitions(pipe_tbb PRIVATE TS_PIPE_PEER_DRIVER_ONLY)
set_target_properties(pipe_tbb PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
                                          RUNTIME_OUTPUT_DIRECTORY ${ts_pipe_peers_dir})
target_link_libraries(pipe_tbb PRIVATE tessera ${ts_tbb_lib})
# The directory-wide options are written for C; the ones g++ rejects or warns about for C++
# (-Wstrict-prototypes: "valid for C/ObjC but not for C++", an error under -Werror) are kept for the
# target's C source only, everything else (warnings, -Werror, -O3, sanitizers) applies to both.
get_target_property(ts_peer_opts pipe_tbb COMPILE_OPTIONS)
if(ts_peer_opts)
  set(ts_peer_c_only "^-W(no-)?(strict-prototypes|missing-prototypes|old-style-definition|nested-externs|bad-function-cast|declaration-after-statement|implicit-function-declaration|implicit-int|pointer-sign|int-conversion|incompatible-pointer-types|missing-parameter-type|jump-misses-init)$")
  set_property(TARGET pipe_tbb PROPERTY COMPILE_OPTIONS "")
  foreach(o IN LISTS ts_peer_opts)
    if(o MATCHES "${ts_peer_c_only}")
      target_compile_options(pipe_tbb PRIVATE $<$<COMPILE_LANGUAGE:C>:${o}>)
    else()
      target_compile_options(pipe_tbb PRIVATE ${o})
    endif()
  endforeach()
endif()
# Sanitizer builds: oneTBB's own headers fail UBSan's vptr check (graph_task::destruct_and_deallocate
# casts `this` to the derived task type after running its destructor), which would stop every run
# under -fno-sanitize-recover; the rest of UBSan and ASan stay on.
if(TS_SANITIZE)
  target_compile_options(pipe_tbb PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize=vptr>)
endif()
