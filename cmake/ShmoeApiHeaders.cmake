# The public headers, as a build against shmoe reads them: ${SHMOE_API_INCLUDE_DIR}
# (build/include) is the include directory of the build tree and what `cmake --install` installs.
#
# shmem.h and pshmem.h are generated: the C preprocessor expands the declaration macros of
# include/shmoe/functions.h over the type tables (the one place each family's signature is
# written), and the flat prototypes it yields, one per line, replace @SHMOE_PROTOTYPES@ in
# include/shmem.h.in and include/pshmem.h.in. So a reader (and an editor's completion) sees
#   void shmem_long_put(long *dest, const long *source, size_t nelems, int pe);
# shmoe/generic.h is generated too: its C++ overloads are written out from its C11 selections and
# those prototypes. The other public headers are copied as they are. Generated when CMake configures, and again
# whenever one of the inputs changes (they are configure dependencies).
set(SHMOE_API_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
set(api_source_dir ${PROJECT_SOURCE_DIR}/include)

# The prototypes of shmoe/functions.h with the name prefix `prefix` (empty, or p), one per line.
function(shmoe_flat_prototypes prefix out_var)
  set(driver ${PROJECT_BINARY_DIR}/cmake/api_prototypes_${prefix}.c)
  # The tables' own typedefs and system headers come before the marker and are dropped.
  file(WRITE ${driver} "#include \"shmoe/collective_types.h\"\nshmoe_prototypes_begin\n"
                       "#include \"shmoe/functions.h\"\n")
  execute_process(
    COMMAND ${CMAKE_C_COMPILER} -std=c11 -E -P -I${api_source_dir} -DSHMOE_PREFIX=${prefix}
            ${driver}
    OUTPUT_VARIABLE text ERROR_VARIABLE errors RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "preprocessing shmoe/functions.h failed:\n${errors}")
  endif()
  string(FIND "${text}" "shmoe_prototypes_begin" begin)
  if(begin EQUAL -1)
    message(FATAL_ERROR "the preprocessed shmoe/functions.h lost its start marker")
  endif()
  math(EXPR begin "${begin} + 22")
  string(SUBSTRING "${text}" ${begin} -1 text)
  # One declaration per line, in the spacing of the OpenSHMEM specification: `long *dest`.
  string(REGEX REPLACE "[ \t\r\n]+" " " text "${text}")
  string(REGEX REPLACE " *\\* *" " *" text "${text}")
  string(REGEX REPLACE " *\\( *" "(" text "${text}")
  string(REGEX REPLACE " *\\)" ")" text "${text}")
  string(REGEX REPLACE " *, *" ", " text "${text}")
  string(STRIP "${text}" text)
  string(REGEX REPLACE " *; *" ";\n" text "${text}")
  # SHMOE_C_ONLY marks a declaration C++ must not see (the type-generic overloads take its name);
  # the library file that defines it (SHMOE_NO_CXX_OVERLOADS) sees it.
  string(REGEX REPLACE "SHMOE_C_ONLY ([^\n]*\n)"
         "#if !defined(__cplusplus) || defined(SHMOE_NO_CXX_OVERLOADS)\n\\1#endif\n" text "${text}")
  if(text MATCHES "SHMOE_[A-Z_]*\\(|##")
    message(FATAL_ERROR "shmoe/functions.h left a macro unexpanded:\n${text}")
  endif()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# The C++ overloads of the type-generic names: for each name the C11 selection of
# shmoe/generic.h.in defines (over SHMOE_GENERIC_CTX, _ARG0 or _ARG1; the names deprecated by 1.4
# have no C++ form), the preprocessor expands a call of it, and each function it can select
# becomes `inline RET NAME(PARAMS) { return TYPED(ARGS); }`, with the prototype from `prototypes`.
function(shmoe_cxx_overloads prototypes out_var)
  file(READ ${api_source_dir}/shmoe/generic.h.in generic)
  string(REPLACE "\\\n" " " generic "${generic}")  # one line per definition
  string(REGEX MATCHALL "#define shmem_[a-z_0-9]+\\(\\.\\.\\.\\)[^\n]*" defines "${generic}")
  set(driver_text "#include \"shmoe/collective_types.h\"\n#include \"shmoe/generic.h.in\"\n")
  set(families "")
  foreach(define IN LISTS defines)
    if(define MATCHES "SHMOE_GENERIC_(CTX|ARG0|ARG1)" AND NOT define MATCHES "SHMOE_DEPRECATED_")
      string(REGEX MATCH "shmem_[a-z_0-9]+" name "${define}")
      list(APPEND families ${name})
      string(APPEND driver_text "shmoe_family ${name} ${name}(shmoe_arg0, shmoe_arg1)\n")
    endif()
  endforeach()
  set(driver ${PROJECT_BINARY_DIR}/cmake/api_generic_families.c)
  file(WRITE ${driver} "${driver_text}")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -std=c11 -E -P -I${api_source_dir} ${driver}
                  OUTPUT_VARIABLE text ERROR_VARIABLE errors RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "preprocessing shmoe/generic.h.in failed:\n${errors}")
  endif()
  string(REGEX REPLACE "[ \t\r\n]+" " " text "${text}")
  string(REPLACE "shmoe_family " "\n" text "${text}")

  # name -> return type and parameters, from the flat prototypes.
  string(REPLACE ";" "" prototypes "${prototypes}")  # a CMake list's separator
  string(REGEX MATCHALL "[^\n]+" lines "${prototypes}")
  foreach(line IN LISTS lines)
    if(line MATCHES "^(.*[ *])(shmem_[a-z_0-9]+)\\((.*)\\)$")
      set(ret_${CMAKE_MATCH_2} "${CMAKE_MATCH_1}")
      set(params_${CMAKE_MATCH_2} "${CMAKE_MATCH_3}")
    endif()
  endforeach()

  set(out "")
  string(REGEX MATCHALL "[^\n]+" expansions "${text}")
  foreach(expansion IN LISTS expansions)
    string(REGEX MATCH "^shmem_[a-z_0-9]+" name "${expansion}")
    if(NOT name IN_LIST families)
      continue()
    endif()
    string(REGEX MATCHALL ": shmem_[a-z_0-9]+" typed "${expansion}")
    string(REPLACE ": " "" typed "${typed}")
    list(REMOVE_DUPLICATES typed)
    if(typed STREQUAL "")
      message(FATAL_ERROR "the C11 selection ${name} of shmoe/generic.h.in selects no function")
    endif()
    foreach(fn IN LISTS typed)
      if(NOT DEFINED params_${fn})
        message(FATAL_ERROR "${name} selects ${fn}, which shmem.h does not declare")
      endif()
      string(REPLACE ", " ";" param_list "${params_${fn}}")
      set(args "")
      foreach(param IN LISTS param_list)
        string(REGEX MATCH "[A-Za-z_][A-Za-z_0-9]*$" arg "${param}")
        list(APPEND args ${arg})
      endforeach()
      string(REPLACE ";" ", " args "${args}")
      string(APPEND out "inline ${ret_${fn}}${name}(${params_${fn}}) { return ${fn}(${args}); }\n")
    endforeach()
  endforeach()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE api_sources RELATIVE ${api_source_dir} CONFIGURE_DEPENDS ${api_source_dir}/*)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${api_source_dir}/shmoe/functions.h ${api_source_dir}/shmoe/type_tables.h
             ${api_source_dir}/shmoe/collective_types.h ${api_source_dir}/shmoe/generic.h.in)
shmoe_flat_prototypes("" SHMOE_PROTOTYPES)
configure_file(${api_source_dir}/shmem.h.in ${SHMOE_API_INCLUDE_DIR}/shmem.h @ONLY)
shmoe_cxx_overloads("${SHMOE_PROTOTYPES}" SHMOE_CXX_OVERLOADS)
configure_file(${api_source_dir}/shmoe/generic.h.in ${SHMOE_API_INCLUDE_DIR}/shmoe/generic.h @ONLY)
shmoe_flat_prototypes(p SHMOE_PROTOTYPES)
configure_file(${api_source_dir}/pshmem.h.in ${SHMOE_API_INCLUDE_DIR}/pshmem.h @ONLY)
# The rest as they are; functions.h is the generator's input, not a header of the install.
foreach(file IN LISTS api_sources)
  if(NOT file MATCHES "\\.in$" AND NOT file STREQUAL "shmoe/functions.h")
    configure_file(${api_source_dir}/${file} ${SHMOE_API_INCLUDE_DIR}/${file} COPYONLY)
  endif()
endforeach()
