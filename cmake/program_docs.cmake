# Generates what is made from the built program's own words, so it cannot go stale:
#   MODE=completion: OUTPUT_DIR/gpudoctor (bash) and OUTPUT_DIR/_gpudoctor (zsh), from `gpudoctor __completion`;
#   MODE=man:        OUTPUT_DIR/man1/*.1.gz, with help2man from `gpudoctor --help`, `gpudoctor COMMAND --help` for
#                    every command that --help lists, and `gpudoctor-probe --help`.
#   cmake -DMODE=man -DPROGRAM=bin/gpudoctor -DPROBE=bin/gpudoctor-probe -DHELP2MAN=/usr/bin/help2man
#         -DVERSION=0.1.0 -DEPOCH=1700000000 -DOUTPUT_DIR=out -P program_docs.cmake
# EPOCH (may be empty) dates the man pages, for builds that are the same each time. The program runs with
# leak detection off, as a sanitizer build's would report the process's still-reachable memory.
set(ENV{ASAN_OPTIONS} detect_leaks=0)
set(ENV{LC_ALL} C.UTF-8)

function(run_to_file output)
  execute_process(COMMAND ${ARGN} OUTPUT_FILE ${output}.tmp RESULT_VARIABLE status ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${status}): ${errors}")
  endif()
  file(RENAME ${output}.tmp ${output})
endfunction()

if(MODE STREQUAL "completion")
  file(MAKE_DIRECTORY ${OUTPUT_DIR})
  run_to_file(${OUTPUT_DIR}/gpudoctor ${PROGRAM} __completion bash)
  run_to_file(${OUTPUT_DIR}/_gpudoctor ${PROGRAM} __completion zsh)
  return()
endif()

if(NOT MODE STREQUAL "man")
  message(FATAL_ERROR "MODE must be completion or man")
endif()
if(NOT EPOCH STREQUAL "")
  set(ENV{SOURCE_DATE_EPOCH} ${EPOCH})  # help2man dates the page from it
endif()
set(man_dir ${OUTPUT_DIR}/man1)
file(REMOVE_RECURSE ${man_dir} ${OUTPUT_DIR}/wrappers)
file(MAKE_DIRECTORY ${man_dir} ${OUTPUT_DIR}/wrappers)

# The commands: the "Subcommands:" section of --help, a "  NAME  description" line each.
execute_process(COMMAND ${PROGRAM} --help OUTPUT_VARIABLE help RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --help failed (${status})")
endif()
string(REGEX MATCH "\nSubcommands:\n([^\n]+\n)+" section "${help}")
string(REGEX MATCHALL "\n  [a-z][a-z0-9-]*  +[^\n]*" lines "${section}")
if(NOT lines)
  message(FATAL_ERROR "no commands in `${PROGRAM} --help`")
endif()

# page(NAME DESCRIPTION RUN SEE_ALSO): NAME.1.gz from `RUN --help`, RUN being a program or a wrapper script.
function(page name description run see_also)
  file(WRITE ${OUTPUT_DIR}/wrappers/${name}.h2m "[SEE ALSO]\n${see_also}\n")
  execute_process(
    COMMAND ${HELP2MAN} --no-info --section=1 --source=gpudoctor --version-string=${VERSION}
            "--name=${description}" --include=${OUTPUT_DIR}/wrappers/${name}.h2m --output=${man_dir}/${name}.1 ${run}
    RESULT_VARIABLE status ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "help2man ${name} failed (${status}): ${errors}")
  endif()
  execute_process(COMMAND gzip -9nf ${man_dir}/${name}.1 RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "gzip ${name}.1 failed")
  endif()
endfunction()

set(docs "/usr/share/doc/gpudoctor/README.md and docs/ beside it; docs/exit-codes.md for the exit statuses.")
set(command_pages "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^\n  ([a-z][a-z0-9-]*)  +.*$" "\\1" command "${line}")
  string(REGEX REPLACE "^\n  [a-z][a-z0-9-]*  +(.*)$" "\\1" description "${line}")
  # help2man names the page after the program it runs: a wrapper named gpudoctor-COMMAND runs the command.
  set(wrapper ${OUTPUT_DIR}/wrappers/gpudoctor-${command})
  file(WRITE ${wrapper} "#!/bin/sh\nexec '${PROGRAM}' ${command} \"$@\"\n")
  file(CHMOD ${wrapper} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ)
  page(gpudoctor-${command} "${description}" ${wrapper} ".BR gpudoctor (1)\n.PP\n${docs}")
  string(APPEND command_pages ".BR gpudoctor-${command} (1)\n")
endforeach()
page(gpudoctor "find GPU server problems early, explain them, and say what to do" ${PROGRAM}
     "${command_pages}.BR gpudoctor-probe (1)\n.PP\n${docs}")
page(gpudoctor-probe "the NVML probe gpudoctor runs" ${PROBE} ".BR gpudoctor (1)")
