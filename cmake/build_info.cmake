# What a build is, fixed at configure time and compiled into src/common/build_info.cc's data: the version
# (GPUDOCTOR_VERSION, default the project's), the git commit, the build date, the compiler and the build type.
#
# The date is never the clock, so two builds of one commit are the same: SOURCE_DATE_EPOCH when set, else the
# commit's date, else "unknown". Sets GPUDOCTOR_BUILD_EPOCH (seconds, empty when unknown) for other dated outputs
# (man pages, the Debian changelog).

set(GPUDOCTOR_VERSION "" CACHE STRING "Version the programs and the package carry (empty: the project's)")
if(GPUDOCTOR_VERSION STREQUAL "")
  set(GPUDOCTOR_EFFECTIVE_VERSION ${PROJECT_VERSION})
else()
  set(GPUDOCTOR_EFFECTIVE_VERSION ${GPUDOCTOR_VERSION})
endif()
if(NOT GPUDOCTOR_EFFECTIVE_VERSION MATCHES "^[0-9][0-9A-Za-z.+~]*$")
  message(FATAL_ERROR "GPUDOCTOR_VERSION '${GPUDOCTOR_VERSION}' is not a Debian upstream version (digits first, "
                      "then letters, digits, . + ~)")
endif()

set(GPUDOCTOR_GIT_COMMIT unknown)
set(commit_epoch "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -c safe.directory=* -C ${PROJECT_SOURCE_DIR} log -1 --format=%H%n%ct
                  OUTPUT_VARIABLE git_out ERROR_QUIET RESULT_VARIABLE git_status OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(git_status EQUAL 0 AND git_out MATCHES "^([0-9a-f]+)\n([0-9]+)$")
    set(GPUDOCTOR_GIT_COMMIT ${CMAKE_MATCH_1})
    set(commit_epoch ${CMAKE_MATCH_2})
  endif()
endif()

if(DEFINED ENV{SOURCE_DATE_EPOCH} AND "$ENV{SOURCE_DATE_EPOCH}" MATCHES "^[0-9]+$")
  set(GPUDOCTOR_BUILD_EPOCH $ENV{SOURCE_DATE_EPOCH})
else()
  set(GPUDOCTOR_BUILD_EPOCH ${commit_epoch})
endif()

# string(TIMESTAMP) formats SOURCE_DATE_EPOCH when it is set: set it to the chosen epoch for the call.
# gpudoctor_format_build_epoch(VAR FORMAT): the build date in FORMAT (UTC), or "unknown".
function(gpudoctor_format_build_epoch variable format)
  if(GPUDOCTOR_BUILD_EPOCH STREQUAL "")
    set(${variable} unknown PARENT_SCOPE)
    return()
  endif()
  set(saved "$ENV{SOURCE_DATE_EPOCH}")
  set(ENV{SOURCE_DATE_EPOCH} ${GPUDOCTOR_BUILD_EPOCH})
  string(TIMESTAMP formatted "${format}" UTC)
  set(ENV{SOURCE_DATE_EPOCH} "${saved}")
  set(${variable} "${formatted}" PARENT_SCOPE)
endfunction()
gpudoctor_format_build_epoch(GPUDOCTOR_BUILD_DATE "%Y-%m-%dT%H:%M:%SZ")

set(GPUDOCTOR_COMPILER "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
set(GPUDOCTOR_BUILD_TYPE "${CMAKE_BUILD_TYPE}")
if(GPUDOCTOR_SANITIZE)
  string(APPEND GPUDOCTOR_BUILD_TYPE " +ASan +UBSan")
endif()
if(GPUDOCTOR_FUZZ)
  string(APPEND GPUDOCTOR_BUILD_TYPE " +libFuzzer")
endif()

# The compiler of the diag kernels, when src/diag finds one (it sets GPUDOCTOR_CUDA_CLANG).
find_program(GPUDOCTOR_CUDA_CLANG NAMES clang-16 DOC "clang that compiles the diag kernels to PTX")
set(GPUDOCTOR_KERNEL_COMPILER "")
if(GPUDOCTOR_CUDA_CLANG)
  execute_process(COMMAND ${GPUDOCTOR_CUDA_CLANG} --version OUTPUT_VARIABLE clang_out ERROR_QUIET)
  if(clang_out MATCHES "clang version ([0-9][0-9.]*)")
    set(GPUDOCTOR_KERNEL_COMPILER "clang ${CMAKE_MATCH_1}")
  else()
    set(GPUDOCTOR_KERNEL_COMPILER "clang")
  endif()
endif()

configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info_data.cc.in ${CMAKE_BINARY_DIR}/generated/build_info_data.cc
               @ONLY)
message(STATUS "gpudoctor ${GPUDOCTOR_EFFECTIVE_VERSION}, commit ${GPUDOCTOR_GIT_COMMIT}, "
               "built ${GPUDOCTOR_BUILD_DATE}")
