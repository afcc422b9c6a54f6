# Everything installed beyond the programs and modules, and the Debian package made of it all.
#
#   cmake -S . -B build-pkg -G Ninja -DCMAKE_INSTALL_PREFIX=/usr && cmake --build build-pkg --target package
#     -> gpudoctor_VERSION_amd64.deb (stripped) and gpudoctor-dbgsym_VERSION_amd64.ddeb (its debug symbols)
#
# The package: programs in /usr/bin, modules and the preload library in /usr/lib/gpudoctor, the agent's unit in
# /lib/systemd/system, a default config that sets nothing in /etc/gpudoctor/config.toml (a conffile), README,
# docs, examples and deploy files in /usr/share/doc/gpudoctor, man pages and bash and zsh completion generated
# from the program itself. Its dependencies are computed from the binaries (dpkg-shlibdeps). Its maintainer
# scripts (packaging/deb/) enable and start the agent; purging deletes the agent's history, removing keeps it.
# scripts/package-check.sh builds, lints, installs, upgrades, removes and purges it in a fresh Debian 12.

# The maintainer is whoever builds the package: DEBFULLNAME and DEBEMAIL as Debian's tools read them, else the
# author of the commit built; without either, `--target package` stops (CPack wants one) until
# -DGPUDOCTOR_PACKAGE_MAINTAINER="Name <address>" names one.
if(NOT GPUDOCTOR_PACKAGE_MAINTAINER)
  set(maintainer "")
  if(NOT "$ENV{DEBFULLNAME}" STREQUAL "" AND "$ENV{DEBEMAIL}" MATCHES "@")
    set(maintainer "$ENV{DEBFULLNAME} <$ENV{DEBEMAIL}>")
  elseif(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} -c safe.directory=* -C ${PROJECT_SOURCE_DIR} log -1 "--format=%an <%ae>"
                    OUTPUT_VARIABLE maintainer ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(NOT maintainer MATCHES "^[^<>]+ <[^<>@ ]+@[^<>@ ]+>$")
    set(maintainer "")
  endif()
  set(GPUDOCTOR_PACKAGE_MAINTAINER "${maintainer}" CACHE STRING
      "Maintainer field of the Debian package and its changelog's signature")
