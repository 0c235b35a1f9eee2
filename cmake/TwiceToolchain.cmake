# Compiler launcher, warnings and sanitizers shared by every Twice target.
find_program(TWICE_CCACHE ccache)
if(TWICE_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER ${TWICE_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TWICE_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${TWICE_CCACHE})
endif()

# Warnings are errors for Twice's own code (generated protobuf code gets the
# same flags; it compiles clean with them). -Werror=unused-result makes an
# ignored [[nodiscard]] absl::Status a build failure.
# TWICE_WERROR=OFF keeps them warnings (the device check does so: it builds
# with whatever compiler a GPU machine has, whose new warnings must not cost
# the run); an ignored status stays an error either way.
option(TWICE_WERROR "Treat compiler warnings in Twice's code as errors" ON)
add_library(twice_warnings INTERFACE)
target_compile_options(twice_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra $<$<BOOL:${TWICE_WERROR}>:-Werror> -Werror=unused-result -Wno-unused-parameter>)

add_library(twice_sanitizers INTERFACE)
if(TWICE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TWICE_FUZZ needs clang (CMAKE_CXX_COMPILER=clang++)")
  endif()
  # Coverage and sanitizers in every Twice library; tests/fuzz links libFuzzer.
  # Instrumented loops may not vectorise (`omp simd` must not fail the build)
  # and gcc is the compiler that enforces warnings: clang reports its own
  # extra ones (e.g. unused private fields) without failing.
  target_compile_options(twice_sanitizers INTERFACE
    "$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined;-gline-tables-only;-Wno-pass-failed;-Wno-error>")
  target_link_options(twice_sanitizers INTERFACE -fsanitize=address,undefined)
elseif(TWICE_SANITIZE)
  # GCC's flow analysis sees ASan's instrumentation and reports false
  # -Wmaybe-uninitialized inside libstdc++ (std::regex's std::function);
  # the same code builds clean without sanitizers, where the warning stays.
  target_compile_options(twice_sanitizers INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -Wno-maybe-uninitialized>)
  target_link_options(twice_sanitizers INTERFACE -fsanitize=address,undefined)
endif()

# Every Twice library and executable links this.
add_library(twice_build_flags INTERFACE)
target_link_libraries(twice_build_flags INTERFACE twice_warnings twice_sanitizers)
target_include_directories(twice_build_flags INTERFACE ${PROJECT_SOURCE_DIR})

# twice_unity(target [source ...]): compile `target`'s sources in unity
# batches when TWICE_UNITY_BUILD is ON; the named sources stay alone (they
# keep file-private helpers whose names other files of the batch reuse).
function(twice_unity target)
  if(NOT TWICE_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  if(ARGN)
    set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target}
                                PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
endfunction()
