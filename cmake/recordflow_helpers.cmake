# Helpers for CMakeLists.txt: layer libraries, the layering link check, fuzz targets.

set(RF_LAYERS "")
set(RF_LAYER_TARGETS "")

# rf_add_layer(<layer> [DEPS <layer>...])
# Static library recordflow_<layer> (alias recordflow::<layer>, exported as recordflow::<layer>)
# from src/recordflow/<layer>/*.cc without the *_test.cc files, linked PUBLIC to the layers it
# builds on (their headers appear in its public headers).
function(rf_add_layer layer)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "DEPS")
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/recordflow/${layer}/*.cc)
  list(FILTER sources EXCLUDE REGEX "_test\\.cc$")
  set(target recordflow_${layer})
  add_library(${target} STATIC ${sources})
  add_library(recordflow::${layer} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${target} PRIVATE ${RF_WARNINGS})
  foreach(dep IN LISTS ARG_DEPS)
    if(NOT dep IN_LIST RF_LAYERS)
      message(FATAL_ERROR "recordflow: layer ${layer} depends on ${dep}, which is not a layer "
                          "declared before it")
    endif()
    target_link_libraries(${target} PUBLIC recordflow_${dep})
  endforeach()
  set(RF_LAYER_DEPS_${layer} ${ARG_DEPS} PARENT_SCOPE)
  set(RF_LAYERS ${RF_LAYERS} ${layer} PARENT_SCOPE)
  set(RF_LAYER_TARGETS ${RF_LAYER_TARGETS} ${target} PARENT_SCOPE)
endfunction()

# rf_check_layer(<layer>)
# A shared library made of the whole of recordflow_<layer> and nothing but its declared
# dependencies, linked with --no-undefined: a call from the layer into a layer it does not
# declare (format calling the image codecs, say) is an undefined symbol and fails the build.
function(rf_check_layer layer)
  if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux" OR RF_SANITIZE OR CMAKE_VERSION VERSION_LESS 3.24)
    return()  # sanitizer runtimes leave their own symbols to the executable
  endif()
  set(check rf_layer_check_${layer})
  add_library(${check} SHARED ${PROJECT_SOURCE_DIR}/cmake/layer_check.cc)
  target_link_libraries(${check} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,recordflow_${layer}>")
  target_link_options(${check} PRIVATE "LINKER:--no-undefined")
endfunction()

# rf_add_fuzzer(<name> LINK <target> [INTERNAL])
# fuzz/<name>_fuzzer.cc becomes, with RF_BUILD_TESTS, <name>_fuzz_replay (every file of
# fuzz/corpus/<name> run once, the test fuzz_replay.<name>) and, with RF_BUILD_FUZZERS, the
# libFuzzer binary <name>_fuzzer. INTERNAL: the target includes private headers from src/.
function(rf_add_fuzzer name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "INTERNAL" "LINK" "")
  set(source ${PROJECT_SOURCE_DIR}/fuzz/${name}_fuzzer.cc)
  set(targets "")
  if(RF_BUILD_TESTS)
    add_executable(${name}_fuzz_replay ${source} ${PROJECT_SOURCE_DIR}/fuzz/replay_main.cc)
    add_test(NAME fuzz_replay.${name}
             COMMAND ${name}_fuzz_replay ${PROJECT_SOURCE_DIR}/fuzz/corpus/${name})
    list(APPEND targets ${name}_fuzz_replay)
  endif()
  if(RF_BUILD_FUZZERS)
    add_executable(${name}_fuzzer ${source})
    target_compile_options(${name}_fuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${name}_fuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
    list(APPEND targets ${name}_fuzzer)
  endif()
  foreach(target IN LISTS targets)
    target_link_libraries(${target} PRIVATE ${ARG_LINK})
    if(ARG_INTERNAL)
      target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    endif()
  endforeach()
endfunction()