endif()
set(packaging_dir ${PROJECT_SOURCE_DIR}/packaging/deb)
set(generated_dir ${CMAKE_BINARY_DIR}/packaging)
set(document_permissions OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# /etc and /lib/systemd/system for an install under /usr (the package), under the prefix otherwise, so that
# `cmake --install BUILD --prefix DIR` writes only in DIR. Decided at install time, as --prefix may change it.
# gpudoctor_install_system_file(SOURCE DIRECTORY NAME): SOURCE as DIRECTORY/NAME, "/usr/bin/" in it replaced by
# the prefix's bin/ folder.
function(gpudoctor_install_system_file source directory name)
  install(CODE "
    set(root \"\${CMAKE_INSTALL_PREFIX}\")
    if(root STREQUAL \"/usr\")
      set(root \"\")
    endif()
    file(READ \"${source}\" text)
    string(REPLACE \"/usr/bin/\" \"\${CMAKE_INSTALL_PREFIX}/bin/\" text \"\${text}\")
    file(WRITE \"${generated_dir}/install/${name}\" \"\${text}\")
    file(INSTALL DESTINATION \"\${root}${directory}\" TYPE FILE PERMISSIONS ${document_permissions}
         FILES \"${generated_dir}/install/${name}\")")
endfunction()
gpudoctor_install_system_file(${PROJECT_SOURCE_DIR}/deploy/gpudoctor-agent.service /lib/systemd/system
                              gpudoctor-agent.service)
gpudoctor_install_system_file(${PROJECT_SOURCE_DIR}/deploy/config.toml /etc/gpudoctor config.toml)

# Documentation, with the layout of the source tree so that README's and the docs' links hold.
install(FILES README.md DESTINATION share/doc/gpudoctor PERMISSIONS ${document_permissions})
# lintian's tags that are wrong about this package, each with its reason.
install(FILES ${packaging_dir}/lintian-overrides DESTINATION share/lintian/overrides RENAME gpudoctor
        PERMISSIONS ${document_permissions})
foreach(folder docs examples deploy)
  install(DIRECTORY ${folder}/ DESTINATION share/doc/gpudoctor/${folder} FILE_PERMISSIONS ${document_permissions}
          DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()

gpudoctor_format_build_epoch(GPUDOCTOR_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000")
if(GPUDOCTOR_CHANGELOG_DATE STREQUAL "unknown")
  set(GPUDOCTOR_CHANGELOG_DATE "Thu, 01 Jan 1970 00:00:00 +0000")
endif()
configure_file(${packaging_dir}/changelog.in ${generated_dir}/changelog @ONLY)
configure_file(${packaging_dir}/copyright.in ${generated_dir}/copyright @ONLY)
file(READ ${PROJECT_SOURCE_DIR}/web/dist/third-party-licenses.txt third_party_licenses)
file(APPEND ${generated_dir}/copyright "${third_party_licenses}")
add_custom_command(OUTPUT ${generated_dir}/changelog.gz
                   COMMAND gzip -9nc ${generated_dir}/changelog > ${generated_dir}/changelog.gz
                   DEPENDS ${generated_dir}/changelog)
add_custom_target(gpudoctor_changelog ALL DEPENDS ${generated_dir}/changelog.gz)
install(FILES ${generated_dir}/changelog.gz ${generated_dir}/copyright DESTINATION share/doc/gpudoctor
        PERMISSIONS ${document_permissions})

# Shell completion and man pages, from the built program (cmake/program_docs.cmake). Not in fuzzing builds,
# which build only the fuzz targets.
if(TARGET gpudoctor AND NOT GPUDOCTOR_FUZZ)
  set(completion_dir ${CMAKE_BINARY_DIR}/completion)
  add_custom_command(
    OUTPUT ${completion_dir}/gpudoctor ${completion_dir}/_gpudoctor
    COMMAND ${CMAKE_COMMAND} -DMODE=completion -DPROGRAM=$<TARGET_FILE:gpudoctor> -DOUTPUT_DIR=${completion_dir}
            -P ${PROJECT_SOURCE_DIR}/cmake/program_docs.cmake
    DEPENDS gpudoctor ${PROJECT_SOURCE_DIR}/cmake/program_docs.cmake
    COMMENT "Generating bash and zsh completion")
  add_custom_target(gpudoctor_completion ALL DEPENDS ${completion_dir}/gpudoctor ${completion_dir}/_gpudoctor)
  install(FILES ${completion_dir}/gpudoctor DESTINATION share/bash-completion/completions
          PERMISSIONS ${document_permissions})
  install(FILES ${completion_dir}/_gpudoctor DESTINATION share/zsh/vendor-completions
          PERMISSIONS ${document_permissions})

  find_program(GPUDOCTOR_HELP2MAN help2man DOC "makes the man pages from the programs' --help")
  if(GPUDOCTOR_HELP2MAN)
    set(man_dir ${CMAKE_BINARY_DIR}/man)
    add_custom_command(
      OUTPUT ${man_dir}/man.stamp
      COMMAND ${CMAKE_COMMAND} -DMODE=man -DPROGRAM=$<TARGET_FILE:gpudoctor> -DPROBE=$<TARGET_FILE:gpudoctor-probe>
              -DHELP2MAN=${GPUDOCTOR_HELP2MAN} -DVERSION=${GPUDOCTOR_EFFECTIVE_VERSION}
              -DEPOCH=${GPUDOCTOR_BUILD_EPOCH} -DOUTPUT_DIR=${man_dir} -P ${PROJECT_SOURCE_DIR}/cmake/program_docs.cmake
      COMMAND ${CMAKE_COMMAND} -E touch ${man_dir}/man.stamp
      DEPENDS gpudoctor gpudoctor-probe ${PROJECT_SOURCE_DIR}/cmake/program_docs.cmake
      COMMENT "Generating the man pages with help2man")
    add_custom_target(gpudoctor_man_pages ALL DEPENDS ${man_dir}/man.stamp)
    install(DIRECTORY ${man_dir}/man1/ DESTINATION share/man/man1 FILE_PERMISSIONS ${document_permissions})
  else()
    message(STATUS "help2man not found: no man pages (scripts/install-deps.sh --test installs it)")
  endif()
endif()

# The package.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpudoctor)
set(CPACK_PACKAGE_VERSION ${GPUDOCTOR_EFFECTIVE_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU server health: checks, history, metrics, alerts and diagnostics")
# Lines of at most 80 columns, as Debian's tools show them.
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "gpudoctor finds GPU server problems early, explains them, and says what\n"
       "to do. It reads every NVIDIA GPU through NVML in a separate probe process\n"
       "with a deadline, so a hung driver becomes a finding instead of a hung\n"
       "monitor. It reads the kernel log for Xids and other GPU events, and turns\n"
       "what it sees into findings with evidence, cause and next steps.\n"
       "`gpudoctor check` is a health check with Nagios exit codes. The agent\n"
       "(gpudoctor-agent.service) keeps history, exports Prometheus metrics, serves\n"
       "a dashboard and sends alerts. Only reading real GPUs needs the NVIDIA driver.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUDOCTOR_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${packaging_dir}/conffiles ${packaging_dir}/postinst ${packaging_dir}/prerm
    ${packaging_dir}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
